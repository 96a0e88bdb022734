"""Dirichlet label skew (Hsu et al. 2019; NIID-Bench's ``noniid-labeldir``)."""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_concentration,
    check_integer,
    check_labels,
    check_min_partition_size,
    check_num_partitions,
    check_seed,
    draw_until_min_size,
)
from ._errors import SettingError
from ._layout import class_blocks, cut_counts, split_class_blocks
from .partition import Partition


def dirichlet(
    labels,
    num_partitions: int,
    alpha,
    *,
    min_partition_size: int = 10,
    self_balancing: bool = False,
    max_tries: int = 10,
    seed: int | None = None,
) -> Partition:
    """Split each class among the partitions in proportions drawn from Dir(alpha).

    For every class ``c`` a vector ``p ~ Dir(alpha_c * 1_K)`` is drawn and the class's samples
    (shuffled) are cut at ``cumsum(p) * n_c``. Small ``alpha`` concentrates each class on few
    partitions; large ``alpha`` approaches IID. The whole draw is repeated until every
    partition holds at least ``min_partition_size`` samples, at most ``max_tries`` times.

    Follows Hsu et al., "Measuring the Effects of Non-Identical Data Distribution for Federated
    Visual Classification" (2019) and NIID-Bench (Li et al., ICDE 2022). Deviations: NIID-Bench
    retries without bound; here the retries are bounded and then an error says what would work.

    Parameters
    ----------
    labels : array_like of int
        One class id per sample.
    num_partitions : int
        Number of partitions ``K``, between 1 and the number of samples.
    alpha : float or array_like of float
        Concentration, > 0: a scalar, or one value per class (``max(labels) + 1`` values).
    min_partition_size : int, default 10
        Smallest acceptable partition; ``0`` accepts any draw.
    self_balancing : bool, default False
        NIID-Bench's balance step: while classes are dealt in order, a partition that already
        holds ``N / K`` samples or more gets no share of the next classes.
    max_tries : int, default 10
        Number of draws before giving up with a ``ValueError``.
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Raises
    ------
    ValueError
        If no draw in ``max_tries`` meets ``min_partition_size``; the message gives the
        largest minimum reached and the parameters that would help.

    Examples
    --------
    >>> labels = np.repeat(np.arange(10), 100)
    >>> p = dirichlet(labels, 5, alpha=0.5, seed=0)
    >>> int(p.sizes.sum()), p.num_partitions
    (1000, 5)
    """
    labels = check_labels(labels)
    num_partitions = check_num_partitions(num_partitions, labels.size)
    num_classes = int(labels.max()) + 1
    alpha = check_concentration(alpha, "alpha", length=num_classes)
    min_partition_size = check_min_partition_size(min_partition_size, labels.size, num_partitions)
    max_tries = check_integer("max_tries", max_tries)
    seed = check_seed(seed)

    rng = np.random.default_rng(seed)
    order, class_sizes = class_blocks(labels, num_classes, rng)
    class_alpha = np.broadcast_to(alpha, (num_classes,))

    def draw():
        counts = _draw_counts(class_sizes, class_alpha, num_partitions, self_balancing, rng)
        return counts, counts.sum(axis=0).min()

    counts = draw_until_min_size(
        draw, min_partition_size, max_tries, alpha=alpha, num_partitions=num_partitions,
        also=None if self_balancing else SettingError("turn on {self_balancing:name}"),
    )
    params = {
        "num_partitions": num_partitions,
        "alpha": alpha.tolist(),
        "min_partition_size": min_partition_size,
        "self_balancing": bool(self_balancing),
    }
    return Partition(split_class_blocks(order, class_sizes, counts), labels.size, "dirichlet", params, seed)


def _draw_counts(
    class_sizes: np.ndarray,
    class_alpha: np.ndarray,
    num_partitions: int,
    self_balancing: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """Return one draw of the (classes x partitions) count table."""
    counts = np.zeros((class_sizes.size, num_partitions), dtype=np.int64)
    held = np.zeros(num_partitions, dtype=np.int64)
    cap = class_sizes.sum() / num_partitions
    for c, (size, concentration) in enumerate(zip(class_sizes, class_alpha)):
        share = rng.dirichlet(np.full(num_partitions, concentration))
        if self_balancing:
            open_partitions = held < cap
            share = share * open_partitions
            # Tiny alpha can put all the mass on full partitions: share evenly among the open ones.
            share = share / share.sum() if share.sum() > 0 else open_partitions / open_partitions.sum()
        counts[c] = cut_counts(share, size)
        held += counts[c]
    return counts
