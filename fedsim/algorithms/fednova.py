"""FedNova (Wang et al., NeurIPS 2020): each client's update normalized by its number of local steps."""

from __future__ import annotations

import torch

from .base import Algorithm
from .declared import RoundSum


def normalized_steps(num_steps: int, momentum: float = 0.0) -> float:
    """Return FedNova's ``a_k``: the L1 norm of a client's update weights over its ``num_steps`` SGD steps.

    ``num_steps`` for plain SGD; with heavy-ball momentum ``rho``,
    ``(tau - rho (1 - rho^tau) / (1 - rho)) / (1 - rho)`` (Wang et al. 2020, as NIID-Bench computes it).

    Examples
    --------
    >>> normalized_steps(5), round(normalized_steps(2, 0.5), 6)
    (5.0, 2.5)
    """
    if momentum == 0:
        return float(num_steps)
    return (num_steps - momentum * (1 - momentum**num_steps) / (1 - momentum)) / (1 - momentum)


class FedNova(Algorithm):
    """FedNova (Wang et al., "Tackling the Objective Inconsistency Problem in Heterogeneous Federated
    Optimization", NeurIPS 2020).

    A client that takes more local steps moves further; FedAvg's mean then leans towards the
    objectives of the clients with the largest shards. FedNova averages the normalised updates
    ``(y_k - x) / a_k`` with the weights ``p_k`` and rescales by ``tau_eff = sum_k p_k a_k``::

        delta = tau_eff * sum_k p_k / a_k (y_k - x)

    With equal step counts ``a_k = tau`` for all and this is FedAvg's mean delta. The running sum
    holds ``sum_k (p_k / a_k) y_k``; the two totals ``sum_k p_k / a_k`` and ``tau_eff`` turn it into
    the delta. BatchNorm statistics are normalised alike, as NIID-Bench does for every tensor.
    """

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.momentum = config.momentum
        # sum_k p_k / a_k and tau_eff, in float64 whatever the run's dtype
        self.totals = RoundSum([torch.zeros(2, dtype=torch.float64, device=global_state[0].device)])

    def scale(self, weight, num_steps) -> float:
        """Return ``p_k / a_k`` and add to the totals."""
        steps = normalized_steps(num_steps, self.momentum)
        totals = self.totals[0]
        totals += torch.tensor([weight / steps, weight * steps], dtype=torch.float64, device=totals.device)
        return weight / steps

    @torch.no_grad()
    def to_delta(self, weighted_sum, global_state) -> None:
        """``tau_eff * (sum_k (p_k / a_k) y_k - sum_k (p_k / a_k) x)``, in place."""
        scale_total, tau_eff = self.totals[0].tolist()
        torch._foreach_add_(weighted_sum, global_state, alpha=-scale_total)
        torch._foreach_mul_(weighted_sum, tau_eff)
