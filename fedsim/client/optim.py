"""The optimizers: the clients' as a frozen configuration that builds a fresh one per client, and fedsim's SGD.

Constructing any ``torch.optim`` optimizer imports ``torch._dynamo`` (1.2 to 1.7 s on a 2-core
CPU): every process that trains would pay it once (each DDP rank, each Flower actor or
SuperNode, each worker of ``fedsim run --workers``), and a run whose clients take one fused step
and a Flower server would pay it for one step a round. fedsim's `SGD` is ``torch.optim.SGD``'s
arithmetic, operation for operation, without it; it keeps one group of parameters, with
``torch.optim.Optimizer``'s ``param_groups`` (which ``torch.amp.GradScaler`` unscales),
per-parameter ``state``, ``zero_grad`` and state dict format, so that a checkpoint written by
either loads in the other. Adam and AdamW are ``torch.optim``'s.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

import torch

from ..checks import SettingError, check_choice, check_number

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
            raise SettingError("`nesterov`=True needs `name`='sgd' and {momentum:name} > 0")

    def build(self, params):
        """Return a new optimizer over ``params`` (state starts empty, as for a fresh client)."""
        if self.name == "sgd":
            return SGD(params, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay,
                       nesterov=self.nesterov)
        optimizer = torch.optim.Adam if self.name == "adam" else torch.optim.AdamW
        return optimizer(params, lr=self.lr, weight_decay=self.weight_decay)

    def to_dict(self) -> dict:
        """Return the settings as a plain dict."""
        return asdict(self)


class OneGroupOptimizer:
    """One group of parameters with ``torch.optim.Optimizer``'s ``param_groups``, ``state`` and state dict.

    Subclasses implement ``step``.

    Parameters
    ----------
    params : iterable of Tensor
    defaults : dict
        The group's settings (``lr`` and the rule's own).
    """

    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params:
            raise ValueError("the optimizer got an empty parameter list")
        self.defaults = dict(defaults)
        self.param_groups = [{"params": params, **self.defaults}]
        self.state: defaultdict[torch.Tensor, dict] = defaultdict(dict)

    @property
    def params(self) -> list[torch.Tensor]:
        """The parameters of the one group."""
        return self.param_groups[0]["params"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradients, or drop them (``set_to_none``)."""
        for param in self.params:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:  # as torch.optim does: DDP's gradients may be views of its buckets, not to be detached
                if param.grad.grad_fn is not None:
                    param.grad.detach_()
                else:
                    param.grad.requires_grad_(False)
                param.grad.zero_()

    def step(self, closure=None):
        """Step every parameter that has a gradient (``closure`` is not supported: none of fedsim's callers pass one)."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """Return ``{"state": {index: ...}, "param_groups": [...]}`` as ``torch.optim.Optimizer.state_dict`` does."""
        index = {id(param): position for position, param in enumerate(self.params)}
        group = {key: value for key, value in self.param_groups[0].items() if key != "params"}
        return {"state": {index[id(param)]: dict(values) for param, values in self.state.items() if values},
                "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict` output (or a ``torch.optim`` optimizer's of the same parameters).

        The settings stay this optimizer's own (a resumed run's config is checked to be the
        saved one); floating-point state moves to each parameter's dtype and device.
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            saved = sum(len(group["params"]) for group in groups)
            raise ValueError(f"the optimizer state holds {saved} parameters in {len(groups)} group(s); "
                             f"this optimizer has {len(self.params)} in one")
        self.state = defaultdict(dict)
        for position, values in state_dict["state"].items():
            param = self.params[int(position)]
            self.state[param] = {name: _like(value, param) for name, value in values.items()}


def _like(value, param: torch.Tensor):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype=param.dtype, device=param.device, copy=True)
    return value


class SGD(OneGroupOptimizer):
    """SGD with momentum, weight decay and Nesterov, step for step ``torch.optim.SGD``'s (with ``dampening`` 0).

    Parameters
    ----------
    params : iterable of Tensor
    lr : float
    momentum, weight_decay : float, default 0
    nesterov : bool, default False
    """

    def __init__(self, params, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": 0.0, "weight_decay": weight_decay,
                                  "nesterov": nesterov, "maximize": False})

    @torch.no_grad()
    def step(self, closure=None):
        """``d = grad + weight_decay * p``; ``buf = momentum * buf + d`` (``buf = d`` at first); ``p -= lr * buf``.

        With Nesterov, ``p -= lr * (d + momentum * buf)``.
        """
        group = self.param_groups[0]
        lr, momentum, weight_decay, nesterov = group["lr"], group["momentum"], group["weight_decay"], group["nesterov"]
        for param in self.params:
            if param.grad is None:
                continue
            direction = param.grad if weight_decay == 0 else param.grad.add(param, alpha=weight_decay)
            if momentum != 0:
                state = self.state[param]
                buffer = state.get("momentum_buffer")
                if buffer is None:
                    buffer = state["momentum_buffer"] = direction.detach().clone()
                else:
                    buffer.mul_(momentum).add_(direction)
                direction = direction.add(buffer, alpha=momentum) if nesterov else buffer
            param.add_(direction, alpha=-lr)
        return None
