"""How a run folder's files are written: tensors atomically and durably, JSON that other readers accept."""

from __future__ import annotations

import io
import math
from pathlib import Path

import torch

from partitions._io import write_atomic


def save_tensors(payload, path: Path) -> None:
    """``torch.save`` atomically and durably: serialised in memory, then written as `write_atomic` writes."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())



def finite_or_null(value):
    """Return ``value`` with every NaN or infinite float inside (dicts, lists) replaced by ``None``.

    Python's ``json`` writes them as ``NaN`` and ``Infinity``, which other JSON readers reject.

    Examples
    --------
    >>> finite_or_null({"a": float("nan"), "b": [1.0, float("inf")], "c": "x"})
    {'a': None, 'b': [1.0, None], 'c': 'x'}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value
