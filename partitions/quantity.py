"""Quantity skew: partition sizes drawn from a Dirichlet, labels IID (NIID-Bench ``iid-diff-quantity``)."""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_concentration,
    check_integer,
    check_min_partition_size,
    check_num_partitions,
    check_num_samples,
    check_seed,
    draw_until_min_size,
)
from ._layout import cut_counts
from .partition import Partition


def quantity_skew(
    labels_or_n,
    num_partitions: int,
    alpha,
    *,
    min_partition_size: int = 10,
    max_tries: int = 10,
    seed: int | None = None,
) -> Partition:
    """Draw partition sizes ``q ~ Dir(alpha)`` and fill them from a seeded permutation.

    Every partition sees the global label distribution in expectation; only the amounts
    differ. The draw is repeated until the smallest partition holds ``min_partition_size``
    samples, at most ``max_tries`` times (NIID-Bench retries without bound).

    Parameters
    ----------
    labels_or_n : int or array_like
        The number of samples, or any array whose first axis runs over samples.
    num_partitions : int
        Number of partitions, between 1 and the number of samples.
    alpha : float or array_like of float
        Concentration, > 0: a scalar or one value per partition.
    min_partition_size : int, default 10
    max_tries : int, default 10
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Examples
    --------
    >>> p = quantity_skew(1000, 4, alpha=1.0, seed=0)
    >>> int(p.sizes.sum()), bool(p.sizes.min() >= 10)
    (1000, True)
    """
    n = check_num_samples(labels_or_n)
    num_partitions = check_num_partitions(num_partitions, n)
    alpha = check_concentration(alpha, "alpha", length=num_partitions, what="partition", plural="partitions")
    min_partition_size = check_min_partition_size(min_partition_size, n, num_partitions)
    max_tries = check_integer("max_tries", max_tries)
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    concentration = np.broadcast_to(alpha, (num_partitions,))

    def draw():
        sizes = cut_counts(rng.dirichlet(concentration), n)
        return sizes, sizes.min()

    sizes = draw_until_min_size(draw, min_partition_size, max_tries, alpha=alpha, num_partitions=num_partitions)
    parts = np.split(rng.permutation(n), np.cumsum(sizes)[:-1])
    params = {"num_partitions": num_partitions, "alpha": alpha.tolist(), "min_partition_size": min_partition_size}
    return Partition(parts, n, "quantity_skew", params, seed)
