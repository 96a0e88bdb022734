"""FedDyn (Acar et al., "Federated Learning Based on Dynamic Regularization", ICLR 2021), on fedsim's public API.

Client k, from the global model w, minimises its loss plus a linear and a quadratic term,
``L_k(v) - <g_k, v> + alpha/2 |v - w|^2``, then keeps ``g_k <- g_k - alpha (v_k - w)`` (the
gradient of its loss at its new model, by the first-order condition). The server keeps
``h <- h - alpha/m sum_{k in P} (v_k - w)`` over the m clients that train (``num_partitions``
less the ``--holdout-clients``, which never do, as SCAFFOLD's N) and moves to the mean of the
trained models less ``h / alpha``. Run it with ``--weights equal`` for the paper's plain mean::

    fedsim run --strategy examples/algorithms/feddyn.py:FedDyn --algorithm-option alpha=0.01 --weights equal ...
"""

import torch

from fedsim.algorithms import Algorithm, ClientStates, LocalTerms, Option
from fedsim.config.partitioning import training_client_count


class DynamicRegularizer(LocalTerms):
    """A client's FedDyn terms: ``-<g_k, v> + alpha/2 |v - w|^2`` added to each step's loss."""

    def __init__(self, gradient, anchor, alpha):
        self.gradient, self.anchor, self.alpha = gradient, anchor, alpha

    def penalty(self, params):
        linear = sum((g * v).sum() for g, v in zip(self.gradient, params))
        quadratic = sum(((v - w) ** 2).sum() for v, w in zip(params, self.anchor))
        return self.alpha / 2 * quadratic - linear


class FedDyn(Algorithm):
    """FedDyn: each client's dynamic regulariser (its state ``g_k``) and the server's state ``h``."""

    name = "feddyn"
    stateful_clients = True
    options = {"alpha": Option(0.01, low=0.0, low_open=True, help="the regulariser's weight")}

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        params = global_state[: self.num_params]
        # held-out clients never train, so h's mean is over the others
        self.alpha, self.num_clients = self.option("alpha"), training_client_count(config)
        self.h = [torch.zeros_like(param) for param in params]
        self.change_sum = [torch.zeros_like(param) for param in params]  # sum over the round's clients of v_k - w
        self.client_states = ClientStates(params)  # g_k, zero until a client has trained

    def begin_round(self):
        torch._foreach_zero_(self.change_sum)

    def local_terms(self, client, global_state):
        params = global_state[: self.num_params]
        gradient = self.client_states.get(client) or [torch.zeros_like(param) for param in params]
        return DynamicRegularizer(gradient, params, self.alpha)

    @torch.no_grad()
    def after_client(self, client, global_state, trained, num_steps):
        change = torch._foreach_sub(trained[: self.num_params], global_state[: self.num_params])
        gradient = self.client_states.get(client) or [torch.zeros_like(tensor) for tensor in change]
        self.client_states.put(client, torch._foreach_sub(gradient, change, alpha=self.alpha))
        torch._foreach_add_(self.change_sum, change)

    @torch.no_grad()
    def to_delta(self, combined, global_state):
        torch._foreach_add_(self.h, self.change_sum, alpha=-self.alpha / self.num_clients)
        torch._foreach_sub_(combined, global_state)
        torch._foreach_add_(combined[: self.num_params], self.h, alpha=-1.0 / self.alpha)

    def state_dict(self):
        return {**super().state_dict(), "h": [tensor.clone() for tensor in self.h]}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        torch._foreach_copy_(self.h, state["h"])

    # On Flower each client runs `after_client` on its node and sends its v_k - w with its model.
    def reply(self):
        return self.change_sum

    @torch.no_grad()
    def add_reply(self, tensors):
        torch._foreach_add_(self.change_sum, list(tensors))
