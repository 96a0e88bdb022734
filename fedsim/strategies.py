"""The three strategies, each one configuration of the FedOpt round loop (Reddi et al., ICLR 2021).

=============  ===========================  ==========================================  ========================
strategy       local work per round         weights                                     server optimizer
=============  ===========================  ==========================================  ========================
``allreduce``  one step per rank, repeated  equal (1/K)                                 SGD(lr, momentum, wd)
``reweighted`` one step per rank, repeated  size, class-balanced, dynamic (or equal)    SGD(lr, momentum, wd)
``fedavg``     E local epochs (or tau)      n_k / n (or equal)                          SGD(server_lr, server_momentum)
=============  ===========================  ==========================================  ========================

With plain SGD, tau = 1 and equal weights, fedavg's arithmetic equals allreduce's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Registry


@dataclass(frozen=True)
class Strategy:
    """How a strategy fills in the round loop.

    Attributes
    ----------
    name : str
    local_training : bool
        Clients train locally and send deltas (fedavg), rather than ranks sending one gradient per step.
    weight_rules : tuple of str
        The ``weights`` rules it accepts; the first is its default.
    """

    name: str
    local_training: bool
    weight_rules: tuple[str, ...]

    def describe(self, config) -> str:
        """Return a one-line description of this strategy under ``config``."""
        if self.local_training:
            work = f"tau={config.local_steps} steps" if config.local_steps else f"E={config.local_epochs} epochs"
            prox = f", FedProx mu={config.mu}" if config.mu else ""
            return (f"{self.name}: C={config.fraction}, {work} of B={config.batch_size} at lr={config.lr}{prox}, "
                    f"{config.weights} weights, server SGD(lr={config.server_lr}, momentum={config.server_momentum})")
        rule = f"{config.weights} ({config.dynamic_rule}, T={config.temperature})" if config.weights == "dynamic" \
            else config.weights
        return (f"{self.name}: 1 step of B={config.batch_size} per rank, {rule} weights, "
                f"SGD(lr={config.lr}, momentum={config.momentum}, weight_decay={config.weight_decay})")


STRATEGIES: Registry[Strategy] = Registry("strategy", "strategy")
for _strategy in (
    Strategy("allreduce", local_training=False, weight_rules=("equal",)),
    Strategy("reweighted", local_training=False, weight_rules=("size", "class-balanced", "dynamic", "equal")),
    Strategy("fedavg", local_training=True, weight_rules=("size", "equal")),
):
    STRATEGIES.register(_strategy.name)(_strategy)


def get_strategy(name: str) -> Strategy:
    """Return the strategy called ``name``; an unknown name lists the known ones."""
    return STRATEGIES.get(name)


def list_strategies() -> list[str]:
    """Return the strategy names."""
    return STRATEGIES.names()
