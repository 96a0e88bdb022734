"""FedDyn (Acar et al., "Federated Learning Based on Dynamic Regularization", ICLR 2021), on fedsim's public API.

Client k, from the global model w, minimises its loss plus a linear and a quadratic term,
``L_k(v) - <g_k, v> + alpha/2 |v - w|^2``, then keeps ``g_k <- g_k - alpha (v_k - w)`` (the
gradient of its loss at its new model, by the first-order condition). The server keeps
``h <- h - alpha/m sum_{k in P} (v_k - w)`` over the m clients that train (``num_partitions``
less the ``--holdout-clients``, which never do, as SCAFFOLD's N) and moves to the mean of the
trained models less ``h / alpha``. Run it with ``--weights equal`` for the paper's plain mean::

    fedsim run --strategy examples/algorithms/feddyn.py:FedDyn --algorithm-option alpha=0.01 --weights equal ...

Its tensors are declared (``h`` the server's, ``change_sum`` the round's sum, ``g_k`` each
client's); every engine carries them, checkpoints and Flower's messages included.
"""

import torch

from fedsim.algorithms import Algorithm, ClientStates, LocalTerms, Option, RoundSum, ServerState
from fedsim.config.partitioning import training_client_count


class FedDynTerms(LocalTerms):
    """A client's FedDyn terms ``-<g_k, v> + alpha/2 |v - w|^2``, by their gradient ``alpha (v - w) - g_k``."""

    def __init__(self, gradient, anchor, alpha):
        self.gradient, self.anchor, self.alpha = gradient, anchor, alpha

    def penalty_gradient(self, params):
        return [self.alpha * (v - w) - g for v, w, g in zip(params, self.anchor, self.gradient)]


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
        self.h = ServerState(params)
        self.change_sum = RoundSum(params)  # sum over the round's clients of v_k - w
        self.client_states = ClientStates(params)  # g_k, zero until a client has trained

    def local_terms(self, client, global_state):
        return FedDynTerms(self.client_states.get(client, zeros=True), global_state[: self.num_params], self.alpha)

    def after_client(self, client, global_state, trained, num_steps):  # under torch.no_grad, as to_delta
        change = torch._foreach_sub(trained[: self.num_params], global_state[: self.num_params])
        gradient = torch._foreach_sub(self.client_states.get(client, zeros=True), change, alpha=self.alpha)
        self.client_states.put(client, gradient)
        torch._foreach_add_(self.change_sum, change)

    def to_delta(self, combined, global_state):
        torch._foreach_add_(self.h, self.change_sum, alpha=-self.alpha / self.num_clients)
        torch._foreach_sub_(combined, global_state)
        torch._foreach_add_(combined[: self.num_params], self.h, alpha=-1.0 / self.alpha)
