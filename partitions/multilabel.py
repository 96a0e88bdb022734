"""Label skew for multi-label data: each sample follows the Dirichlet shares of its labels."""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_concentration,
    check_integer,
    check_label_matrix,
    check_min_partition_size,
    check_num_partitions,
    check_seed,
    draw_until_min_size,
)
from ._layout import split_by_owner
from .partition import Partition

# Rows of (samples x partitions) probabilities materialised at once: bounds memory to ~64 MB.
_CHUNK_ELEMENTS = 1 << 23


def multilabel_dirichlet(
    label_matrix,
    num_partitions: int,
    alpha,
    *,
    min_partition_size: int = 10,
    max_tries: int = 10,
    seed: int | None = None,
) -> Partition:
    """Split multi-label samples so that each class is skewed across partitions as in `dirichlet`.

    The rule: every class ``c`` draws partition shares ``p_c ~ Dir(alpha_c * 1_K)``; a sample
    whose label set is ``S`` goes to partition ``k`` with probability
    ``mean_{c in S} p_c[k]``. A single-label sample therefore follows its class's shares
    exactly as in `dirichlet` (in expectation), and a sample with several labels is pulled
    towards the partitions its labels share. A sample with no label goes to a partition
    uniformly at random. The draw is repeated until every partition holds at least
    ``min_partition_size`` samples, at most ``max_tries`` times.

    Parameters
    ----------
    label_matrix : array_like
        Multi-hot (samples x classes) matrix of 0/1 or booleans.
    num_partitions : int
        Number of partitions, between 1 and the number of samples.
    alpha : float or array_like of float
        Concentration, > 0: a scalar or one value per class (column).
    min_partition_size : int, default 10
    max_tries : int, default 10
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition
        Each sample is in exactly one partition; `Partition.counts` on the matrix counts a
        sample once per label it carries.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.random((200, 5)) < 0.3
    >>> int(multilabel_dirichlet(y, 4, alpha=0.5, seed=0).sizes.sum())
    200
    """
    matrix = check_label_matrix(label_matrix)
    n, num_classes = matrix.shape
    num_partitions = check_num_partitions(num_partitions, n)
    alpha = check_concentration(alpha, "alpha", length=num_classes)
    min_partition_size = check_min_partition_size(min_partition_size, n, num_partitions)
    max_tries = check_integer("max_tries", max_tries)
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    class_alpha = np.broadcast_to(alpha, (num_classes,))

    def draw():
        shares = np.stack([rng.dirichlet(np.full(num_partitions, a)) for a in class_alpha])
        owner = _sample_owners(matrix, shares, rng)
        return owner, np.bincount(owner, minlength=num_partitions).min()

    owner = draw_until_min_size(draw, min_partition_size, max_tries, alpha=alpha, num_partitions=num_partitions)
    params = {"num_partitions": num_partitions, "alpha": alpha.tolist(), "min_partition_size": min_partition_size}
    return Partition(split_by_owner(owner, num_partitions), n, "multilabel_dirichlet", params, seed)


def _sample_owners(matrix: np.ndarray, shares: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw one partition per sample with probability proportional to the sum of its labels' shares."""
    n, num_partitions = matrix.shape[0], shares.shape[1]
    owner = np.empty(n, dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // num_partitions)
    for start in range(0, n, rows):
        weights = matrix[start : start + rows].astype(float) @ shares
        weights[weights.sum(axis=1) == 0] = 1.0  # no labels: uniform
        cdf = np.cumsum(weights, axis=1)
        u = rng.random(cdf.shape[0]) * cdf[:, -1]
        owner[start : start + rows] = np.minimum((cdf <= u[:, None]).sum(axis=1), num_partitions - 1)
    return owner
