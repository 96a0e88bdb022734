"""Heterogeneity metrics: how far each partition's label distribution is from the global one.

Every per-partition metric compares partition ``k``'s label distribution ``p_k`` with the
global distribution ``p``, the label distribution of *all* samples in ``labels`` (the whole
dataset the `Partition` points into, including samples no partition holds). A partition
without any label (an empty one) gets NaN, and the means in `heterogeneity` and `summary`
skip it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.special import entr, rel_entr

from ._checks import check_class_labels
from .partition import Partition


def emd(partition, labels) -> np.ndarray:
    """Return each partition's earth mover's distance to the global label distribution.

    As in Zhao et al., "Federated Learning with Non-IID Data" (2018), the distance is the L1
    distance ``sum_c |p_k(c) - p(c)|`` between the two label distributions (the EMD with a
    ground distance of 1 between any two distinct classes, times two). It lies in ``[0, 2]``.

    Parameters
    ----------
    partition : Partition
    labels : array_like
        Integer class ids, one per sample, or a multi-hot (samples x classes) matrix, whose
        per-partition label counts are normalised to a distribution.

    Returns
    -------
    numpy.ndarray
        One float per partition; NaN for a partition without labels.

    Examples
    --------
    >>> p = Partition([[0, 1], [2, 3]], num_samples=4, scheme="manual")
    >>> emd(p, [0, 0, 0, 1]).tolist()
    [0.5, 0.5]
    """
    return _emd(*_distributions(partition, labels))


def hellinger(partition, labels) -> np.ndarray:
    """Return each partition's Hellinger distance to the global label distribution.

    ``H = sqrt(sum_c (sqrt(p_k(c)) - sqrt(p(c)))^2 / 2)``, in ``[0, 1]``.

    Parameters and return value are those of `emd`.

    Examples
    --------
    >>> p = Partition([[0, 1], [2, 3]], num_samples=4, scheme="manual")
    >>> hellinger(p, [0, 0, 1, 1]).round(4).tolist()
    [0.5412, 0.5412]
    """
    return _hellinger(*_distributions(partition, labels))


def jensen_shannon(partition, labels) -> np.ndarray:
    """Return each partition's Jensen-Shannon distance to the global label distribution.

    The distance is the square root of the Jensen-Shannon divergence in base 2, so it lies in
    ``[0, 1]`` (the same value as ``scipy.spatial.distance.jensenshannon(p_k, p, base=2)``).

    Parameters and return value are those of `emd`.

    Examples
    --------
    >>> p = Partition([[0, 1], [2, 3]], num_samples=4, scheme="manual")
    >>> jensen_shannon(p, [0, 0, 1, 1]).round(4).tolist()
    [0.5579, 0.5579]
    """
    return _jensen_shannon(*_distributions(partition, labels))


def effective_num_classes(partition, labels) -> np.ndarray:
    """Return each partition's effective number of classes, ``exp`` of its label entropy.

    The Hill number of order 1 of ``p_k``: ``exp(-sum_c p_k(c) ln p_k(c))``. A partition with
    one class gives exactly 1; one with ``m`` equally frequent classes gives ``m``.

    Parameters and return value are those of `emd`.

    Examples
    --------
    >>> p = Partition([[0, 1], [2, 3, 4, 5]], num_samples=6, scheme="manual")
    >>> effective_num_classes(p, [0, 0, 1, 1, 2, 2]).round(6).tolist()
    [1.0, 2.0]
    """
    return _effective_num_classes(*_distributions(partition, labels))


def size_stats(partition) -> dict:
    """Return summary statistics of the partition sizes.

    Parameters
    ----------
    partition : Partition

    Returns
    -------
    dict
        ``num_partitions``, ``total`` (samples held by some partition), ``min``, ``max``,
        ``mean``, ``std`` (population, ``ddof=0``), ``cv`` (``std / mean``) and ``gini`` (the
        Gini coefficient of the sizes: 0 for equal sizes, towards 1 when one partition holds
        everything). ``cv`` and ``gini`` are NaN when every partition is empty.

    Examples
    --------
    >>> p = Partition([[0], [1, 2, 3]], num_samples=4, scheme="manual")
    >>> size_stats(p)
    {'num_partitions': 2, 'total': 4, 'min': 1, 'max': 3, 'mean': 2.0, 'std': 1.0, 'cv': 0.5, 'gini': 0.25}
    """
    _check_partition(partition)
    sizes = np.sort(partition.sizes)
    count, total = sizes.size, int(sizes.sum())
    mean = total / count
    std = float(sizes.std())
    # Gini from the sorted sizes: O(K log K) instead of the O(K^2) mean absolute difference.
    ranks = np.arange(1, count + 1)
    gini = 2.0 * float(ranks @ sizes) / (count * total) - (count + 1) / count if total else math.nan
    return {
        "num_partitions": count,
        "total": total,
        "min": int(sizes[0]),
        "max": int(sizes[-1]),
        "mean": float(mean),
        "std": std,
        "cv": std / mean if total else math.nan,
        "gini": float(gini),
    }


def heterogeneity(partition, labels) -> dict:
    """Return the partition's size statistics and the mean of each heterogeneity metric.

    Parameters
    ----------
    partition : Partition
    labels : array_like
        Class ids or a multi-hot matrix, as in `emd`.

    Returns
    -------
    dict
        A flat, JSON-ready dict of Python ints and floats: ``num_partitions``, ``num_classes``,
        ``num_samples``, ``unassigned``, ``empty_partitions``, the `size_stats` entries
        prefixed ``size_`` and ``mean_emd``, ``mean_hellinger``, ``mean_jensen_shannon``,
        ``mean_effective_num_classes``: means over the partitions that hold labels (NaN if none).

    Examples
    --------
    >>> p = Partition([[0, 1], [2, 3]], num_samples=4, scheme="manual")
    >>> h = heterogeneity(p, [0, 0, 1, 1])
    >>> h["mean_emd"], h["mean_effective_num_classes"], h["size_cv"]
    (1.0, 1.0, 0.0)
    """
    dist, glob = _distributions(partition, labels)
    sizes = size_stats(partition)
    result = {
        "num_partitions": sizes.pop("num_partitions"),
        "num_classes": int(glob.size),
        "num_samples": partition.num_samples,
        "unassigned": partition.num_samples - sizes["total"],
        "empty_partitions": int((partition.sizes == 0).sum()),
    }
    result.update({f"size_{key}": value for key, value in sizes.items()})
    for name, metric in _METRICS.items():
        result[f"mean_{name}"] = _nanmean(metric(dist, glob))
    return result


def summary(partitions, labels) -> str:
    """Return a plain-text table comparing the heterogeneity of one or more partitions.

    Parameters
    ----------
    partitions : Partition or mapping of str to Partition
        One row per entry; a lone `Partition` is named after its scheme.
    labels : array_like
        Class ids or a multi-hot matrix, as in `emd`.

    Returns
    -------
    str
        Columns: name, ``K`` (partitions), smallest, mean and largest size, then the means of
        `emd`, `hellinger`, `jensen_shannon` and `effective_num_classes`.

    Examples
    --------
    >>> from partitions import iid, pathological
    >>> labels = np.repeat(np.arange(4), 250)
    >>> schemes = {"iid": iid(labels, 4, seed=0),
    ...            "#C=1": pathological(labels, 4, 1, class_assignment_mode="deterministic")}
    >>> print(summary(schemes, labels))
    name  K  min   mean  max    EMD  Hellinger     JS  eff. classes
    ----  -  ---  -----  ---  -----  ---------  -----  ------------
    iid   4  250  250.0  250  0.059      0.022  0.027          3.99
    #C=1  4  250  250.0  250  1.500      0.707  0.741          1.00
    """
    if isinstance(partitions, Partition):
        partitions = {partitions.scheme: partitions}
    elif not isinstance(partitions, Mapping):
        raise TypeError(
            f"`partitions` must be a Partition or a mapping of names to Partitions, got {type(partitions).__name__}"
        )
    if not partitions:
        raise ValueError("`partitions` is empty: give at least one Partition")
    header = ("name", "K", "min", "mean", "max", "EMD", "Hellinger", "JS", "eff. classes")
    rows = []
    for name, partition in partitions.items():
        _check_partition(partition, f"partitions[{name!r}]")
        h = heterogeneity(partition, labels)
        rows.append((
            str(name), str(h["num_partitions"]), str(h["size_min"]), f"{h['size_mean']:.1f}", str(h["size_max"]),
            f"{h['mean_emd']:.3f}", f"{h['mean_hellinger']:.3f}", f"{h['mean_jensen_shannon']:.3f}",
            f"{h['mean_effective_num_classes']:.2f}",
        ))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    rule = tuple("-" * width for width in widths)
    # The name column reads best left-aligned, the numbers right-aligned so decimals line up.
    lines = [
        "  ".join([row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])])
        for row in (header, rule, *rows)
    ]
    return "\n".join(line.rstrip() for line in lines)


# -- shared machinery --------------------------------------------------------------------------


def _check_partition(partition, name: str = "partition") -> Partition:
    if not isinstance(partition, Partition):
        raise TypeError(f"`{name}` must be a Partition, got {type(partition).__name__}")
    if partition.num_partitions == 0:
        raise ValueError(f"`{name}` has no partitions")
    return partition


def _distributions(partition, labels) -> tuple[np.ndarray, np.ndarray]:
    """Return the (partitions x classes) label distributions and the global distribution."""
    _check_partition(partition)
    labels = check_class_labels(labels)
    local = partition.label_distribution(labels)
    totals = labels.sum(axis=0) if labels.ndim == 2 else np.bincount(labels)
    if totals.sum() == 0:
        raise ValueError("`labels` carries no labels: every row of the multi-hot matrix is zero")
    return local, totals / totals.sum()


def _emd(local: np.ndarray, glob: np.ndarray) -> np.ndarray:
    return np.abs(local - glob).sum(axis=1)


def _hellinger(local: np.ndarray, glob: np.ndarray) -> np.ndarray:
    return np.sqrt(0.5 * ((np.sqrt(local) - np.sqrt(glob)) ** 2).sum(axis=1))


def _jensen_shannon(local: np.ndarray, glob: np.ndarray) -> np.ndarray:
    middle = 0.5 * (local + glob)
    divergence = 0.5 * (rel_entr(local, middle).sum(axis=1) + rel_entr(glob, middle).sum(axis=1)) / math.log(2)
    # Rounding can leave a hair below 0 for equal distributions, which sqrt would turn into NaN.
    return np.sqrt(np.clip(divergence, 0.0, 1.0))


def _effective_num_classes(local: np.ndarray, glob: np.ndarray) -> np.ndarray:
    return np.exp(entr(local).sum(axis=1))


_METRICS = {
    "emd": _emd,
    "hellinger": _hellinger,
    "jensen_shannon": _jensen_shannon,
    "effective_num_classes": _effective_num_classes,
}


def _nanmean(values: np.ndarray) -> float:
    """Return the mean of the non-NaN values, NaN if none (without np.nanmean's RuntimeWarning)."""
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else math.nan
