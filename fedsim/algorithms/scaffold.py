"""SCAFFOLD (Karimireddy et al., ICML 2020): each local step corrected by the server's and the client's control variates."""

from __future__ import annotations

import torch

from ..config.partitioning import training_client_count
from .base import Algorithm, LocalTerms
from .client_state import ClientStates
from .declared import RoundSum, ServerState


class StepCorrection(LocalTerms):
    """SCAFFOLD's client side: every optimizer step followed by ``w -= lr * (c - c_k)``."""

    def __init__(self, correction: list[torch.Tensor], lr: float):
        self.correction, self.lr = correction, lr

    def after_step(self, params) -> None:
        """Apply the correction."""
        torch._foreach_add_(params, self.correction, alpha=-self.lr)

    @classmethod
    def stacked(cls, terms: list[StepCorrection]) -> StackedStepCorrection | None:
        """The clients' corrections stacked, one row per client."""
        if any(term is None for term in terms):
            return None
        return StackedStepCorrection([torch.stack(rows) for rows in zip(*(term.correction for term in terms))],
                                     terms[0].lr)


class StackedStepCorrection(StepCorrection):
    """SCAFFOLD's correction for a cohort: each client's row of ``w -= lr * (c - c_k)``, for the rows still training."""

    def after_step(self, params) -> None:
        """Apply each active client's correction."""
        active = params[0].shape[0]
        torch._foreach_add_(params, [correction[:active] for correction in self.correction], alpha=-self.lr)


class Scaffold(Algorithm):
    """SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning", ICML 2020).

    Option II control variates. Client ``k`` trains with every step followed by
    ``y -= lr * (c - c_k)`` (the correction applied after the optimizer step, as NIID-Bench and
    Flower's baseline do; with plain SGD it is the paper's ``y -= lr * (g(y) - c_k + c)``), then
    ``c_k+ = c_k - c + (x - y_k) / (K lr)`` over its ``K`` steps, and it sends
    ``dc_k = c_k+ - c_k`` with its model. The server averages the models as FedAvg (its server
    step is the paper's global step size) and moves ``c += sum(dc_k) / N`` over the ``N``
    clients. Controls cover the parameters; BatchNorm statistics are averaged as FedAvg does.
    Each client's ``c_k`` is held in `fedsim.algorithms.client_state.ClientStates`: one flat copy of the
    parameters per client that has trained. A client sends and receives a control variate
    besides the model: twice FedAvg's bytes for a model without buffers.
    """

    stateful_clients = True
    vectorizable = True  # each cohort's corrections stacked (StepCorrection.stacked)

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        params = global_state[: self.num_params]
        # N, the clients the server's c averages over: those that train (held-out clients never do)
        self.lr, self.num_clients = config.lr, training_client_count(config)
        self.server_control = ServerState(params, broadcast=True)  # c, sent to every client each round
        self.client_states = ClientStates(params)  # c_k
        self.control_sum = RoundSum(params)  # sum of the round's dc_k
        self.extra_bytes = self.client_states.bytes_per_client()

    def local_terms(self, client, global_state) -> StepCorrection:
        """Return the correction ``c - c_k`` of each of ``client``'s steps."""
        own = self.client_states.get(client)
        if own is None:  # c_k starts at zero
            return StepCorrection([control.clone() for control in self.server_control], self.lr)
        return StepCorrection(torch._foreach_sub(self.server_control, own), self.lr)

    @torch.no_grad()
    def after_client(self, client, global_state, trained, num_steps) -> None:
        """Update ``c_k`` by option II and add its change to the round's sum."""
        params = trained[: self.num_params]
        change = torch._foreach_sub(global_state[: self.num_params], params)
        torch._foreach_div_(change, num_steps * self.lr)
        torch._foreach_sub_(change, self.server_control)  # dc_k = (x - y_k) / (K lr) - c
        own = self.client_states.get(client)
        self.client_states.put(client, change if own is None else torch._foreach_add(own, change))
        torch._foreach_add_(self.control_sum, change)

    @torch.no_grad()
    def end_round(self) -> None:
        """Move the server's control variate: ``c += sum(dc_k) / N``."""
        torch._foreach_add_(self.server_control, self.control_sum, alpha=1.0 / self.num_clients)
