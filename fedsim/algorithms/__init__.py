"""What the Non-IID algorithms change in FedAvg's round: one module each over the base every engine calls.

`RoundAlgorithm` (``base``) is FedAvg's round, unchanged, and the interface of the others:
`Scaffold` (``scaffold``), `FedNova` (``fednova``) and `Moon` (``moon``, with its contrastive
loss). ``client_state`` keeps what a client holds between rounds; ``fedopt`` is FedOpt's server
optimizers. `round_algorithm` returns the algorithm of a config. These modules import the client
core and the config, never the rounds or an engine.
"""

from .base import RoundAlgorithm
from .fednova import FedNova
from .moon import Moon
from .scaffold import Scaffold

_ALGORITHMS = {"scaffold": Scaffold, "fednova": FedNova, "moon": Moon}


def round_algorithm(config, model, global_state) -> RoundAlgorithm:
    """Return the round algorithm of ``config.strategy`` (FedAvg's for fedavg)."""
    return _ALGORITHMS.get(config.strategy, RoundAlgorithm)(config, model, global_state)


__all__ = ["FedNova", "Moon", "RoundAlgorithm", "Scaffold", "round_algorithm"]
