"""What a diverged run is told: whether a model is still finite, and which settings to lower."""

from __future__ import annotations

import torch


def all_finite(tensors) -> bool:
    """Whether every floating-point tensor of ``tensors`` holds only finite values (one device sync in all)."""
    floating = [t for t in tensors if t.is_floating_point()]
    return not floating or bool(torch.stack([torch.isfinite(t).all() for t in floating]).all())


def divergence_advice(config) -> str:
    """Return which settings to lower after a divergence: the learning rate, and the server's when it is not 1."""
    settings = [f"`lr` (now {config.lr:g})"]
    if config.server_lr != 1.0 or config.server_optimizer != "sgd":
        settings.append(f"`server_lr` (now {config.server_lr:g}, `server_optimizer` {config.server_optimizer})")
    return f"lower {' or '.join(settings)} and start again in a new folder"
