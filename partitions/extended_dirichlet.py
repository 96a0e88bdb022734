"""Extended Dirichlet label skew #C=k + Dir(alpha): k classes per partition, each split by a Dirichlet draw."""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_choice,
    check_concentration,
    check_integer,
    check_labels,
    check_min_partition_size,
    check_num_partitions,
    check_seed,
    draw_until_min_size,
)
from ._errors import SettingError
from ._layout import cut_counts, split_class_blocks
from .partition import Partition
from .pathological import CLASS_ASSIGNMENT_MODES, check_classes_per_partition, hold_classes


def extended_dirichlet(
    labels,
    num_partitions: int,
    *,
    num_classes_per_partition: int,
    alpha,
    class_assignment_mode: str = "first-deterministic",
    min_partition_size: int = 10,
    max_tries: int = 10,
    seed: int | None = None,
) -> Partition:
    """Give every partition exactly ``k`` classes and split each class among its holders by Dir(alpha).

    The classes are chosen as `pathological` chooses them (``class_assignment_mode``); then for
    every class ``c`` held by ``h`` partitions a vector ``p ~ Dir(alpha_c * 1_h)`` is drawn and
    the class's samples (shuffled) are cut among its holders at ``cumsum(p)``. ``k`` bounds how
    many classes a partition sees, as in #C=k; ``alpha`` sets how unevenly the holders share each
    class, as in Dir(alpha): small ``alpha`` gives each class mostly to one of its holders, large
    ``alpha`` approaches `pathological`'s even split. The Dirichlet draws are repeated until every
    partition holds at least ``min_partition_size`` samples, at most ``max_tries`` times; the
    classes are chosen once.

    A class that no partition holds (possible with ``"random"``) is left out with a warning, as
    `pathological` does; every sample of a held class is assigned.

    Follows the "extended Dirichlet" strategy of Li and Lyu, "Convergence Analysis of Sequential
    Federated Learning on Heterogeneous Data" (NeurIPS 2023, arXiv:2311.03154), PFLlib's
    ``exdir``. Deviations: every holder first gets one sample of each of its classes and only
    the rest is cut by ``p``, so that a partition holds exactly ``k`` classes even when a draw
    gives it a share below one sample; the classes are chosen by ``class_assignment_mode``
    (default NIID-Bench's ``"first-deterministic"``) rather than by redrawing random choices
    until each class has enough holders; and the retries are bounded, then an error says what
    would work.

    Parameters
    ----------
    labels : array_like of int
        One class id per sample.
    num_partitions : int
        Number of partitions ``K``, between 1 and the number of samples.
    num_classes_per_partition : int
        ``k``, between 1 and the number of classes present.
    alpha : float or array_like of float
        Concentration, > 0: a scalar, or one value per class (``max(labels) + 1`` values).
    class_assignment_mode : {"first-deterministic", "random", "deterministic"}, default "first-deterministic"
        How the classes are chosen, as in `pathological`. The default gives partition ``p`` class
        ``p % C`` first, so every class is held when ``num_partitions >= C``.
    min_partition_size : int, default 10
        Smallest acceptable partition; ``0`` accepts any draw.
    max_tries : int, default 10
        Number of Dirichlet draws before giving up with a ``ValueError``.
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Raises
    ------
    ValueError
        If a class is held by more partitions than it has samples, or if no draw in
        ``max_tries`` meets ``min_partition_size``; the message says what would help.

    Examples
    --------
    >>> labels = np.repeat(np.arange(10), 100)
    >>> p = extended_dirichlet(labels, 10, num_classes_per_partition=2, alpha=0.5, seed=0)
    >>> (p.counts(labels) > 0).sum(axis=1).tolist()
    [2, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    >>> int(p.sizes.sum()), p.describe()
    (1000, '#C=2 Dir(0.5)')
    """
    labels = check_labels(labels)
    num_partitions = check_num_partitions(num_partitions, labels.size)
    k = check_classes_per_partition(num_classes_per_partition, labels)
    num_classes = int(labels.max()) + 1
    alpha = check_concentration(alpha, "alpha", length=num_classes)
    check_choice("class_assignment_mode", class_assignment_mode, CLASS_ASSIGNMENT_MODES)
    min_partition_size = check_min_partition_size(min_partition_size, labels.size, num_partitions)
    max_tries = check_integer("max_tries", max_tries)
    seed = check_seed(seed)

    rng = np.random.default_rng(seed)
    order, class_sizes, holds = hold_classes(labels, num_partitions, k, class_assignment_mode, rng)
    class_alpha = np.broadcast_to(alpha, (num_classes,))

    def draw():
        counts = _draw_counts(holds, class_sizes, class_alpha, rng)
        return counts, counts.sum(axis=0).min()

    present = np.count_nonzero(class_sizes)
    counts = draw_until_min_size(
        draw, min_partition_size, max_tries, alpha=alpha, num_partitions=num_partitions,
        also=SettingError("a larger {num_classes_per_partition:name}") if k < present else None,
    )
    params = {
        "num_partitions": num_partitions,
        "num_classes_per_partition": k,
        "alpha": alpha.tolist(),
        "class_assignment_mode": class_assignment_mode,
        "min_partition_size": min_partition_size,
    }
    return Partition(
        split_class_blocks(order, class_sizes, counts), labels.size, "extended_dirichlet", params, seed
    )


def _draw_counts(
    holds: np.ndarray, class_sizes: np.ndarray, class_alpha: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Return one draw of the (classes x partitions) count table; a class nobody holds gets a zero row."""
    counts = np.zeros(holds.T.shape, dtype=np.int64)
    for c, (size, concentration) in enumerate(zip(class_sizes, class_alpha)):
        holders = np.flatnonzero(holds[:, c])
        if holders.size == 0:
            continue
        share = rng.dirichlet(np.full(holders.size, concentration))
        # One sample each first: a share below one sample must not take a class away from its holder.
        counts[c, holders] = 1 + cut_counts(share, size - holders.size)
    return counts
