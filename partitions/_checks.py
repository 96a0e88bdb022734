"""Input validation shared by the partitioners.

Each check raises one clear error that names the parameter, the value received
and the valid range, so that a partitioner's body can assume clean input.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def check_labels(labels) -> np.ndarray:
    """Return ``labels`` as a 1-D array of non-negative integers.

    Raises
    ------
    TypeError
        If the labels are not integers.
    ValueError
        If they are empty, not one-dimensional or negative.
    """
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(
            f"`labels` must be one-dimensional (one class id per sample), got shape {array.shape}; "
            "use `multilabel_dirichlet` for a multi-hot label matrix"
        )
    if array.size == 0:
        raise ValueError("`labels` is empty: there is nothing to partition")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        if np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
            array = array.astype(np.int64)
        else:
            raise TypeError(f"`labels` must hold integer class ids, got dtype {array.dtype}")
    if array.min() < 0:
        raise ValueError(f"`labels` must be >= 0, got a minimum of {array.min()}")
    return array.astype(np.int64, copy=False)


def check_label_matrix(label_matrix) -> np.ndarray:
    """Return a multi-hot ``label_matrix`` (samples x classes) as a boolean array."""
    array = np.asarray(label_matrix)
    if array.ndim != 2:
        raise ValueError(
            f"`label_matrix` must be two-dimensional (samples x classes, multi-hot), got shape {array.shape}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"`label_matrix` is empty, got shape {array.shape}")
    if not (array.dtype == bool or np.issubdtype(array.dtype, np.number)):
        raise TypeError(f"`label_matrix` must be numeric or boolean, got dtype {array.dtype}")
    if not np.isin(array, (0, 1)).all():
        raise ValueError("`label_matrix` must be multi-hot: every entry 0 or 1")
    return array.astype(bool, copy=False)


def check_num_samples(labels_or_n) -> int:
    """Return the sample count from an integer or from a label array."""
    if isinstance(labels_or_n, numbers.Integral) and not isinstance(labels_or_n, bool):
        n = int(labels_or_n)
        if n <= 0:
            raise ValueError(f"`labels_or_n` must be a positive sample count or a label array, got {n}")
        return n
    array = np.asarray(labels_or_n)
    if array.ndim == 0:
        raise TypeError(f"`labels_or_n` must be an integer or an array of labels, got {labels_or_n!r}")
    if array.shape[0] == 0:
        raise ValueError("`labels_or_n` is empty: there is nothing to partition")
    return int(array.shape[0])


def check_num_partitions(num_partitions, num_samples: int) -> int:
    """Return ``num_partitions`` after checking 1 <= num_partitions <= num_samples."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, numbers.Integral):
        raise TypeError(f"`num_partitions` must be an integer, got {num_partitions!r}")
    if not 1 <= num_partitions <= num_samples:
        raise ValueError(
            f"`num_partitions` must be between 1 and the {num_samples} samples, got {num_partitions}"
        )
    return int(num_partitions)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}")
    return int(value)


def check_concentration(alpha, name: str = "alpha", *, length: int | None = None, what: str = "class",
                        plural: str = "classes") -> np.ndarray:
    """Return a Dirichlet concentration as a float array, scalar or one value per ``what``.

    A scalar comes back as a 0-d array; a vector must have ``length`` entries.
    """
    try:
        array = None if alpha is None or isinstance(alpha, str) else np.asarray(alpha, dtype=float)
    except (TypeError, ValueError):
        array = None
    if array is None or array.ndim > 1:
        raise TypeError(f"`{name}` must be a number or a 1-D sequence of numbers, got {alpha!r}")
    if np.any(np.isnan(array)):
        raise ValueError(f"`{name}` must be a finite number > 0, got NaN")
    if np.any(~np.isfinite(array)) or np.any(array <= 0):
        shown = alpha if array.ndim == 0 else array[(~np.isfinite(array)) | (array <= 0)][0]
        raise ValueError(f"`{name}` must be a finite number > 0, got {shown}")
    if array.ndim == 1 and length is not None and array.shape[0] != length:
        raise ValueError(
            f"`{name}` has {array.shape[0]} values but there are {length} {plural}; "
            f"give one value per {what} or a scalar"
        )
    return array


def check_seed(seed):
    """Reject seeds that ``np.random.default_rng`` would take but that cannot be saved to JSON."""
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed >= 0):
        return None if seed is None else int(seed)
    raise TypeError(f"`seed` must be a non-negative integer or None, got {seed!r}")


def check_min_partition_size(min_partition_size, num_samples: int, num_partitions: int) -> int:
    """Check that ``num_partitions`` partitions of ``min_partition_size`` fit in the data."""
    size = check_positive_int(min_partition_size, "min_partition_size", minimum=0)
    if size * num_partitions > num_samples:
        largest = num_samples // num_partitions
        raise ValueError(
            f"`min_partition_size`={size} is unsatisfiable: {num_partitions} partitions of at least {size} "
            f"need {size * num_partitions} samples but there are {num_samples}; "
            f"use `min_partition_size` <= {largest} or fewer `num_partitions`"
        )
    return size


def check_nonnegative_real(value, name: str) -> float:
    """Return ``value`` as a finite float >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f"`{name}` must be a real number, got {value!r}")
    if value < 0 or math.isinf(value):
        raise ValueError(f"`{name}` must be a finite number >= 0, got {value}")
    return float(value)


def draw_until_min_size(draw, min_partition_size: int, max_tries: int, *, alpha, num_partitions: int,
                        remedies: str = "a larger `alpha`, fewer `num_partitions`"):
    """Call ``draw()`` until the smallest partition it reports reaches ``min_partition_size``.

    ``draw`` returns ``(result, smallest_partition_size)``. After ``max_tries`` draws without
    success, raise a ``ValueError`` that names the largest minimum reached, which the same call
    with that ``min_partition_size`` would accept, and the parameters that would help.
    """
    best_smallest = 0
    for _ in range(max_tries):
        result, smallest = draw()
        if smallest >= min_partition_size:
            return result
        best_smallest = max(best_smallest, int(smallest))
    raise ValueError(
        f"could not give every partition `min_partition_size`={min_partition_size} samples in "
        f"`max_tries`={max_tries} draws with `alpha`={alpha.tolist()} and `num_partitions`={num_partitions}: "
        f"the best draw's smallest partition had {best_smallest} samples. Use `min_partition_size` <= "
        f"{best_smallest}, {remedies} or more `max_tries`"
    )
