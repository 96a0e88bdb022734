"""What a diverged run is told: whether a model is still finite, and which settings to lower."""

from __future__ import annotations

import torch

from ..checks import SettingError


def all_finite(tensors) -> bool:
    """Whether every floating-point tensor of ``tensors`` holds only finite values (one device sync in all)."""
    floating = [t for t in tensors if t.is_floating_point()]
    return not floating or bool(torch.stack([torch.isfinite(t).all() for t in floating]).all())


def divergence_advice(config) -> SettingError:
    """Return which settings to lower after a divergence: the learning rate, and the server's when it is not 1.

    An unraised `SettingError`, the advice of a `fedsim.interrupts.RunDiverged`, which words it.

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> str(divergence_advice(RunConfig(lr=0.5, server_optimizer="adam")))
    'lower `lr` (now 0.5) or `server_lr` (now 1, `server_optimizer` adam) and start again in a new folder'
    """
    template = "lower {lr:name} (now {lr_now:text})"
    if config.server_lr != 1.0 or config.server_optimizer != "sgd":
        template += " or {server_lr:name} (now {server_lr_now:text}, {server_optimizer:name} {server_optimizer:text})"
    return SettingError(template + " and start again in a new folder", lr_now=f"{config.lr:g}",
                        server_lr_now=f"{config.server_lr:g}", server_optimizer=config.server_optimizer)
