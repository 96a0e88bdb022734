"""Properties every partitioner holds, over random labels, sizes and parameters."""

import numpy as np
from .partition_checks import assert_covers_each_index_once, label_arrays
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

import partitions

SCHEMES = {
    "iid": lambda labels, k, seed: partitions.iid(labels, k, seed=seed),
    "dirichlet": lambda labels, k, seed: partitions.dirichlet(labels, k, 0.5, min_partition_size=0, seed=seed),
    "pathological": lambda labels, k, seed: partitions.pathological(labels, k, 2, seed=seed),
    "shards": lambda labels, k, seed: partitions.shards(labels, k, seed=seed),
    "quantity_skew": lambda labels, k, seed: partitions.quantity_skew(labels, k, 1.0, min_partition_size=0, seed=seed),
    "extended_dirichlet": lambda labels, k, seed: partitions.extended_dirichlet(
        labels, k, num_classes_per_partition=2, alpha=0.5, min_partition_size=0, seed=seed
    ),
    "balanced_dirichlet": lambda labels, k, seed: partitions.balanced_dirichlet(labels, k, alpha=0.5, seed=seed),
}
EXHAUSTIVE = {"iid", "dirichlet", "quantity_skew", "balanced_dirichlet"}

schemes = st.sampled_from(sorted(SCHEMES))


@pytest.mark.filterwarnings("ignore:.*held by no partition")
@settings(max_examples=60, deadline=None)
@given(labels=label_arrays(), k=st.integers(1, 8), seed=st.integers(0, 2**31), scheme=schemes)
def test_every_index_in_at_most_one_partition(labels, k, seed, scheme):
    partition = SCHEMES[scheme](labels, k, seed)
    assert partition.num_partitions == k
    assert_covers_each_index_once(partition, labels.size, exhaustive=scheme in EXHAUSTIVE)
    if scheme not in EXHAUSTIVE:
        assigned = np.concatenate(list(partition))
        assert np.array_equal(np.sort(np.concatenate([assigned, partition.unassigned])), np.arange(labels.size))


@pytest.mark.filterwarnings("ignore:.*held by no partition")
@settings(max_examples=30, deadline=None)
@given(labels=label_arrays(), k=st.integers(2, 8), seed=st.integers(0, 2**31), scheme=schemes)
def test_same_seed_same_partition(labels, k, seed, scheme):
    assert SCHEMES[scheme](labels, k, seed) == SCHEMES[scheme](labels, k, seed)


@pytest.mark.filterwarnings("ignore:.*held by no partition")
def test_different_seed_different_partition():
    labels = np.random.default_rng(1).integers(0, 10, 2000)
    for scheme, make in SCHEMES.items():
        assert make(labels, 10, 0) != make(labels, 10, 1), scheme


@settings(max_examples=40, deadline=None)
@given(labels=label_arrays(min_size=100), k=st.integers(1, 6), alpha=st.floats(0.05, 10), seed=st.integers(0, 2**31))
def test_dirichlet_min_partition_size_honoured(labels, k, alpha, seed):
    min_size = labels.size // (4 * k)
    try:
        partition = partitions.dirichlet(labels, k, alpha, min_partition_size=min_size, max_tries=50, seed=seed)
    except ValueError as error:
        assert "min_partition_size" in str(error)
        return
    assert partition.sizes.min() >= min_size
    assert_covers_each_index_once(partition, labels.size)


@pytest.mark.filterwarnings("ignore:.*held by no partition")
@settings(max_examples=40, deadline=None)
@given(labels=label_arrays(min_size=100), k=st.integers(1, 6), data=st.data())
def test_pathological_exact_number_of_classes(labels, k, data):
    present = np.unique(labels).size
    num_classes_per_partition = data.draw(st.integers(1, present))
    mode = data.draw(st.sampled_from(partitions.pathological.__globals__["CLASS_ASSIGNMENT_MODES"]))
    try:
        partition = partitions.pathological(
            labels, k, num_classes_per_partition, class_assignment_mode=mode, seed=data.draw(st.integers(0, 99))
        )
    except ValueError as error:  # a rare class held by more partitions than it has samples
        assert "num_partitions" in str(error)
        return
    held = (partition.counts(labels) > 0).sum(axis=1)
    assert np.all(held == num_classes_per_partition)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(50, 2000), k=st.integers(1, 10), seed=st.integers(0, 2**31))
def test_quantity_skew_min_size_and_cover(n, k, seed):
    try:
        partition = partitions.quantity_skew(n, k, 2.0, min_partition_size=2, max_tries=50, seed=seed)
    except ValueError as error:
        assert "min_partition_size" in str(error)
        return
    assert partition.sizes.min() >= 2
    assert_covers_each_index_once(partition, n)


@pytest.mark.filterwarnings("ignore:.*held by no partition")
@settings(max_examples=40, deadline=None)
@given(labels=label_arrays(min_size=100), k=st.integers(1, 6), alpha=st.floats(0.05, 10), data=st.data())
def test_extended_dirichlet_exact_number_of_classes_and_held_classes_whole(labels, k, alpha, data):
    present = np.unique(labels).size
    num_classes_per_partition = data.draw(st.integers(1, present))
    mode = data.draw(st.sampled_from(partitions.pathological.__globals__["CLASS_ASSIGNMENT_MODES"]))
    min_size = data.draw(st.integers(0, labels.size // (4 * k)))
    try:
        partition = partitions.extended_dirichlet(
            labels, k, num_classes_per_partition=num_classes_per_partition, alpha=alpha, class_assignment_mode=mode,
            min_partition_size=min_size, max_tries=20, seed=data.draw(st.integers(0, 99)),
        )
    except ValueError as error:  # a rare class with more holders than samples, or the minimum size not reached
        assert "num_partitions" in str(error) or "min_partition_size" in str(error)
        return
    counts = partition.counts(labels)
    assert np.all((counts > 0).sum(axis=1) == num_classes_per_partition)
    assert partition.sizes.min() >= min_size
    # A class is either held whole or, held by nobody, left out whole.
    class_sizes = np.bincount(labels)
    assert np.all((counts.sum(axis=0) == class_sizes) | (counts.sum(axis=0) == 0))
    assert_covers_each_index_once(partition, labels.size, exhaustive=False)
    assert partition.unassigned.size == class_sizes[counts.sum(axis=0) == 0].sum()


@settings(max_examples=40, deadline=None)
@given(labels=label_arrays(), k=st.integers(1, 12), alpha=st.floats(0.01, 100), seed=st.integers(0, 2**31))
def test_balanced_dirichlet_sizes_equal_to_one_sample(labels, k, alpha, seed):
    partition = partitions.balanced_dirichlet(labels, k, alpha=alpha, seed=seed)
    assert sorted(partition.sizes.tolist()) == sorted([labels.size // k + (i < labels.size % k) for i in range(k)])
    assert_covers_each_index_once(partition, labels.size)
