"""What SCAFFOLD, FedNova and MOON change in FedAvg's round, as one interface every engine calls.

FedAvg's round (`fedsim.rounds.fedavg.FedAvgRounds`) samples clients, trains each
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

`RoundAlgorithm` is FedAvg's (nothing changed), the base of the others (`fedsim.algorithms.scaffold`,
`fedsim.algorithms.fednova`, `fedsim.algorithms.moon`); `fedsim.algorithms.round_algorithm` returns
the one of a config.

In one process the round calls `RoundAlgorithm.after_client` with each trained model. Where
clients run elsewhere (Flower's nodes) the same object serves both sides: a client receives
`RoundAlgorithm.broadcast` with the model, keeps `RoundAlgorithm.client_state` on its node
between rounds, runs ``after_client`` itself and replies `RoundAlgorithm.reply`, which the
server adds with `RoundAlgorithm.add_reply`.
"""

from __future__ import annotations

import torch

from .client_state import ClientStates


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
