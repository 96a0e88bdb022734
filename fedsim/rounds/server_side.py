"""The server's side of FedAvg's round, without data: weigh the trained models, run the method's hooks, step.

`RoundServer` holds what a round's server needs and nothing a client needs: the global model,
the method (`fedsim.algorithms`), the server optimizer. `fedsim.rounds.fedavg.FedAvgRounds`
adds the clients (the data, the partition, the sampling, local training) for fedsim's engines;
`fedsim.flower.MethodStrategy` drives it alone, in a Flower user's ``ServerApp``, whose clients
train elsewhere.
"""

from __future__ import annotations

import torch

from ..aggregate import accumulate, aggregation_weights
from ..algorithms import declared, round_algorithm
from ..client.update import get_state
from ..results.progress import RoundStats
from ..server import ServerOptimizer
from .hooks import check_in_place, checked_tensors, checked_weight


class RoundServer:
    """A FedAvg round's server: the trained models weighed by the method's rules, combined, and the server step.

    The server update is FedOpt's (Reddi et al., ICLR 2021): the weighted mean delta is a
    pseudo-gradient for an SGD server optimizer; learning rate 1 without momentum is plain
    FedAvg (McMahan et al. 2017), server momentum is FedAvgM (Hsu et al. 2019). Floating-point
    buffers (BatchNorm statistics) are averaged and never see the server optimizer. Only the
    running weighted sum of the trained models is held, so thousands of clients fit in memory.

    A round: `open_round` with the clients that returned, `hand_in` for each (any order), then
    `step_server` on the weighted sum.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        Reads the method (``strategy``, ``algorithm_options``, ``mu``), ``weights`` and the server
        optimizer's settings.
    model : torch.nn.Module
        The model the clients train; its parameters and floating-point buffers, in that order,
        are the global model (`fedsim.client.get_state`).
    sizes : array_like of int or dict
        The number of training samples of each client, indexed by client (``size`` weights read it).
    """

    def __init__(self, config, model, sizes):
        self.config, self.model, self.sizes = config, model, sizes
        self.global_state = get_state(model)
        num_params = sum(1 for _ in model.parameters())
        self.server = ServerOptimizer.for_config(config, self.global_state[:num_params],
                                                 self.global_state[num_params:])
        self.algorithm = round_algorithm(config, model, self.global_state)
        self.privacy = None  # client-level DP (`fedsim.privacy.mechanism.ClientPrivacy`), where a subclass has it
        # False on a server whose clients keep their states themselves (Flower's nodes): its
        # checkpoints lack them, and resuming one is refused rather than restarting every client
        self.holds_client_states = True
        self._kept: list[tuple[int, list[torch.Tensor], float]] = []  # a non-linear method's (client, model, weight)

    def open_round(self, clients: list[int]) -> tuple[list[tuple[int, float]], list[torch.Tensor], RoundStats]:
        """Open a round of ``clients`` (those that train and return, in partition order).

        Returns
        -------
        assignments : list of (int, float)
            Each client and its weight in the round (`fedsim.aggregate.aggregation_weights`).
        weighted_sum : list of Tensor
            Zeros, to which `hand_in` adds each client's weighted trained model.
        stats : RoundStats
            The round's counts, to which `hand_in` adds each client's.
        """
        if clients or self.privacy is not None:
            self.begin_sums()
        sizes = [self.sizes[client] for client in clients]
        weights = aggregation_weights(self.config.weights, sizes, range(len(clients))) if clients else []
        weighted_sum = [torch.zeros_like(t) for t in self.global_state]
        return list(zip(clients, weights)), weighted_sum, RoundStats(clients=len(clients))

    def begin_sums(self) -> None:
        """Zero the round's sums besides the models': the method's, and client-level DP's count."""
        declared.begin_round(self.algorithm)
        if self.privacy is not None:
            self.privacy.begin_round()

    def hand_in(self, weighted_sum: list[torch.Tensor], stats: RoundStats, client: int, weight: float,
                trained: list[torch.Tensor], *, steps: int, samples: int, loss_sum: float,
                reply: list[torch.Tensor] | None = None) -> None:
        """Add one client's trained model to the round, whichever engine trained it and in whatever order.

        Its counts (``steps``, ``samples`` trained on, their ``loss_sum``) go to ``stats``; its
        model, weighted by the method's `scale`, to ``weighted_sum``
        (or is kept whole for a method's own `aggregate`); the method's client hook runs on it
        here, or, where the client ran that hook itself (a Flower node), its ``reply`` is added.
        """
        stats.add_client(samples, loss_sum, steps, f"client {client}")
        self.add_trained(weighted_sum, client, trained, weight, steps)
        if reply is None:
            with torch.no_grad():
                self.algorithm.after_client(client, self.global_state, trained, steps)
        else:
            declared.add_reply(self.algorithm, reply)

    def add_trained(self, weighted_sum: list[torch.Tensor], client: int, trained: list[torch.Tensor], weight: float,
                    num_steps: int) -> None:
        """Add a client's trained tensors to the round: to the running weighted sum, or a copy kept whole.

        A linear algorithm's combination is that sum; the others' (`fedsim.algorithms.Algorithm.aggregate`)
        need every model, kept in client order until `step_server`.
        """
        if self.privacy is not None:  # clipped, alike: the client's weight is the release's 1 / qN
            self.privacy.add_update(weighted_sum, trained)
            return
        scale = self.client_weight(weight, num_steps)
        if self.algorithm.linear:
            accumulate(weighted_sum, trained, scale)
        else:
            self._kept.append((client, [tensor.detach().clone() for tensor in trained], scale))

    def client_weight(self, weight: float, num_steps: int) -> float:
        """Return the weight of a client's trained model in the round's combination: the method's `scale`, checked."""
        return checked_weight(self.algorithm, self.algorithm.scale(weight, num_steps))

    def step_server(self, mean_state: list[torch.Tensor]) -> None:
        """Apply the server step to the round's combination (the weighted sum of its models, overwritten).

        What the method's server hooks return is checked here (`fedsim.rounds.hooks`), so that a
        wrong one is named with its hook and file rather than failing in the server step.
        """
        if not self.algorithm.linear:
            kept, self._kept = self._kept, []
            clients = [(client, int(self.sizes[client])) for client, _, _ in kept]
            combined = self.algorithm.aggregate([model for _, model, _ in kept], [scale for _, _, scale in kept],
                                                self.global_state, clients)
            with torch.no_grad():
                torch._foreach_copy_(mean_state, checked_tensors(self.algorithm, "aggregate", combined,
                                                                 self.global_state))
        with torch.no_grad():
            check_in_place(self.algorithm, "to_delta", self.algorithm.to_delta(mean_state, self.global_state))
        self.server.step_delta(mean_state)
        self.algorithm.end_round()

    def state_dict(self) -> dict:
        """Return the server optimizer's state (momentum), the algorithm's, and client-level DP's where there is."""
        state = {"server": self.server.state_dict(),
                 "algorithm": declared.state_dict(self.algorithm, with_client_states=self.holds_client_states)}
        if self.privacy is not None:
            state["privacy"] = self.privacy.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.server.load_state_dict(state["server"])
        declared.load_state_dict(self.algorithm, state["algorithm"])
        if self.privacy is not None:
            self.privacy.load_state_dict(state["privacy"])
