"""Argument checks shared by `partitions` and `fedsim`: one wording for every layer's errors.

Each check raises one clear error that names the parameter, the value received and the
valid range, so that the code after it can assume clean input. NumPy scalars are accepted
wherever the Python type is (``np.int64(3)`` is a count; ``True`` is not).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ._errors import SettingError, SettingTypeError


def check_integer(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` after checking it is an integer >= ``minimum``.

    Any `numbers.Integral` counts, NumPy integers included; booleans do not, although
    Python treats ``True`` as 1, because a flag passed as a count is a mistake.

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If it is below ``minimum``.

    Examples
    --------
    >>> check_integer("rounds", np.int64(3))
    3
    >>> check_integer("rounds", 0)
    Traceback (most recent call last):
    partitions.SettingError: `rounds` must be >= 1, got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise SettingTypeError("{setting:name} must be an integer, got {got:text} ({kind:text})",
                               fields={"setting": name}, setting=value, got=repr(value), kind=type(value).__name__)
    if value < minimum:
        raise SettingError("{setting:name} must be >= {minimum:text}, got {setting:text}", fields={"setting": name},
                           setting=value, minimum=minimum)
    return int(value)


def check_number(name: str, value, *, low: float, high: float = math.inf, low_open: bool = False,
                 high_closed: bool = False) -> float:
    """Return ``value`` as a ``float`` after checking it is a real number in the interval from ``low`` to ``high``.

    ``low`` is included unless ``low_open``; ``high`` is excluded unless ``high_closed``, so
    the default upper bound of infinity admits every finite number. NaN is a bad value.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (booleans are not).
    ValueError
        If it is NaN or outside the interval.

    Examples
    --------
    >>> check_number("fraction", 1.5, low=0.0, high=1.0, low_open=True, high_closed=True)
    Traceback (most recent call last):
    partitions.SettingError: `fraction` must be in (0.0, 1.0], got 1.5
    >>> check_number("alpha", float("nan"), low=0.0, low_open=True)
    Traceback (most recent call last):
    partitions.SettingError: `alpha` must be a finite number > 0, got nan
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise SettingTypeError("{setting:name} must be a number, got {got:text} ({kind:text})",
                               fields={"setting": name}, setting=value, got=repr(value), kind=type(value).__name__)
    too_low = value < low or (low_open and value == low)
    too_high = value > high or (not high_closed and value == high)
    if math.isnan(value) or too_low or too_high:
        if high == math.inf and not high_closed:
            expected = f"a finite number {'>' if low_open else '>='} {low:g}"
        else:
            expected = f"in {'(' if low_open else '['}{low}, {high}{']' if high_closed else ')'}"
        raise SettingError("{setting:name} must be {expected:text}, got {setting:text}", fields={"setting": name},
                           setting=value, expected=expected)
    return float(value)


def check_choice(name: str, value, choices) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``.

    Examples
    --------
    >>> check_choice("device", "tpu", ("cpu", "cuda"))
    Traceback (most recent call last):
    partitions.SettingError: unknown `device`='tpu'; known: cpu, cuda
    """
    if not isinstance(value, str) or value not in choices:
        raise SettingError("unknown {setting}; known: {choices:text}", fields={"setting": name}, setting=value,
                           choices=", ".join(choices))


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


def check_label_matrix(label_matrix, name: str = "label_matrix") -> np.ndarray:
    """Return a multi-hot (samples x classes) matrix of 0/1 or booleans as a boolean array.

    Raises
    ------
    TypeError
        If the entries are neither numbers nor booleans.
    ValueError
        If the matrix is not two-dimensional, is empty, or holds an entry other than 0 and 1.
    """
    array = np.asarray(label_matrix)
    if array.ndim != 2:
        raise ValueError(f"`{name}` must be two-dimensional (samples x classes, multi-hot), got shape {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"`{name}` is empty, got shape {array.shape}")
    if not (array.dtype == bool or np.issubdtype(array.dtype, np.number)):
        raise TypeError(f"`{name}` must be numeric or boolean, got dtype {array.dtype}")
    if not np.isin(array, (0, 1)).all():
        raise ValueError(f"`{name}` must be multi-hot: every entry 0 or 1")
    return array.astype(bool, copy=False)


def check_class_labels(labels, name: str = "labels") -> np.ndarray:
    """Return class ids (1-D, as `check_labels`) or a multi-hot matrix (2-D, as `check_label_matrix`).

    For the functions that take either kind of labels, such as the heterogeneity metrics.
    """
    array = np.asarray(labels)
    if array.ndim == 1:
        return check_labels(array)
    if array.ndim != 2:
        raise ValueError(
            f"`{name}` must be class ids (1-D) or a multi-hot samples x classes matrix (2-D), got shape {array.shape}"
        )
    return check_label_matrix(array, name)


def check_num_samples(labels_or_n) -> int:
    """Return the sample count from an integer or from a label array."""
    if isinstance(labels_or_n, numbers.Integral) and not isinstance(labels_or_n, (bool, np.bool_)):
        if labels_or_n <= 0:
            raise ValueError(f"`labels_or_n` must be a positive sample count or a label array, got {labels_or_n}")
        return int(labels_or_n)
    array = np.asarray(labels_or_n)
    if array.ndim == 0:
        raise TypeError(f"`labels_or_n` must be an integer or an array of labels, got {labels_or_n!r}")
    if array.shape[0] == 0:
        raise ValueError("`labels_or_n` is empty: there is nothing to partition")
    return int(array.shape[0])


def check_num_partitions(num_partitions, num_samples: int) -> int:
    """Return ``num_partitions`` after checking 1 <= num_partitions <= num_samples."""
    num_partitions = check_integer("num_partitions", num_partitions, minimum=1)
    if num_partitions > num_samples:
        raise SettingError("{num_partitions:name} must be between 1 and the {num_samples:text} samples, got "
                           "{num_partitions:text}", num_partitions=num_partitions, num_samples=num_samples)
    return num_partitions


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
        raise SettingTypeError("{setting:name} must be a number or a 1-D sequence of numbers, got {got:text}",
                               fields={"setting": name}, setting=alpha, got=repr(alpha))
    bad = ~np.isfinite(array) | (array <= 0)  # NaN is not finite, so it is caught here too
    if np.any(bad):
        shown = alpha if array.ndim == 0 else array[bad][0]
        raise SettingError("{setting:name} must be a finite number > 0, got {shown:text}", fields={"setting": name},
                           setting=alpha, shown=shown)
    if array.ndim == 1 and length is not None and array.shape[0] != length:
        raise SettingError("{setting:name} has {given:text} values but there are {length:text} {plural:text}; give "
                           "one value per {what:text} or a scalar", fields={"setting": name}, setting=alpha,
                           given=array.shape[0], length=length, plural=plural, what=what)
    return array


def check_seed(seed) -> int | None:
    """Return ``seed`` as an ``int`` >= 0 or None: the seeds ``np.random.default_rng`` takes that JSON can save."""
    return None if seed is None else check_integer("seed", seed, minimum=0)


def check_min_partition_size(min_partition_size, num_samples: int, num_partitions: int) -> int:
    """Check that ``num_partitions`` partitions of ``min_partition_size`` fit in the data."""
    size = check_integer("min_partition_size", min_partition_size, minimum=0)
    if size * num_partitions > num_samples:
        raise SettingError(
            "{min_partition_size} is unsatisfiable: {num_partitions:text} partitions of at least "
            "{min_partition_size:text} need {needed:text} samples but there are {num_samples:text}; use "
            "{min_partition_size:name} <= {largest:text} or fewer {num_partitions:name}",
            min_partition_size=size, num_partitions=num_partitions, num_samples=num_samples,
            needed=size * num_partitions, largest=num_samples // num_partitions,
        )
    return size


def draw_until_min_size(draw, min_partition_size: int, max_tries: int, *, alpha, num_partitions: int,
                        also: SettingError | None = None):
    """Call ``draw()`` until the smallest partition it reports reaches ``min_partition_size``.

    ``draw`` returns ``(result, smallest_partition_size)``. After ``max_tries`` draws without
    success, raise a `SettingError` that names the largest minimum reached, which the same call
    with that ``min_partition_size`` would accept, and the parameters that would help; ``also``
    adds a remedy particular to the caller, an unraised `SettingError` ("turn on {self_balancing:name}")
    so that the settings it names are worded as the rest of the message.
    """
    best_smallest = 0
    for _ in range(max_tries):
        result, smallest = draw()
        if smallest >= min_partition_size:
            return result
        best_smallest = max(best_smallest, int(smallest))
    raise SettingError(
        "could not give every partition {min_partition_size} samples in {max_tries} draws with {alpha} and "
        "{num_partitions}: the best draw's smallest partition had {best:text} samples. Use "
        "{min_partition_size:name} <= {best:text}, a larger {alpha:name}, fewer {num_partitions:name} or more "
        "{max_tries:name}" + ("; or {also:text}" if also is not None else ""),
        min_partition_size=min_partition_size, max_tries=max_tries, alpha=alpha.tolist(),
        num_partitions=num_partitions, best=best_smallest, also=also,
    )
