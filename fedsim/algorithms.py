"""What SCAFFOLD, FedNova and MOON change in FedAvg's round, as one interface every engine calls.

FedAvg's round (`fedsim.engines.inprocess.fedavg.FedAvgRounds`) samples clients, trains each
from the global model, sums the trained models with their weights and hands the mean delta to
the server step. The algorithms of the Non-IID benchmarks change three places of it:

==========  ==================================  ==============================  ======================
algorithm   client's local training             weight of a trained model        after the round
==========  ==================================  ==============================  ======================
fedavg      as is (FedProx: ``mu``)             ``p_k``                          -
scaffold    each step corrected by ``c - c_k``  ``p_k``                          server's ``c`` moves
fednova     as is                               ``p_k / a_k`` then x ``tau_eff``  -
moon        plus the contrastive loss           ``p_k``                          -
==========  ==================================  ==============================  ======================

`RoundAlgorithm` is FedAvg's (nothing changed); `round_algorithm` returns the one of a config.

In one process the round calls `RoundAlgorithm.after_client` with each trained model. Where
clients run elsewhere (Flower's nodes) the same object serves both sides: a client receives
`RoundAlgorithm.broadcast` with the model, keeps `RoundAlgorithm.client_state` on its node
between rounds, runs ``after_client`` itself and replies `RoundAlgorithm.reply`, which the
server adds with `RoundAlgorithm.add_reply`.
"""

from __future__ import annotations

import torch

from .client_state import ClientStates
from .moon import ModelContrast


class RoundAlgorithm:
    """FedAvg's round; subclasses change the local training, the weights or what follows the round.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    model : torch.nn.Module
        The model clients train.
    global_state : list of Tensor
        The global parameters then floating-point buffers (`fedsim.client.state_tensors` order).
    """

    #: Bytes a client receives and sends besides the model, per round (SCAFFOLD's control variates).
    extra_bytes: int = 0
    #: What each client keeps between the rounds it takes part in, if anything.
    client_states: ClientStates | None = None
    #: False on a server whose clients keep their states themselves (Flower's nodes): its
    #: checkpoints lack them, and resuming one is refused rather than restarting every client.
    holds_client_states: bool = True

    def __init__(self, config, model: torch.nn.Module, global_state: list[torch.Tensor]):
        self.num_params = sum(1 for _ in model.parameters())

    def begin_round(self) -> None:
        """Start a round's sums."""

    def client_terms(self, client: int, global_state: list[torch.Tensor]) -> dict:
        """Return the extra keyword arguments of `fedsim.client.client_update` for ``client``."""
        return {}

    def scale(self, weight: float, num_steps: int) -> float:
        """Return the factor of a trained model in the round's sum, given its weight and local steps."""
        return weight

    def after_client(self, client: int, global_state: list[torch.Tensor], trained: list[torch.Tensor],
                     num_steps: int) -> None:
        """Take note of ``client``'s trained tensors (its state for the next rounds, the round's sums)."""

    def sums(self) -> list[torch.Tensor]:
        """Return the round's sums that the processes of a multi-process engine add up."""
        return []

    @torch.no_grad()
    def to_delta(self, weighted_sum: list[torch.Tensor], global_state: list[torch.Tensor]) -> None:
        """Turn the round's sum of scaled trained models into the mean delta, in place (the weights sum to 1)."""
        torch._foreach_sub_(weighted_sum, global_state)

    def end_round(self) -> None:
        """Finish the round once the server has stepped."""

    def state_dict(self) -> dict:
        """Return what a checkpoint needs to continue the algorithm: the clients' states, if any."""
        if self.client_states is None:
            return {}
        return {"client_states": self.client_states.state_dict() if self.holds_client_states else None}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        if self.client_states is None:
            return
        if state["client_states"] is None:
            raise ValueError("this checkpoint was written by a server whose clients kept their states on their "
                             "own nodes (a Flower run), so it cannot continue them; start a new run")
        self.client_states.load_state_dict(state["client_states"])

    def broadcast(self) -> list[torch.Tensor]:
        """Return what the server sends every client with the global model."""
        return []

    def receive_broadcast(self, tensors: list[torch.Tensor]) -> None:
        """On a client: take in the server's `broadcast`."""

    def client_state(self, client: int) -> list[torch.Tensor] | None:
        """Return the state ``client`` keeps between rounds, ``None`` if it has none."""
        return None if self.client_states is None else self.client_states.get(client)

    def set_client_state(self, client: int, tensors: list[torch.Tensor] | None) -> None:
        """On a client: restore the state it kept (``None``: it has none yet)."""
        if self.client_states is not None:
            self.client_states.set(client, tensors)

    def reply(self) -> list[torch.Tensor]:
        """On a client, after `after_client`: its share of the round's sums, sent with its model."""
        return []

    def add_reply(self, tensors: list[torch.Tensor]) -> None:
        """On the server: add a client's `reply` to the round's sums."""


class Scaffold(RoundAlgorithm):
    """SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning", ICML 2020).

    Option II control variates. Client ``k`` trains with every step followed by
    ``y -= lr * (c - c_k)`` (the correction applied after the optimizer step, as NIID-Bench and
    Flower's baseline do; with plain SGD it is the paper's ``y -= lr * (g(y) - c_k + c)``), then
    ``c_k+ = c_k - c + (x - y_k) / (K lr)`` over its ``K`` steps, and it sends
    ``dc_k = c_k+ - c_k`` with its model. The server averages the models as FedAvg (its server
    step is the paper's global step size) and moves ``c += sum(dc_k) / N`` over the ``N``
    clients. Controls cover the parameters; BatchNorm statistics are averaged as FedAvg does.
    Each client's ``c_k`` is held in `fedsim.client_state.ClientStates`: one flat copy of the
    parameters per client that has trained. A client sends and receives a control variate
    besides the model: twice FedAvg's bytes for a model without buffers.
    """

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        params = global_state[: self.num_params]
        self.lr, self.num_clients = config.lr, config.num_partitions
        self.server_control = [torch.zeros_like(param) for param in params]
        self.client_states = ClientStates(params)
        self.control_sum = [torch.zeros_like(param) for param in params]
        self.extra_bytes = self.client_states.bytes_per_client()

    def begin_round(self) -> None:
        """Zero the round's sum of control-variate changes."""
        torch._foreach_zero_(self.control_sum)

    def client_terms(self, client, global_state) -> dict:
        """Return ``c - c_k``, the correction of each of ``client``'s steps."""
        own = self.client_states.get(client)
        if own is None:  # c_k starts at zero
            return {"correction": [control.clone() for control in self.server_control]}
        return {"correction": torch._foreach_sub(self.server_control, own)}

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

    def sums(self) -> list[torch.Tensor]:
        """The round's sum of control-variate changes."""
        return self.control_sum

    @torch.no_grad()
    def end_round(self) -> None:
        """Move the server's control variate: ``c += sum(dc_k) / N``."""
        torch._foreach_add_(self.server_control, self.control_sum, alpha=1.0 / self.num_clients)

    def state_dict(self) -> dict:
        """The server's and every client's control variates."""
        return {**super().state_dict(), "server_control": [control.clone() for control in self.server_control]}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        super().load_state_dict(state)
        torch._foreach_copy_(self.server_control, state["server_control"])

    def broadcast(self) -> list[torch.Tensor]:
        """The server's control variate ``c``."""
        return self.server_control

    def receive_broadcast(self, tensors) -> None:
        """Take in the server's ``c``."""
        torch._foreach_copy_(self.server_control, tensors)

    def reply(self) -> list[torch.Tensor]:
        """The client's ``dc_k`` (the round's sum holds that client's alone)."""
        return self.control_sum

    @torch.no_grad()
    def add_reply(self, tensors) -> None:
        """Add a client's ``dc_k`` to the round's sum."""
        torch._foreach_add_(self.control_sum, list(tensors))


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


class FedNova(RoundAlgorithm):
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
        self.totals = torch.zeros(2, dtype=torch.float64, device=global_state[0].device)

    def begin_round(self) -> None:
        """Zero the round's totals."""
        self.totals.zero_()

    def scale(self, weight, num_steps) -> float:
        """Return ``p_k / a_k`` and add to the totals."""
        steps = normalized_steps(num_steps, self.momentum)
        self.totals += torch.tensor([weight / steps, weight * steps], dtype=torch.float64, device=self.totals.device)
        return weight / steps

    def sums(self) -> list[torch.Tensor]:
        """The two totals."""
        return [self.totals]

    @torch.no_grad()
    def to_delta(self, weighted_sum, global_state) -> None:
        """``tau_eff * (sum_k (p_k / a_k) y_k - sum_k (p_k / a_k) x)``, in place."""
        scale_total, tau_eff = self.totals.tolist()
        torch._foreach_add_(weighted_sum, global_state, alpha=-scale_total)
        torch._foreach_mul_(weighted_sum, tau_eff)


class Moon(RoundAlgorithm):
    """MOON (Li et al., CVPR 2021): FedAvg whose clients add the model-contrastive loss (`fedsim.moon`).

    Each client's last trained model is its "previous model" in the next round it takes part in,
    held in `fedsim.client_state.ClientStates` (parameters and BatchNorm statistics, for eval mode).
    """

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.contrast = ModelContrast(model, mu=config.moon_mu, temperature=config.moon_temperature)
        self.client_states = ClientStates(global_state)

    def client_terms(self, client, global_state) -> dict:
        """Return the contrast against the global model and ``client``'s previous one (none the first time)."""
        return {"contrast": self.contrast.for_client(global_state, self.client_states.get(client))}

    def after_client(self, client, global_state, trained, num_steps) -> None:
        """Keep ``client``'s trained model as its previous model."""
        self.client_states.put(client, trained)


_ALGORITHMS = {"scaffold": Scaffold, "fednova": FedNova, "moon": Moon}


def round_algorithm(config, model, global_state) -> RoundAlgorithm:
    """Return the round algorithm of ``config.strategy`` (FedAvg's for fedavg)."""
    return _ALGORITHMS.get(config.strategy, RoundAlgorithm)(config, model, global_state)
