"""The few collectives the engine adds to DDP's, each over flattened tensors (one call per dtype)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def all_reduce_sum(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` over all ranks, in place."""
    _coalesced(tensors, lambda flat: dist.all_reduce(flat))


def broadcast_tensors(tensors: list[torch.Tensor], src: int) -> None:
    """Overwrite ``tensors`` on every rank with rank ``src``'s, in place."""
    _coalesced(tensors, lambda flat: dist.broadcast(flat, src=src))


def broadcast_object(value, src: int = 0):
    """Return rank ``src``'s ``value`` on every rank (pickled: for small things, once per run)."""
    box = [value]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_object(value) -> list:
    """Return every rank's ``value``, in rank order (pickled: for small things)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def _coalesced(tensors, collective) -> None:
    for dtype in dict.fromkeys(t.dtype for t in tensors):
        group = [t for t in tensors if t.dtype == dtype]
        flat = _flatten_dense_tensors(group)
        collective(flat)
        with torch.no_grad():
            torch._foreach_copy_(group, list(_unflatten_dense_tensors(flat, group)))
