"""The client optimizer, as a frozen configuration that builds a fresh optimizer per client."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .checks import check_choice, check_number

OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class OptimizerConfig:
    """Settings of the optimizer each client trains with.

    Parameters
    ----------
    name : {"sgd", "adam", "adamw"}
    lr : float
        Learning rate, > 0.
    momentum : float
        SGD momentum in [0, 1).
    weight_decay : float
        L2 penalty (decoupled for AdamW), >= 0.
    nesterov : bool
        Nesterov momentum for SGD (needs momentum > 0).

    Examples
    --------
    >>> OptimizerConfig(lr=0.1, momentum=0.9).build([torch.zeros(2, requires_grad=True)]).defaults["momentum"]
    0.9
    """

    name: str = "sgd"
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    def __post_init__(self):
        check_choice("name", self.name, OPTIMIZERS)
        check_number("lr", self.lr, low=0.0, low_open=True)
        check_number("momentum", self.momentum, low=0.0, high=1.0)
        check_number("weight_decay", self.weight_decay, low=0.0)
        if self.nesterov and (self.name != "sgd" or self.momentum == 0):
            raise ValueError("`nesterov`=True needs `name`='sgd' and `momentum` > 0")

    def build(self, params) -> torch.optim.Optimizer:
        """Return a new optimizer over ``params`` (state starts empty, as for a fresh client)."""
        if self.name == "sgd":
            return torch.optim.SGD(
                params, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay, nesterov=self.nesterov
            )
        optimizer = torch.optim.Adam if self.name == "adam" else torch.optim.AdamW
        return optimizer(params, lr=self.lr, weight_decay=self.weight_decay)

    def to_dict(self) -> dict:
        """Return the settings as a plain dict."""
        return asdict(self)
