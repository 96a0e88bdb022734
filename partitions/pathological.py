"""Pathological label skew #C=k: every partition holds exactly k classes (NIID-Bench ``noniid-#label``)."""

from __future__ import annotations

import warnings

import numpy as np

from ._checks import check_choice, check_integer, check_labels, check_num_partitions, check_seed
from ._errors import SettingError, SettingWarning
from ._layout import class_blocks, split_class_blocks
from .partition import Partition

CLASS_ASSIGNMENT_MODES = ("random", "deterministic", "first-deterministic")


def pathological(
    labels,
    num_partitions: int,
    num_classes_per_partition: int,
    *,
    class_assignment_mode: str = "random",
    seed: int | None = None,
) -> Partition:
    """Give every partition exactly ``k`` distinct classes, each class split evenly among its holders.

    Classes are those present in ``labels``. How each partition's classes are chosen:

    - ``"random"``: ``k`` classes at random, without replacement;
    - ``"deterministic"``: partition ``p`` takes classes ``(p + i) % C`` for ``i < k``, so every
      class is held when ``num_partitions >= C``;
    - ``"first-deterministic"``: class ``p % C`` first, then ``k - 1`` others at random
      (NIID-Bench's assignment), so every class is held when ``num_partitions >= C``.

    The default, ``"random"``, is flwr-datasets' (``PathologicalPartitioner``), kept so that a
    call ported from it gives the same kind of split. It can leave classes out: with 10
    partitions and 10 classes, a class is held by no one with probability ``0.9 ** 10``, about
    a third, for ``k = 1`` and ``0.8 ** 10``, about a tenth, for ``k = 2`` (three draws in four
    then miss some class). For NIID-Bench's #C=k, pass ``"first-deterministic"``, which
    `fedsim` uses by default.

    A class's samples (shuffled) are split among its holders in sizes that differ by at most
    one. A class that no partition holds is left out, with a warning.

    Follows McMahan et al. (2017) and NIID-Bench (Li et al., ICDE 2022), with the modes named as in
    flwr-datasets' ``PathologicalPartitioner``.

    Parameters
    ----------
    labels : array_like of int
        One class id per sample.
    num_partitions : int
        Number of partitions, between 1 and the number of samples.
    num_classes_per_partition : int
        ``k``, between 1 and the number of classes present.
    class_assignment_mode : {"random", "deterministic", "first-deterministic"}, default "random"
        How the classes are chosen, as above.
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Examples
    --------
    >>> labels = np.repeat(np.arange(4), 10)
    >>> p = pathological(labels, 4, 2, class_assignment_mode="deterministic", seed=0)
    >>> (p.counts(labels) > 0).sum(axis=1).tolist()
    [2, 2, 2, 2]
    """
    labels = check_labels(labels)
    num_partitions = check_num_partitions(num_partitions, labels.size)
    k = check_classes_per_partition(num_classes_per_partition, labels)
    check_choice("class_assignment_mode", class_assignment_mode, CLASS_ASSIGNMENT_MODES)
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    order, class_sizes, holds = hold_classes(labels, num_partitions, k, class_assignment_mode, rng)
    counts = _even_split_counts(holds, class_sizes)
    params = {
        "num_partitions": num_partitions,
        "num_classes_per_partition": k,
        "class_assignment_mode": class_assignment_mode,
    }
    return Partition(split_class_blocks(order, class_sizes, counts), labels.size, "pathological", params, seed)


def check_classes_per_partition(num_classes_per_partition, labels: np.ndarray) -> int:
    """Return ``k`` after checking it is between 1 and the number of classes present in ``labels``."""
    k = check_integer("num_classes_per_partition", num_classes_per_partition)
    present = np.count_nonzero(np.bincount(labels))
    if k > present:
        raise SettingError("{num_classes_per_partition} exceeds the {present:text} classes in `labels`; use a value "
                           "between 1 and {present:text}", num_classes_per_partition=k, present=present)
    return k


def hold_classes(
    labels: np.ndarray, num_partitions: int, k: int, class_assignment_mode: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Choose each partition's ``k`` classes; return the class blocks, the class sizes and who holds what.

    The first two are `class_blocks`'s; the third is a (partitions x classes) boolean table. A
    class held by more partitions than it has samples is an error; a class held by no partition
    is left out with a warning, which points at the caller of the public partitioner.
    """
    num_classes = int(labels.max()) + 1
    present = np.flatnonzero(np.bincount(labels, minlength=num_classes))
    order, class_sizes = class_blocks(labels, num_classes, rng)
    chosen = _choose_classes(num_partitions, present.size, k, class_assignment_mode, rng)
    holds = np.zeros((num_partitions, num_classes), dtype=bool)
    holds[np.arange(num_partitions)[:, None], present[chosen]] = True

    holders = holds.sum(axis=0)
    short = np.flatnonzero((holders > class_sizes) & (holders > 0))
    if short.size:
        c = short[0]
        raise SettingError(
            "class {c:text} has {size:text} samples but {holders:text} partitions hold it, so some would get none of "
            "it; use fewer {num_partitions:name} or a smaller {num_classes_per_partition:name}",
            c=c, size=class_sizes[c], holders=holders[c], num_partitions=num_partitions, num_classes_per_partition=k,
        )
    unheld = present[holders[present] == 0]
    if unheld.size:
        shown = ", ".join(map(str, unheld[:10])) + (", ..." if unheld.size > 10 else "")
        warnings.warn(
            SettingWarning(
                "{count:text} classes ({shown:text}) are held by no partition and their {left:text} samples are left "
                "out; use {class_assignment_mode:name}='first-deterministic' or 'deterministic' with "
                "{num_partitions:name} >= {present:text}, or a larger {num_classes_per_partition:name}",
                count=unheld.size, shown=shown, left=class_sizes[unheld].sum(), present=present.size,
                class_assignment_mode=class_assignment_mode, num_partitions=num_partitions,
                num_classes_per_partition=k,
            ),
            stacklevel=3,  # this function, the public partitioner, then the user's call
        )
    return order, class_sizes, holds


def _choose_classes(num_partitions: int, num_classes: int, k: int, mode: str, rng: np.random.Generator) -> np.ndarray:
    """Return a (partitions x k) array of distinct class positions per partition."""
    rows = np.arange(num_partitions)
    if mode == "deterministic":
        return (rows[:, None] + np.arange(k)) % num_classes
    keys = rng.random((num_partitions, num_classes))
    if mode == "first-deterministic":
        keys[rows, rows % num_classes] = -1.0  # sorts first, so class p % C is always taken
    return np.argsort(keys, axis=1)[:, :k]


def _even_split_counts(holds: np.ndarray, class_sizes: np.ndarray) -> np.ndarray:
    """Return (classes x partitions) counts splitting each class evenly among the partitions that hold it."""
    holders = holds.sum(axis=0)
    base = np.divide(class_sizes, holders, out=np.zeros(class_sizes.size), where=holders > 0).astype(np.int64)
    extra = class_sizes - base * holders
    rank = np.cumsum(holds, axis=0) - 1  # a holder's position among the class's holders
    counts = holds * (base + (rank < extra))
    return counts.T.astype(np.int64)
