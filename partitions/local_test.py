"""Local test sets: each partition holds back a share of its samples to test on (FL-bench's, PFLlib's local test)."""

from __future__ import annotations

import numpy as np

from ._checks import check_seed
from ._errors import SettingError
from .partition import Partition

_STREAM = 1  # the split's random stream beside the seed


def split_local_test(partition: Partition, labels, fraction: float, *, seed: int | None = None) -> Partition:
    """Hold back ``fraction`` of each partition's samples as its local test set, stratified by label.

    Within a partition, each class's samples go to the test set in the share ``fraction``,
    rounded (so that a partition's test set has its training set's label mix); a class too rare
    for its share to round to one sample stays in training. A partition whose classes all are
    that rare gives one sample at random, so that every partition can be tested. Multi-hot
    labels (samples x classes) are split at random, unstratified.

    Parameters
    ----------
    partition : Partition
        Without a local test split already.
    labels : array_like
        One class id per sample (or a multi-hot row).
    fraction : float
        In (0, 1): the share of each partition's samples held back.
    seed : int, optional
        Seed for ``np.random.default_rng``: the same seed gives the same split.

    Returns
    -------
    Partition
        Its indices are the partitions' training samples and its ``local_test`` their test
        samples; ``params["local_test_fraction"]`` records ``fraction``.

    Raises
    ------
    ValueError
        If ``fraction`` is not in (0, 1), or a partition has fewer than two samples.

    Examples
    --------
    >>> from partitions import iid
    >>> labels = np.repeat([0, 1], 10)
    >>> p = split_local_test(iid(labels, 2, seed=0), labels, 0.2, seed=0)
    >>> p.sizes.tolist(), [part.size for part in p.local_test]
    ([8, 8], [2, 2])
    """
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise SettingError("{local_test_fraction:name} must be in (0, 1), got {got:text}: a share of each client's "
                           "samples, leaving some to train on and some to test on", local_test_fraction=fraction,
                           got=f"{fraction:g}")
    if partition.local_test is not None:
        raise SettingError("{partition:name} has a local test split already")
    labels = np.asarray(labels)
    seed = check_seed(seed)
    # a stream of its own: the partitioner given the same seed drew from default_rng(seed)
    rng = np.random.default_rng(None if seed is None else [seed, _STREAM])
    train, test = [], []
    for pid, part in enumerate(partition):
        if part.size < 2:
            raise SettingError("{local_test_fraction:name} needs two samples in every client, one to train on and "
                               "one to test on; client {client:text} holds {size:text}", local_test_fraction=fraction,
                               client=pid, size=part.size)
        held = _held_back(part, labels[part] if labels.ndim == 1 else None, fraction, rng)
        test.append(part[held])
        train.append(part[~held])
    params = {**partition.params, "local_test_fraction": fraction}
    return Partition(train, partition.num_samples, partition.scheme, params, partition.seed, local_test=test)


def _held_back(part: np.ndarray, part_labels: np.ndarray | None, fraction: float, rng) -> np.ndarray:
    """Return the mask of ``part``'s samples held back: ``fraction`` of each class, rounded, drawn from ``rng``."""
    held = np.zeros(part.size, dtype=bool)
    groups = [np.arange(part.size)] if part_labels is None else [
        np.flatnonzero(part_labels == label) for label in np.unique(part_labels)]
    for members in groups:
        count = min(int(np.floor(fraction * members.size + 0.5)), members.size - 1)
        held[rng.choice(members, size=count, replace=False)] = True
    if not held.any():
        held[rng.integers(part.size)] = True
    return held
