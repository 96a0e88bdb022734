"""The server step of FedOpt (Reddi et al., ICLR 2021), which every strategy and engine applies.

allreduce and reweighted step the global model with the combined gradient, as the optimizer
of a DDP script does; FedAvg steps it with the weighted mean delta as a pseudo-gradient. Both
are one optimizer over the global parameters; only its settings and its input differ. FedAvg's
may also be one of FedOpt's adaptive optimizers (`fedsim.algorithms.fedopt`: FedAdagrad, FedAdam, FedYogi).
"""

from __future__ import annotations

import torch

from .algorithms.fedopt import FedOptAdaptive
from .client.optim import SGD
from .config.strategies import get_strategy
from .client.training import loss_scaler


class ServerOptimizer:
    """SGD (or FedOpt's adaptive optimizers) over the global parameters, fed a combined gradient or a mean delta.

    Parameters
    ----------
    params : list of Tensor
        The global parameters, stepped in place.
    buffers : list of Tensor
        The global floating-point buffers (BatchNorm statistics): a mean delta moves them by
        the delta itself; they never see the optimizer.
    lr, momentum, weight_decay : float
        Plain FedAvg is lr 1 without momentum; FedAvgM (Hsu et al. 2019) adds momentum.
    scaler : torch.amp.GradScaler, optional
        The fp16 loss scaler whose scaled gradients `step_gradient` unscales.
    optimizer : {"sgd", "adagrad", "adam", "yogi"}, default "sgd"
        SGD (`fedsim.client.SGD`: ``torch.optim.SGD``'s steps and state without
        ``torch.optim``'s import cost), or FedOpt's `fedsim.algorithms.fedopt.FedOptAdaptive` with ``beta1``, ``beta2`` and ``tau``.
    """

    def __init__(self, params, buffers=(), *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 scaler: torch.amp.GradScaler | None = None, optimizer: str = "sgd", beta1: float = 0.9,
                 beta2: float = 0.99, tau: float = 1e-3):
        self.params, self.buffers = list(params), list(buffers)
        if optimizer == "sgd":
            self.optimizer = SGD(self.params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        else:
            self.optimizer = FedOptAdaptive(self.params, rule=optimizer, lr=lr, beta1=beta1, beta2=beta2, tau=tau)
        self.scaler = scaler

    @classmethod
    def for_config(cls, config, params, buffers=(), device: torch.device | None = None) -> ServerOptimizer:
        """Return the server optimizer of ``config``'s strategy (its own lr and momentum)."""
        if get_strategy(config.strategy).local_training:
            return cls(params, buffers, lr=config.server_lr, momentum=config.server_momentum,
                       optimizer=config.server_optimizer, beta1=config.server_beta1, beta2=config.server_beta2,
                       tau=config.server_tau)
        device = device if device is not None else params[0].device
        return cls(params, buffers, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay,
                   scaler=loss_scaler(config.amp, device))

    def zero_grad(self) -> None:
        """Zero the gradients in place (kept allocated: the engines accumulate into them)."""
        self.optimizer.zero_grad(set_to_none=False)

    def step_gradient(self) -> None:
        """Step with the combined gradient the parameters' ``.grad`` holds."""
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    @torch.no_grad()
    def step_delta(self, mean_delta: list[torch.Tensor]) -> None:
        """Step with the weighted mean delta of the parameters, then the buffers; ``mean_delta`` is consumed."""
        num_params = len(self.params)
        for param, delta in zip(self.params, mean_delta):
            param.grad = delta.neg_()  # the delta points downhill; the optimizer expects a gradient
        self.optimizer.step()
        if self.buffers:
            torch._foreach_add_(self.buffers, mean_delta[num_params:])

    def state_dict(self) -> dict:
        """Return the optimizer's state (momentum) and the loss scale, for a checkpoint."""
        state = {"optimizer": self.optimizer.state_dict()}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
