"""FedOpt's adaptive server optimizers (Reddi et al., "Adaptive Federated Optimization", ICLR 2021).

The server treats the clients' weighted mean delta as a pseudo-gradient (Algorithm 2 of the
paper, with their names): ``m = beta1 m + (1 - beta1) delta``, then

- FedAdagrad: ``v = v + delta^2``;
- FedAdam: ``v = beta2 v + (1 - beta2) delta^2``;
- FedYogi: ``v = v - (1 - beta2) delta^2 sign(v - delta^2)``;

and ``x = x + server_lr * m / (sqrt(v) + tau)``, with ``m`` starting at 0 and ``v`` at ``tau^2``
(the paper's ``v_{-1} >= tau^2``). As in the paper, no bias correction (Flower's ``FedAdam``
adds one). ``tau`` bounds the adaptivity: the larger, the closer to server SGD.
"""

from __future__ import annotations

import torch

from ..config.validation import SERVER_OPTIMIZERS
from ..client.optim import OneGroupOptimizer


class FedOptAdaptive(OneGroupOptimizer):
    """FedAdagrad, FedAdam or FedYogi over the global parameters, whose ``.grad`` holds minus the mean delta.

    Parameters
    ----------
    params : iterable of Tensor
    rule : {"adagrad", "adam", "yogi"}
    lr : float
        The server learning rate eta.
    beta1, beta2 : float
        The decay of the first and second moments (beta2 is unused by adagrad).
    tau : float
        The adaptivity bound, also the initial sqrt(v).
    """

    def __init__(self, params, *, rule: str, lr: float, beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3):
        if rule not in SERVER_OPTIMIZERS[1:]:
            raise ValueError(f"`rule`={rule!r} is not one of {', '.join(SERVER_OPTIMIZERS[1:])}")
        super().__init__(params, {"lr": lr, "beta1": beta1, "beta2": beta2, "tau": tau})
        self.rule = rule

    @torch.no_grad()
    def step(self, closure=None):
        """Move each parameter by ``lr * m / (sqrt(v) + tau)``, ``m`` and ``v`` the moments of its mean delta."""
        for group in self.param_groups:
            lr, beta1, beta2, tau = group["lr"], group["beta1"], group["beta2"], group["tau"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                delta = -param.grad
                state = self.state[param]
                if not state:
                    state["m"] = torch.zeros_like(param)
                    state["v"] = torch.full_like(param, tau * tau)
                m, v = state["m"], state["v"]
                m.mul_(beta1).add_(delta, alpha=1 - beta1)
                squared = delta * delta
                if self.rule == "adagrad":
                    v.add_(squared)
                elif self.rule == "adam":
                    v.mul_(beta2).add_(squared, alpha=1 - beta2)
                else:  # yogi: v moves towards delta^2 by an additive, sign-controlled step
                    v.sub_(torch.sign(v - squared) * squared, alpha=1 - beta2)
                param.add_(lr * m / (v.sqrt() + tau))
        return None
