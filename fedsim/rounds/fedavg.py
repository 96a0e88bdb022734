"""FedAvg's round, engine-neutral: sample clients, train each from the global model, weigh, step the server.

Every engine runs these rounds; an engine decides only where a client trains (this process, a
DDP rank, a Flower node) and how the sums travel (`served` and `combine`).
"""

from __future__ import annotations

import torch

from partitions import feature_noise_levels

from ..aggregate import accumulate, aggregation_weights
from ..algorithms import declared, round_algorithm
from ..client.update import ClientUpdate, client_update, get_state, state_tensors
from ..results.progress import RoundStats
from ..schedule import holdout_of, model_bytes, sample_participants
from .hooks import check_in_place, checked_tensors, checked_terms, checked_weight
from .system import dropped_clients, partial_work, stragglers
from ..server import ServerOptimizer
from ..client.loss_scale import RoundLossScale
from ..client.training import LocalTraining
from ..privacy.mechanism import ClientPrivacy
from ..privacy.plan import PrivacyPlan
from ..support import privacy_refusal


class FedAvgRounds:
    """Sample clients, train each from the global model, average the trained models, step the server.

    The server update is FedOpt's (Reddi et al., ICLR 2021): the weighted mean delta is a
    pseudo-gradient for an SGD server optimizer; learning rate 1 without momentum is plain
    FedAvg (McMahan et al. 2017), server momentum is FedAvgM (Hsu et al. 2019). Floating-point
    buffers (BatchNorm statistics) are averaged and never see the server optimizer. Only the
    running weighted sum of the trained models is held, so thousands of clients fit in memory.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    model : torch.nn.Module
        The one model object every client trains in turn.
    data : fedsim.data.Dataset
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    partition : partitions.Partition
        One shard per client.
    """

    def __init__(self, config, model, data, task, partition):
        self.config, self.model, self.data, self.task, self.partition = config, model, data, task, partition
        self.global_state = get_state(model)
        num_params = sum(1 for _ in model.parameters())
        self.server = ServerOptimizer.for_config(config, self.global_state[:num_params],
                                                 self.global_state[num_params:])
        self.training = LocalTraining.from_config(config)
        self.sizes = partition.sizes
        self.noise = feature_noise_levels(partition.num_partitions, config.feature_noise)
        self.algorithm = round_algorithm(config, model, self.global_state)
        self.privacy = self.client_privacy()
        # False on a server whose clients keep their states themselves (Flower's nodes): its
        # checkpoints lack them, and resuming one is refused rather than restarting every client
        self.holds_client_states = True
        # what one client receives, and sends, in a round
        self.state_bytes = sum(model_bytes(model)) + self.algorithm.extra_bytes
        self._kept: list[tuple[int, list[torch.Tensor], float]] = []  # a non-linear method's (client, model, weight)
        self.loss_scale = RoundLossScale(config.amp, self.global_state[0].device)  # fp16 AMP's, else inert

    def client_privacy(self) -> ClientPrivacy | None:
        """Return the round's client-level DP (``dp_clip``), or ``None``; refuse a method it cannot bound."""
        # the accountant is told the clients the rounds sample from: those not held out
        plan = PrivacyPlan.for_config(self.config, len(self.sizes) - len(holdout_of(self.partition)))
        if plan is None:
            return None
        if (reason := privacy_refusal(self.config, self.algorithm)) is not None:
            raise reason
        return ClientPrivacy(plan, self.global_state, self.config.seed)

    def train_round(self, round_index: int, samples_before: int = 0, target: int = 0) -> RoundStats:
        """Run round ``round_index``: sampled clients, local training, weighted mean, server step.

        A FedAvg round is the unit of work itself, so ``samples_before`` and ``target`` are unused.
        """
        assignments, weighted_sum, stats = self.open_round(self.sampled_clients(round_index))
        if assignments:
            self.train_clients(round_index, self.served(round_index, assignments), weighted_sum, stats)
        return self.close_round(round_index, weighted_sum, stats)

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
        weights = aggregation_weights(self.config.weights, self.sizes, clients) if clients else []
        weighted_sum = [torch.zeros_like(t) for t in self.global_state]
        return list(zip(clients, weights)), weighted_sum, RoundStats(clients=len(clients))

    def begin_sums(self) -> None:
        """Zero the round's sums besides the models': the method's, and client-level DP's count."""
        declared.begin_round(self.algorithm)
        if self.privacy is not None:
            self.privacy.begin_round()

    def round_sums(self) -> list[torch.Tensor]:
        """Return the round's sums besides the models' that every process adds to (`begin_sums`), in a fixed order."""
        return declared.round_sums(self.algorithm) + (self.privacy.round_sums if self.privacy is not None else [])

    def clients_need(self) -> dict:
        """Return the server's state, besides the global model, that a process training this round's clients needs
        and would otherwise hold a stale copy of (a worker forked when the run began): the method's broadcast
        state (`fedsim.algorithms.ServerState`), and client-level DP's clip, which the round's updates are clipped to.
        """
        needed = {}
        if broadcast := declared.broadcast(self.algorithm):
            needed["broadcast"] = [tensor.detach().clone() for tensor in broadcast]
        if self.privacy is not None:
            needed["privacy"] = self.privacy.state_dict()
        return needed

    def take_what_clients_need(self, needed: dict) -> None:
        """Take the server's `clients_need` in a process that trains clients for it."""
        if "broadcast" in needed:
            declared.receive_broadcast(self.algorithm, needed["broadcast"])
        if "privacy" in needed:
            self.privacy.load_state_dict(needed["privacy"])

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

    def close_round(self, round_index: int, weighted_sum: list[torch.Tensor], stats: RoundStats,
                    sent: int | None = None) -> RoundStats:
        """Close round ``round_index``: add up the processes' sums, step the server, count the bytes; return ``stats``.

        ``sent`` is the number of clients sent the model, those that did not reply included (every
        client of the round by default); the clients dropped by ``client_dropout`` are counted too.
        A round without clients keeps the model, except under client-level DP, whose server
        releases its noise every round, as its accountant assumes.
        """
        if stats.clients or self.privacy is not None:
            self.combine(weighted_sum, stats)
            self.loss_scale.settle()
            if self.privacy is not None:
                stats.dp_clip = self.privacy.clip
                self.privacy.release(weighted_sum, round_index)
                stats.epsilon = self.privacy.plan.epsilon(self.privacy.rounds)
            self.step_server(weighted_sum)
        stats.bytes_up = stats.clients * self.state_bytes
        stats.bytes_down = (stats.clients if sent is None else sent) * self.state_bytes
        self.note_system(stats, round_index)
        return stats

    def train_clients(self, round_index: int, assignments: list[tuple[int, float]], weighted_sum: list[torch.Tensor],
                      stats: RoundStats) -> None:
        """Train the clients of the (client, weight) pairs in turn and hand each in (`hand_in`)."""
        trained = state_tensors(self.model)
        for client, weight in assignments:
            update = self.train_client(client, round_index)
            self.hand_in(weighted_sum, stats, client, weight, trained, steps=update.num_steps,
                         samples=update.samples_processed, loss_sum=update.loss_sum)

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

    def drawn_clients(self, round_index: int) -> list[int]:
        """Return the clients round ``round_index`` samples, less those with an empty shard (nothing to train on)."""
        sampled = sample_participants(len(self.sizes), self.config.fraction, self.config.seed, round_index,
                                      holdout_of(self.partition), poisson=self.config.client_sampling == "poisson")
        return [int(k) for k in sampled if self.sizes[k] > 0]

    def sampled_clients(self, round_index: int) -> list[int]:
        """Return the clients of round ``round_index`` that train and return: the drawn ones less the dropped."""
        drawn = self.drawn_clients(round_index)
        dropped = set(dropped_clients(self.config, drawn, round_index))
        return [client for client in drawn if client not in dropped]

    def dropped_clients(self, round_index: int) -> list[int]:
        """Return the clients drawn in round ``round_index`` that fail to return (``client_dropout``)."""
        return dropped_clients(self.config, self.drawn_clients(round_index), round_index)

    def client_training(self, client: int, round_index: int):
        """Return ``client``'s local training in round ``round_index``: the run's, or a straggler's partial work."""
        if not self.config.stragglers:  # the common case, once per client: no draw at all
            return self.training
        if client not in stragglers(self.config, self.drawn_clients(round_index), round_index):
            return self.training
        return partial_work(self.config, self.training, client, round_index)

    def note_system(self, stats: RoundStats, round_index: int) -> None:
        """Count round ``round_index``'s dropped clients (sent the model, which never came back) and stragglers.

        Their bytes add to those `close_round` counted."""
        dropped = self.dropped_clients(round_index)
        stats.dropped = len(dropped)
        stats.bytes_down += len(dropped) * self.state_bytes
        stats.stragglers = len(stragglers(self.config, self.drawn_clients(round_index), round_index))

    def train_client(self, client: int, round_index: int) -> ClientUpdate:
        """Train ``client`` from the global model in round ``round_index``; its model is left in ``self.model``."""
        scaler = self.loss_scale.for_client()
        update = client_update(
            self.model, self.global_state, self.data, self.partition.shard(client), task=self.task,
            training=self.client_training(client, round_index), seed=self.config.seed, round=round_index,
            client=client, return_delta=False,
            noise_sigma=float(self.noise[client]), scaler=scaler,
            terms=checked_terms(self.algorithm, self.algorithm.local_terms(client, self.global_state)),
        )
        self.loss_scale.keep_scaler(scaler)
        return update

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

    def served(self, round_index: int, assignments: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Return the (client, weight) pairs of round ``round_index`` this process trains: all of them, here."""
        return assignments

    def combine(self, mean_delta: list[torch.Tensor], stats: RoundStats) -> None:
        """Add up the sums of all processes (nothing to add in one process)."""

    def run_notes(self) -> dict:
        """Client-level DP's record (`fedsim.privacy.plan.PrivacyPlan.record`), where the run has it; an engine whose
        clients train in more than one way adds which."""
        if self.privacy is None:
            return {}
        return self.privacy.plan.record(self.privacy.rounds, self.privacy.clip)

    def state_dict(self) -> dict:
        """Return the server optimizer's state (momentum), the algorithm's and the clients' loss scale."""
        state = {"server": self.server.state_dict(),
                 "algorithm": declared.state_dict(self.algorithm, with_client_states=self.holds_client_states)}
        if (scale := self.loss_scale.state_dict()) is not None:
            state["scaler"] = scale
        if self.privacy is not None:
            state["privacy"] = self.privacy.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.server.load_state_dict(state["server"])
        declared.load_state_dict(self.algorithm, state["algorithm"])
        self.loss_scale.load_state_dict(state.get("scaler"))
        if self.privacy is not None:
            self.privacy.load_state_dict(state["privacy"])
