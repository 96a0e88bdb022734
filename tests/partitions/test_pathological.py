import warnings

import numpy as np
import pytest

import partitions


@pytest.mark.parametrize("mode", ["random", "deterministic", "first-deterministic"])
def test_each_class_split_evenly_among_its_holders(mnist_like_labels, mode):
    partition = partitions.pathological(mnist_like_labels, 30, 3, class_assignment_mode=mode, seed=0)
    counts = partition.counts(mnist_like_labels)
    for column in counts.T:
        held = column[column > 0]
        if held.size:
            assert held.max() - held.min() <= 1
            assert held.sum() == 6000


def test_deterministic_mode_takes_consecutive_classes(mnist_like_labels):
    counts = partitions.pathological(mnist_like_labels, 12, 2, class_assignment_mode="deterministic").counts(
        mnist_like_labels
    )
    for p, row in enumerate(counts):
        assert set(np.flatnonzero(row)) == {p % 10, (p + 1) % 10}


def test_first_deterministic_mode_fixes_the_first_class(mnist_like_labels):
    counts = partitions.pathological(
        mnist_like_labels, 10, 3, class_assignment_mode="first-deterministic", seed=1
    ).counts(mnist_like_labels)
    assert all(row[p % 10] > 0 for p, row in enumerate(counts))


def test_unheld_class_is_reported_with_existing_parameter_names(mnist_like_labels):
    with pytest.warns(UserWarning, match="held by no partition") as record:
        partition = partitions.pathological(mnist_like_labels, 2, 1, seed=0)
    message = str(record[0].message)
    assert "num_classes_per_partition" in message and "class_assignment_mode" in message
    assert partition.unassigned.size == 8 * 6000


def test_classes_absent_from_labels_are_not_assigned():
    labels = np.array([0] * 10 + [5] * 10)  # classes 1..4 do not occur
    partition = partitions.pathological(labels, 2, 1, class_assignment_mode="deterministic")
    assert partition.sizes.tolist() == [10, 10]


def test_random_mode_can_leave_classes_out_where_first_deterministic_cannot():
    """Why fedsim's #C=k defaults to NIID-Bench's first-deterministic: 10 clients, 10 classes, k = 2."""
    labels = np.repeat(np.arange(10), 30)

    def unheld(mode, seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            partition = partitions.pathological(labels, 10, 2, class_assignment_mode=mode, seed=seed)
        return int(((partition.counts(labels, num_classes=10) > 0).sum(axis=0) == 0).sum())

    assert sum(unheld("random", seed) > 0 for seed in range(20)) >= 10  # three draws in four, in expectation
    assert all(unheld("first-deterministic", seed) == 0 for seed in range(20))
