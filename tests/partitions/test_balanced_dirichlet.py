import numpy as np
import pytest

import partitions
from partitions.metrics import heterogeneity


def test_sizes_are_equal_with_the_remainder_on_the_first_partitions(mnist_like_labels):
    partition = partitions.balanced_dirichlet(mnist_like_labels, 7, alpha=0.1, seed=0)
    assert partition.sizes.tolist() == [8572, 8572, 8572, 8571, 8571, 8571, 8571]
    assert partition.unassigned.size == 0


def test_large_alpha_approaches_iid(mnist_like_labels):
    partition = partitions.balanced_dirichlet(mnist_like_labels, 10, alpha=1000.0, seed=0)
    assert np.allclose(partition.label_distribution(mnist_like_labels), 0.1, atol=0.02)


def test_small_alpha_skews_the_labels(mnist_like_labels):
    skewed, near_iid = (heterogeneity(partitions.balanced_dirichlet(mnist_like_labels, 20, alpha=alpha, seed=0),
                                      mnist_like_labels) for alpha in (0.1, 100.0))
    assert skewed["mean_emd"] > 1.0 > 0.2 > near_iid["mean_emd"]
    assert skewed["mean_effective_num_classes"] < 5 < 9 < near_iid["mean_effective_num_classes"]
    assert skewed["size_cv"] == near_iid["size_cv"] == 0.0


def test_smaller_alpha_gives_more_skew(mnist_like_labels):
    emd = [heterogeneity(partitions.balanced_dirichlet(mnist_like_labels, 20, alpha=alpha, seed=1),
                         mnist_like_labels)["mean_emd"] for alpha in (0.05, 0.5, 5.0, 50.0)]
    assert emd == sorted(emd, reverse=True)


@pytest.mark.parametrize("alpha", [1e-4, 0.01])
def test_tiny_alpha_fills_every_quota_when_the_favoured_classes_run_out(alpha):
    labels = np.repeat(np.arange(10), [500, 3, 40, 200, 7, 1000, 60, 5, 90, 95])
    partition = partitions.balanced_dirichlet(labels, 100, alpha=alpha, seed=0)
    assert set(partition.sizes.tolist()) == {20}
    assert partition.unassigned.size == 0


def test_classes_absent_from_labels_are_fine():
    labels = np.array([0] * 30 + [5] * 31)  # classes 1..4 do not occur
    partition = partitions.balanced_dirichlet(labels, 4, alpha=[1.0] * 6, seed=0)
    assert partition.sizes.tolist() == [16, 15, 15, 15]


def test_records_scheme_parameters_and_seed(mnist_like_labels):
    partition = partitions.balanced_dirichlet(mnist_like_labels, 5, alpha=0.5, seed=7)
    assert partition.scheme == "balanced_dirichlet"
    assert partition.seed == 7
    assert partition.params == {"num_partitions": 5, "alpha": 0.5}
