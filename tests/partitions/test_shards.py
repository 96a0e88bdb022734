import numpy as np
import pytest
from .partition_checks import assert_covers_each_index_once

import partitions


def test_reproduces_mcmahan_mnist_layout(mnist_like_labels):
    """100 clients x 2 shards of 300 sorted-by-label samples, as in McMahan et al. (2017)."""
    partition = partitions.shards(mnist_like_labels, 100, seed=0)
    assert partition.params["shard_size"] == 300
    assert partition.sizes.tolist() == [600] * 100
    assert_covers_each_index_once(partition, 60_000)
    counts = partition.counts(mnist_like_labels)
    # 6,000 per class / 300 per shard: every shard is one class, so a client holds one or two classes
    # in multiples of 300.
    assert np.all(counts % 300 == 0)
    assert set((counts > 0).sum(axis=1)) <= {1, 2}
    assert ((counts > 0).sum(axis=1) == 2).mean() > 0.8


def test_remainder_left_unassigned():
    labels = np.repeat(np.arange(3), 11)  # 33 samples, 4 shards of 8
    partition = partitions.shards(labels, 2, seed=0)
    assert partition.sizes.tolist() == [16, 16]
    assert partition.unassigned.size == 1


def test_explicit_shard_size():
    labels = np.repeat(np.arange(10), 10)
    partition = partitions.shards(labels, 5, 3, shard_size=4, seed=0)
    assert partition.sizes.tolist() == [12] * 5


def test_shard_size_too_large_names_the_largest_that_fits():
    with pytest.raises(ValueError, match=r"`shard_size`=30.*<= 25"):
        partitions.shards(np.repeat(np.arange(10), 10), 2, 2, shard_size=30)
