"""How a run is set up and resumed on every engine: the rounds of a strategy, the state to restore and evaluate.

`RunResult` (`fedsim.results.outcome`) is what each engine's run returns.
"""

from __future__ import annotations

import torch

from ..build import RunSetup
from ..config.strategies import get_strategy
from .fedavg import FedAvgRounds
from .gradient import GradientRounds


def build_rounds(config, setup: RunSetup, *, fedavg=FedAvgRounds, gradient=GradientRounds):
    """Return the rounds of ``config.strategy`` over ``setup``: local training (fedavg) or gradient steps.

    ``fedavg`` and ``gradient`` are the classes to build, an engine's own subclasses where it has them.
    """
    rounds_class = fedavg if get_strategy(config.strategy).local_training else gradient
    return rounds_class(config, setup.model, setup.data, setup.task, setup.partition)


def restore(rounds, restored) -> None:
    """Give ``rounds`` the global tensors and engine state of a checkpoint (`Recorder.start`'s; ``None``: nothing)."""
    if restored is None:
        return
    with torch.no_grad():
        torch._foreach_copy_(rounds.global_state, restored.global_state)
    rounds.load_state_dict(restored.engine_state)


def evaluated_state(rounds) -> list[torch.Tensor] | None:
    """Return what `fedsim.client.evaluate` loads into the model: FedAvg's global tensors, or nothing.

    The gradient strategies' global state is the model's own, so nothing needs loading.
    """
    return None if isinstance(rounds, GradientRounds) else rounds.global_state
