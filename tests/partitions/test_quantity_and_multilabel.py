import numpy as np
import pytest
from .partition_checks import assert_covers_each_index_once

import partitions


def test_quantity_skew_keeps_labels_iid(mnist_like_labels):
    partition = partitions.quantity_skew(mnist_like_labels, 10, 0.5, seed=0)
    assert partition.sizes.std() > 0.3 * partition.sizes.mean()
    shares = partition.label_distribution(mnist_like_labels)
    big = partition.sizes > 2000
    assert np.allclose(shares[big], 0.1, atol=0.03)


def test_quantity_skew_accepts_a_count():
    partition = partitions.quantity_skew(500, 5, 10.0, seed=1)
    assert_covers_each_index_once(partition, 500)


def test_multilabel_each_sample_once_and_single_labels_follow_dirichlet():
    rng = np.random.default_rng(0)
    matrix = rng.random((3000, 8)) < 0.25
    partition = partitions.multilabel_dirichlet(matrix, 6, 0.3, seed=0)
    assert_covers_each_index_once(partition, 3000)
    counts = partition.counts(matrix)
    assert counts.shape == (6, 8)
    assert counts.sum() == matrix.sum()
    # a smaller alpha concentrates each class on fewer partitions
    even = partitions.multilabel_dirichlet(matrix, 6, 100.0, seed=0).counts(matrix)
    assert (counts.max(axis=0) / counts.sum(axis=0)).mean() > 1.5 * (even.max(axis=0) / even.sum(axis=0)).mean()


def test_multilabel_one_hot_matrix_matches_label_skew():
    labels = np.repeat(np.arange(5), 200)
    one_hot = np.eye(5, dtype=bool)[labels]
    partition = partitions.multilabel_dirichlet(one_hot, 5, 1000.0, seed=0)
    assert np.allclose(partition.label_distribution(labels), 0.2, atol=0.06)


def test_multilabel_rejects_non_binary_matrix():
    with pytest.raises(ValueError, match="label_matrix"):
        partitions.multilabel_dirichlet(np.full((10, 3), 2), 2, 1.0)


def test_feature_noise_levels_rise_linearly():
    assert partitions.feature_noise_levels(5, 0.2).tolist() == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    assert partitions.feature_noise_levels(1, 0.2).tolist() == [0.0]
    with pytest.raises(ValueError, match="sigma"):
        partitions.feature_noise_levels(3, -1.0)
