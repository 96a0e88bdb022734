"""What a method's hooks hand the round, checked where the round receives it.

A method (`fedsim.algorithms.Algorithm`, a user's named by reference) returns tensors, weights
and terms the round goes on with. A wrong one (a tensor too few, a float32 tensor in a float64
run) would fail later, deep in a tensor operation that names neither the hook nor its file, or
pass in silence (a value returned from a hook that works in place). Each check here raises
`fedsim.user_code.UserCodeError`, naming the hook, its class and its file: a bug in the
method, which no setting fixes.
"""

from __future__ import annotations

import math
import numbers

import torch

from ..algorithms import LocalTerms
from ..user_code import UserCodeError, code_place


def checked_tensors(algorithm, hook: str, returned, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Return ``returned``, what ``algorithm``'s ``hook`` gave, as a list once it matches ``like`` tensor for tensor.

    ``like`` is the round's ``global_state``: the model's parameters, then its floating-point
    buffers. Each returned tensor must have the count, shape, dtype and device of its
    counterpart there.

    Examples
    --------
    >>> from fedsim.algorithms import Algorithm
    >>> class Short(Algorithm):
    ...     pass
    >>> checked_tensors(Short, "aggregate", [torch.zeros(2)], [torch.zeros(2), torch.zeros(3)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fedsim.user_code.UserCodeError: `Algorithm.aggregate` in ... returned 1 tensor, but the round needs 2: one per tensor of `global_state` (the model's parameters, then its floating-point buffers), in that order
    """
    place = code_place(algorithm, hook)
    if not isinstance(returned, (list, tuple)):
        raise UserCodeError(f"{place} returned {_kind(returned)}, not a list of tensors")
    if len(returned) != len(like):
        raise UserCodeError(f"{place} returned {len(returned)} tensor{'s' * (len(returned) != 1)}, but the round "
                            f"needs {len(like)}: one per tensor of `global_state` (the model's parameters, then its "
                            "floating-point buffers), in that order")
    for index, (tensor, expected) in enumerate(zip(returned, like)):
        if not isinstance(tensor, torch.Tensor):
            raise UserCodeError(f"{place} returned {_kind(tensor)} at position {index}, not a tensor")
        for what in ("shape", "dtype", "device"):
            got, wanted = getattr(tensor, what), getattr(expected, what)
            if got != wanted:
                raise UserCodeError(f"{place} returned a tensor of {what} {_shown(got)} at position {index}, where "
                                    f"`global_state` holds one of {what} {_shown(wanted)}")
    return list(returned)


def checked_weight(algorithm, returned) -> float:
    """Return ``returned``, what ``algorithm.scale`` gave, as a float once it is a finite real number."""
    if isinstance(returned, (bool, torch.Tensor)) or not isinstance(returned, numbers.Real) \
            or not math.isfinite(returned):
        raise UserCodeError(f"{code_place(algorithm, 'scale')} returned {_kind(returned)}, not a finite number: "
                            "the weight of a trained model in the round's combination")
    return float(returned)


def checked_terms(algorithm, returned) -> LocalTerms | None:
    """Return ``returned``, what ``algorithm.local_terms`` gave, once it is a `LocalTerms` or ``None``."""
    if returned is not None and not isinstance(returned, LocalTerms):
        raise UserCodeError(f"{code_place(algorithm, 'local_terms')} returned {_kind(returned)}, not a "
                            "fedsim.algorithms.LocalTerms (or None for no change)")
    return returned


def check_in_place(algorithm, hook: str, returned) -> None:
    """Refuse a value returned by ``algorithm``'s ``hook``, which works in place: the round would drop it unread."""
    if returned is not None:
        raise UserCodeError(f"{code_place(algorithm, hook)} returned {_kind(returned)}, which the round would drop: "
                            f"`{hook}` changes its first argument in place and returns None")


def _kind(value) -> str:
    """Return what ``value`` is, in words, short: "a tuple of 3", "a float (nan)", "None"."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return f"{type(value).__name__} {value!r}"
    return f"a {type(value).__name__}"


def _shown(value) -> str:
    """Return a shape as a tuple, a dtype or a device as it prints."""
    return str(tuple(value)) if isinstance(value, torch.Size) else str(value)
