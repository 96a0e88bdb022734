"""The clients' optimizers on stacked tensors: one step for a whole cohort, each client's state its own.

A cohort's parameters are stacked along a first dimension, one row per client
(`fedsim.engines.inprocess.vectorized`). These optimizers keep their state stacked the same way
and step the rows of the clients still training, the first ``n`` (the cohort is ordered by
decreasing step count), so that a finished client's parameters and state stop changing. Under
fp16 loss scaling a client may skip a step (`fedsim.engines.inprocess.stacked_scaler`): its rows
are put back as they were, and Adam counts its steps, for the bias correction, per client.

The arithmetic is that of fedsim's `fedsim.client.SGD` (``torch.optim.SGD``'s) and of
``torch.optim.Adam``/``AdamW``'s single-tensor step, operation for operation, on whole stacks.
"""

from __future__ import annotations

import torch

from ...client.optim import OptimizerConfig
from .stacked_scaler import restore_rows, saved_rows

#: Adam's defaults in ``torch.optim.Adam``, which `fedsim.client.OptimizerConfig` builds it with.
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def stacked_optimizer(config: OptimizerConfig, stacks: list[torch.Tensor]):
    """Return the stacked optimizer of ``config`` over ``stacks`` (one row per client): `StackedSGD` or `StackedAdam`."""
    if config.name == "sgd":
        return StackedSGD(config, stacks)
    return StackedAdam(config, stacks)


class StackedSGD:
    """SGD with momentum, weight decay and Nesterov for a cohort: ``fedsim.client.SGD``'s step on every client's row.

    Parameters
    ----------
    config : fedsim.client.OptimizerConfig
    stacks : list of Tensor
        The cohort's parameters, each of shape ``(clients, *parameter_shape)``.
    """

    def __init__(self, config: OptimizerConfig, stacks: list[torch.Tensor]):
        self.config = config
        self.buffers: list[torch.Tensor] | None = None  # the momentum buffers, made at the first step

    @torch.no_grad()
    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor], skipped: torch.Tensor | None = None) -> None:
        """Step the first ``len(params[0])`` clients: ``params`` are views of the stacks' first rows, ``grads`` theirs.

        ``skipped`` (a bool per active client) marks clients whose step is undone (a non-finite fp16 gradient).
        """
        active = params[0].shape[0]
        if skipped is None or not bool(skipped.any()):
            self._step(params, grads, active)
            return
        first = self.buffers is None
        state = [*params, *([] if first else self.buffers)]
        saved = saved_rows(state, skipped)
        self._step(params, grads, active)
        restore_rows(state, skipped, saved)
        if first and self.buffers is not None:
            # no buffer yet, as torch.optim.SGD's for a client without a step: its first step's 0 * momentum + d is d
            for buffer in self.buffers:
                buffer[:active][skipped] = 0

    def _step(self, params: list[torch.Tensor], grads: list[torch.Tensor], active: int) -> None:
        lr, momentum, weight_decay = self.config.lr, self.config.momentum, self.config.weight_decay
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
    config : fedsim.client.OptimizerConfig
        ``name`` "adam" or "adamw"; ``torch.optim``'s default betas and eps.
    stacks : list of Tensor
        The cohort's parameters, each of shape ``(clients, *parameter_shape)``.
    """

    def __init__(self, config: OptimizerConfig, stacks: list[torch.Tensor]):
        self.config = config
        self.averages = [torch.zeros_like(stack) for stack in stacks]
        self.squares = [torch.zeros_like(stack) for stack in stacks]
        self.steps = torch.zeros(stacks[0].shape[0], dtype=torch.float64, device=stacks[0].device)  # per client

    @torch.no_grad()
    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor], skipped: torch.Tensor | None = None) -> None:
        """Step the first ``len(params[0])`` clients, but those ``skipped`` marks (see `StackedSGD.step`)."""
        active = params[0].shape[0]
        averages = [average[:active] for average in self.averages]
        squares = [square[:active] for square in self.squares]
        skipping = skipped is not None and bool(skipped.any())
        state = [*params, *averages, *squares]
        saved = saved_rows(state, skipped) if skipping else None
        steps = self.steps[:active]
        steps += 1 if not skipping else (~skipped).to(steps.dtype)
        self._step(params, grads, averages, squares, steps)
        if skipping:
            restore_rows(state, skipped, saved)

    def _step(self, params, grads, averages, squares, steps: torch.Tensor) -> None:
        lr, weight_decay = self.config.lr, self.config.weight_decay
        beta1, beta2 = ADAM_BETAS
        if weight_decay != 0:
            if self.config.name == "adamw":
                torch._foreach_mul_(params, 1 - lr * weight_decay)
            else:
                grads = torch._foreach_add(grads, params, alpha=weight_decay)
        torch._foreach_lerp_(averages, grads, 1 - beta1)
        torch._foreach_mul_(squares, beta2)
        torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
        # torch.optim.Adam's bias corrections, in float64 as its Python floats, one per client
        step_sizes = lr / (1 - beta1**steps)
        corrections2_sqrt = (1 - beta2**steps) ** 0.5
        for param, average, square in zip(params, averages, squares):
            rows = (-1, *[1] * (param.dim() - 1))
            denominator = (square.sqrt() / corrections2_sqrt.to(param.dtype).view(rows)).add_(ADAM_EPS)
            # addcdiv_'s (value * average) / denominator, with each client's value
            param.sub_(step_sizes.to(param.dtype).view(rows) * average / denominator)

    def state_bytes(self) -> int:
        """Bytes of the optimizer's state for the whole cohort."""
        return sum(t.numel() * t.element_size() for t in (*self.averages, *self.squares))
