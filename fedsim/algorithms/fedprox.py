"""FedProx (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020), on the public API."""

from __future__ import annotations

import torch

from .base import Algorithm, LocalTerms, Option


class Proximal(LocalTerms):
    """A client's proximal term ``mu/2 |w - w_t|^2`` from the round's global parameters ``w_t``, added to each step's loss.

    Parameters
    ----------
    anchor : list of Tensor
        The global parameters the client started from (model.parameters() order).
    mu : float
        The proximal weight.
    """

    def __init__(self, anchor: list[torch.Tensor], mu: float):
        self.anchor, self.mu = anchor, mu

    def penalty(self, params) -> torch.Tensor:
        """``mu/2 |w - w_t|^2`` over the parameters (stacked clients' rows: the sum of their terms)."""
        return self.mu / 2 * sum(((param - start) ** 2).sum() for param, start in zip(params, self.anchor))

    @torch.no_grad()
    def penalty_gradient(self, params) -> list[torch.Tensor]:
        """``mu (w - w_t)``, the penalty's gradient in closed form (stacked clients' rows: each row's own).

        Two passes over the parameters where autograd would take a backward through the penalty,
        which costs as much as the rest of a small network's step; the same arithmetic as that
        backward (``mu/2`` times ``2 (w - w_t)``, mu/2 doubled exactly), so the result is the same.
        """
        gradients = torch._foreach_sub(params, self.anchor)
        torch._foreach_mul_(gradients, self.mu)
        return gradients

    @classmethod
    def stacked(cls, terms: list[Proximal]) -> Proximal | None:
        """The clients' common term, which broadcasts over their stacked rows (one anchor, one mu)."""
        if any(term is None for term in terms):
            return None
        first = terms[0]
        same_anchor = all(len(term.anchor) == len(first.anchor) and all(
            mine is theirs for mine, theirs in zip(term.anchor, first.anchor)) for term in terms)
        if same_anchor and all(term.mu == first.mu for term in terms):
            return first
        return None


class FedProx(Algorithm):
    """FedAvg whose clients minimise their loss plus ``mu/2 |w - w_t|^2`` (config ``mu``; fedavg with ``mu`` > 0).

    The term's gradient is zero at a client's first step, which starts from ``w_t``, so a client
    that takes a single step trains as FedAvg's: the one-step fusion still applies.
    """

    name = "fedprox"
    needs_client_loop = False  # the proximal gradient vanishes at the one step the fusion takes
    vectorizable = True  # the proximal term broadcasts over a cohort's stacked rows
    options = {"mu": Option(0.0, low=0.0, help="the proximal weight", setting="mu")}

    def local_terms(self, client, global_state) -> Proximal:
        """The proximal term around the round's global parameters."""
        return Proximal(global_state[: self.num_params], self.option("mu"))
