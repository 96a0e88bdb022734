"""Turning a (classes x partitions) table of counts into index arrays, shared by the label-skew schemes."""

from __future__ import annotations

import numpy as np


def class_blocks(labels: np.ndarray, num_classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Return the sample indices grouped by class (shuffled within each class) and the class sizes.

    Position ``offsets[c]:offsets[c + 1]`` of the returned order holds class ``c``'s samples,
    where ``offsets`` is the cumulative sum of the class sizes.
    """
    shuffled = rng.permutation(labels.size)
    order = shuffled[np.argsort(labels[shuffled], kind="stable")]
    return order, np.bincount(labels, minlength=num_classes)


def split_by_owner(owner: np.ndarray, num_partitions: int) -> list[np.ndarray]:
    """Return, for each partition id, the sorted indices whose ``owner`` is that id (``-1``: nobody)."""
    grouped = np.argsort(owner, kind="stable")
    sizes = np.bincount(owner[owner >= 0], minlength=num_partitions)
    start = owner.size - sizes.sum()  # the unassigned (-1) sort first
    return np.split(grouped[start:], np.cumsum(sizes)[:-1])


def split_class_blocks(order: np.ndarray, class_sizes: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """Deal each class block of ``order`` out in contiguous runs of ``counts[c, k]`` samples.

    ``counts`` is (classes x partitions). A row may sum to less than its class size: the rest
    of that class is left unassigned.
    """
    num_classes, num_partitions = counts.shape
    leftover = class_sizes - counts.sum(axis=1)
    if np.any(leftover < 0):
        raise AssertionError("a class was dealt more samples than it has")
    # One run per (class, partition) plus one unassigned run per class, in the order of `order`.
    runs = np.concatenate([counts, leftover[:, None]], axis=1).ravel()
    run_owner = np.tile(np.append(np.arange(num_partitions), -1), num_classes)
    owner = np.empty(order.size, dtype=np.int64)
    owner[order] = np.repeat(run_owner, runs)
    return split_by_owner(owner, num_partitions)


def cut_counts(share: np.ndarray, total: int) -> np.ndarray:
    """Return integer counts summing to ``total`` from a probability vector, cut at ``cumsum(share) * total``."""
    cuts = np.floor(np.cumsum(share) * total).astype(np.int64)
    cuts[-1] = total  # the float cumsum can end just below 1
    return np.diff(cuts, prepend=0)
