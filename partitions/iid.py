"""IID partitioning: a seeded permutation cut into near-equal parts."""

from __future__ import annotations

import numpy as np

from ._checks import check_num_partitions, check_num_samples, check_seed
from .partition import Partition


def iid(labels_or_n, num_partitions: int, *, seed: int | None = None) -> Partition:
    """Split samples uniformly at random into ``num_partitions`` parts whose sizes differ by at most one.

    Parameters
    ----------
    labels_or_n : int or array_like
        The number of samples, or any array whose first axis runs over samples.
    num_partitions : int
        Number of parts, between 1 and the number of samples.
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Examples
    --------
    >>> iid(10, 3, seed=0).sizes.tolist()
    [4, 3, 3]
    """
    n = check_num_samples(labels_or_n)
    num_partitions = check_num_partitions(num_partitions, n)
    seed = check_seed(seed)
    permutation = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(permutation, num_partitions)
    return Partition(parts, n, "iid", {"num_partitions": num_partitions}, seed)
