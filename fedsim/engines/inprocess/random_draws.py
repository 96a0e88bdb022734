"""Whether a model draws random numbers in its forward outside nn.Dropout, known before any cohort trains.

A cohort draws each client's nn.Dropout masks from that client's own stream (`cohort_dropout`).
Any other draw in the forward (a user's noise layer) could only come from torch's one global
stream, which is not the client's, and ``torch.func.vmap`` refuses it. One forward of one sample,
noting every operator PyTorch tags as drawing from a seeded random stream
(``torch.Tag.nondeterministic_seeded``), finds such a draw from the model itself, whatever the
layer is called and however torch words its errors.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ...client.training import training_batch
from .cohort_dropout import ELEMENTWISE


class _RandomDraws(TorchDispatchMode):
    """Note the random operators dispatched inside it (``draws``), computing every operator as usual."""

    def __init__(self):
        super().__init__()
        self.draws: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.draws.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def random_draws_outside_dropout(model: nn.Module, data) -> list[str]:
    """Return the random operators one training-mode forward of ``model`` calls, its nn.Dropout layers' aside.

    The forward runs on the first training sample without gradients, with the global random
    state left as it was and the model's modes restored. Call it on a model without BatchNorm,
    whose forward in training mode changes its running statistics.

    Examples
    --------
    >>> from fedsim.data import load_dataset
    >>> data = load_dataset("digits")
    >>> model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Dropout(0.5))
    >>> random_draws_outside_dropout(model, data)
    []
    """
    param = next(model.parameters())
    modes = {module: module.training for module in model.modules()}
    devices = [param.device] if param.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            inputs, _ = training_batch(data, torch.arange(1), torch.Generator().manual_seed(0), 0.0, param.device,
                                       param.dtype)
            model.train()
            for layer in model.modules():
                if type(layer) is ELEMENTWISE:
                    layer.eval()  # a cohort draws these masks from each client's own stream
            with _RandomDraws() as noted:
                model(inputs)
    finally:
        for module, training in modes.items():
            module.train(training)
    return sorted(set(noted.draws))
