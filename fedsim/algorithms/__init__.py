"""The public algorithm API and the Non-IID algorithms built on it, one module each.

`Algorithm` (``base``) is FedAvg's round, the interface every engine calls and the base of every
method: `FedProx` (``fedprox``), `Scaffold` (``scaffold``), `FedNova` (``fednova``), `Moon` (``moon``, with its
contrastive loss), and a user's own, named by reference (``--strategy path/to/file.py:Name``).
`LocalTerms` is what a method changes in a client's training, `Option` a setting it declares;
`ServerState`, `RoundSum` and `ClientStates` (``declared``, ``client_state``) the tensors it
keeps; ``fedopt`` is FedOpt's server optimizers. `algorithm_class` returns the class of a
strategy, whose declared capabilities the engines read; `round_algorithm` builds the algorithm
of a config. These modules import the client core and the config, never the rounds or an engine.
"""

from ..config.strategies import get_strategy
from .base import Algorithm, LocalTerms, Option
from .client_state import ClientStates
from .declared import RoundSum, ServerState, check_declared, client_store
from .fedprox import FedProx, Proximal
from .fednova import FedNova
from .moon import Moon
from .scaffold import Scaffold

_BUILT_IN = {"fedavg": Algorithm, "scaffold": Scaffold, "fednova": FedNova, "moon": Moon}


def algorithm_class(strategy: str) -> type[Algorithm]:
    """Return the algorithm class of a local-training strategy: a built-in one's, or the user's class a reference names."""
    return get_strategy(strategy).algorithm or _BUILT_IN[strategy]


def round_algorithm(config, model, global_state) -> Algorithm:
    """Return the algorithm of ``config.strategy`` for ``model``, from the round's ``global_state``."""
    cls = algorithm_class(config.strategy)
    if cls is Algorithm and config.mu > 0:  # fedavg with a proximal term
        cls = FedProx
    algorithm = cls(config, model, global_state)
    check_declared(algorithm, global_state)
    if client_store(algorithm) is not None and not cls.stateful_clients:
        raise TypeError(f"{cls.__name__} keeps `ClientStates` but does not declare `stateful_clients` = True; "
                        "declare it, so that the engines that cannot hold a client's state refuse it")
    return algorithm


__all__ = ["Algorithm", "ClientStates", "FedNova", "FedProx", "LocalTerms", "Moon", "Option", "Proximal", "RoundSum",
           "Scaffold", "ServerState", "algorithm_class", "round_algorithm"]
