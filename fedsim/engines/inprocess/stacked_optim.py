"""The clients' optimizers on stacked tensors: one step for a whole cohort, each client's state its own.

A cohort's parameters are stacked along a first dimension, one row per client
(`fedsim.engines.inprocess.vectorized`). These optimizers keep their state stacked the same way
and step the rows of the clients still training, the first ``n`` (the cohort is ordered by
decreasing step count), so that a finished client's parameters and state stop changing. Every
active client has taken the same number of steps, so a step count (Adam's bias correction) is
one number for all of them.

The arithmetic is that of fedsim's `fedsim.optim.SGD` (``torch.optim.SGD``'s) and of
``torch.optim.Adam``/``AdamW``'s single-tensor step, operation for operation, on whole stacks.
"""

from __future__ import annotations

import torch

from ...optim import OptimizerConfig

#: Adam's defaults in ``torch.optim.Adam``, which `fedsim.optim.OptimizerConfig` builds it with.
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def stacked_optimizer(config: OptimizerConfig, stacks: list[torch.Tensor]):
    """Return the stacked optimizer of ``config`` over ``stacks`` (one row per client): `StackedSGD` or `StackedAdam`."""
    if config.name == "sgd":
        return StackedSGD(config, stacks)
    return StackedAdam(config, stacks)


class StackedSGD:
    """SGD with momentum, weight decay and Nesterov for a cohort: ``fedsim.optim.SGD``'s step on every client's row.

    Parameters
    ----------
    config : fedsim.optim.OptimizerConfig
    stacks : list of Tensor
        The cohort's parameters, each of shape ``(clients, *parameter_shape)``.
    """

    def __init__(self, config: OptimizerConfig, stacks: list[torch.Tensor]):
        self.config = config
        self.buffers: list[torch.Tensor] | None = None  # the momentum buffers, made at the first step

    @torch.no_grad()
    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
        """Step the first ``len(params[0])`` clients: ``params`` are views of the stacks' first rows, ``grads`` theirs."""
        lr, momentum, weight_decay = self.config.lr, self.config.momentum, self.config.weight_decay
        active = params[0].shape[0]
        directions = grads if weight_decay == 0 else torch._foreach_add(grads, params, alpha=weight_decay)
        if momentum != 0:
            if self.buffers is None:  # every client of the cohort takes a first step
                self.buffers = [direction.detach().clone() for direction in directions]
                buffers = self.buffers
            else:
                buffers = [buffer[:active] for buffer in self.buffers]
                torch._foreach_mul_(buffers, momentum)
                torch._foreach_add_(buffers, directions)
            directions = torch._foreach_add(directions, buffers, alpha=momentum) if self.config.nesterov else buffers
        torch._foreach_add_(params, directions, alpha=-lr)

    def state_bytes(self) -> int:
        """Bytes of the optimizer's state for the whole cohort."""
        return sum(buffer.numel() * buffer.element_size() for buffer in self.buffers or [])


class StackedAdam:
    """Adam, or AdamW (decoupled weight decay), for a cohort: ``torch.optim.Adam``'s single-tensor step on every row.

    Parameters
    ----------
    config : fedsim.optim.OptimizerConfig
        ``name`` "adam" or "adamw"; ``torch.optim``'s default betas and eps.
    stacks : list of Tensor
        The cohort's parameters, each of shape ``(clients, *parameter_shape)``.
    """

    def __init__(self, config: OptimizerConfig, stacks: list[torch.Tensor]):
        self.config = config
        self.averages = [torch.zeros_like(stack) for stack in stacks]
        self.squares = [torch.zeros_like(stack) for stack in stacks]
        self.steps = 0

    @torch.no_grad()
    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
        """Step the first ``len(params[0])`` clients (their common step count is the cohort's, plus one)."""
        lr, weight_decay = self.config.lr, self.config.weight_decay
        (beta1, beta2), active = ADAM_BETAS, params[0].shape[0]
        self.steps += 1
        if weight_decay != 0:
            if self.config.name == "adamw":
                torch._foreach_mul_(params, 1 - lr * weight_decay)
            else:
                grads = torch._foreach_add(grads, params, alpha=weight_decay)
        averages = [average[:active] for average in self.averages]
        squares = [square[:active] for square in self.squares]
        torch._foreach_lerp_(averages, grads, 1 - beta1)
        torch._foreach_mul_(squares, beta2)
        torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
        step_size = lr / (1 - beta1**self.steps)
        correction2_sqrt = (1 - beta2**self.steps) ** 0.5
        for param, average, square in zip(params, averages, squares):
            denominator = (square.sqrt() / correction2_sqrt).add_(ADAM_EPS)
            param.addcdiv_(average, denominator, value=-step_size)

    def state_bytes(self) -> int:
        """Bytes of the optimizer's state for the whole cohort."""
        return sum(t.numel() * t.element_size() for t in (*self.averages, *self.squares))
