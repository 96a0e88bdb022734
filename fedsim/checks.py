"""Argument checks shared by the configs: one clear error naming the parameter and its valid range."""

from __future__ import annotations

import math


def check_choice(name: str, value, choices) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"unknown `{name}`={value!r}; known: {', '.join(choices)}")


def check_integer(name: str, value, *, minimum: int) -> None:
    """Raise unless ``value`` is an integer (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}")


def check_number(name: str, value, *, low: float, high: float = math.inf, low_open: bool = False,
                 high_closed: bool = False) -> None:
    """Raise unless ``value`` is a real number (not a bool, not NaN) in the interval from ``low`` to ``high``.

    Examples
    --------
    >>> check_number("fraction", 1.5, low=0.0, high=1.0, low_open=True, high_closed=True)
    Traceback (most recent call last):
    ValueError: `fraction` must be in (0.0, 1.0], got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"`{name}` must be a number, got {value!r}")
    too_low = value < low or (low_open and value == low)
    too_high = value > high or (not high_closed and value == high)
    if too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{']' if high_closed else ')'}"
        raise ValueError(f"`{name}` must be in {interval}, got {value}")
