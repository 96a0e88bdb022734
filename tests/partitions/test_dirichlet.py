import numpy as np
import pytest
from .partition_checks import assert_covers_each_index_once

import partitions


def test_small_alpha_concentrates_each_class(mnist_like_labels):
    counts = partitions.dirichlet(mnist_like_labels, 10, 0.05, min_partition_size=0, seed=0).counts(mnist_like_labels)
    largest_share = counts.max(axis=0) / counts.sum(axis=0)
    assert largest_share.mean() > 0.6


def test_large_alpha_approaches_iid(mnist_like_labels):
    counts = partitions.dirichlet(mnist_like_labels, 10, 1000.0, seed=0).counts(mnist_like_labels)
    assert np.allclose(counts / counts.sum(axis=1, keepdims=True), 0.1, atol=0.02)


def test_per_class_alpha_skews_only_the_small_alpha_classes(mnist_like_labels):
    alpha = np.full(10, 1000.0)
    alpha[0] = 0.01
    counts = partitions.dirichlet(mnist_like_labels, 10, alpha, min_partition_size=0, seed=3).counts(mnist_like_labels)
    shares = counts / counts.sum(axis=0)
    assert shares[:, 0].max() > 0.9
    assert np.allclose(shares[:, 1:], 0.1, atol=0.03)


def test_self_balancing_evens_out_sizes(mnist_like_labels):
    spread = {}
    for balanced in (False, True):
        sizes = [
            partitions.dirichlet(mnist_like_labels, 20, 0.3, self_balancing=balanced, seed=s).sizes for s in range(5)
        ]
        spread[balanced] = np.mean([size.std() / size.mean() for size in sizes])
    assert spread[True] < spread[False]


def test_tiny_alpha_with_many_partitions_returns_or_raises_at_once():
    labels = np.random.default_rng(0).integers(0, 100, 100_000)
    with pytest.raises(ValueError, match=r"min_partition_size.*alpha") as error:
        partitions.dirichlet(labels, 1000, 0.01, min_partition_size=10, seed=0)
    # The message names a minimum size that the same call does reach.
    reachable = int(str(error.value).split("Use `min_partition_size` <= ")[1].split(",")[0])
    partition = partitions.dirichlet(labels, 1000, 0.01, min_partition_size=reachable, seed=0)
    assert partition.sizes.min() >= reachable
    assert_covers_each_index_once(partition, labels.size)


def test_records_scheme_parameters_and_seed(mnist_like_labels):
    partition = partitions.dirichlet(mnist_like_labels, 5, 0.5, seed=7)
    assert partition.scheme == "dirichlet"
    assert partition.seed == 7
    assert partition.params == {"num_partitions": 5, "alpha": 0.5, "min_partition_size": 10, "self_balancing": False}


def test_float_labels_with_integer_values_are_accepted():
    labels = np.repeat(np.arange(4.0), 25)
    assert partitions.dirichlet(labels, 2, 1.0, seed=0).sizes.sum() == 100


@pytest.mark.parametrize("self_balancing", [False, True])
def test_a_failed_minimum_size_advises_only_what_is_not_done_already(mnist_like_labels, self_balancing):
    with pytest.raises(ValueError, match="`min_partition_size`=500") as error:
        partitions.dirichlet(mnist_like_labels, 20, 0.01, min_partition_size=500, max_tries=2,
                             self_balancing=self_balancing, seed=0)
    assert ("turn on `self_balancing`" in str(error.value)) is not self_balancing
