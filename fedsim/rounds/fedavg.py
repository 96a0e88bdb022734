"""FedAvg's round, engine-neutral: sample clients, train each from the global model, weigh, step the server.

Every engine runs these rounds; an engine decides only where a client trains (this process, a
DDP rank, a Flower node) and how the sums travel (`served` and `combine`).
"""

from __future__ import annotations

import torch

from partitions import feature_noise_levels

from ..algorithms import declared
from ..client.loss_scale import RoundLossScale
from ..client.training import LocalTraining
from ..client.update import ClientUpdate, client_update, local_sample_count, state_tensors
from ..clock import ClientClock
from ..privacy.mechanism import ClientPrivacy
from ..privacy.plan import PrivacyPlan
from ..results.progress import RoundStats
from ..schedule import holdout_of, model_bytes, sample_participants
from ..support import privacy_refusal
from .hooks import checked_terms
from .server_side import RoundServer
from .system import (RoundTiming, cohort_size, dropped_clients, over_selected_fraction, partial_work, stragglers,
                     time_round)


class FedAvgRounds(RoundServer):
    """Sample clients, train each from the global model, average the trained models, step the server.

    The server's side is `fedsim.rounds.server_side.RoundServer`'s (the weights, the method's
    hooks, FedOpt's server step); this adds the clients: the data, the partition, the sampling,
    local training, client-level DP and the system's failures.

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
        super().__init__(config, model, partition.sizes)
        self.data, self.task, self.partition = data, task, partition
        self.training = LocalTraining.from_config(config)
        self.noise = feature_noise_levels(partition.num_partitions, config.feature_noise)
        self.privacy = self.client_privacy()
        # what one client receives, and sends, in a round
        self.state_bytes = sum(model_bytes(model)) + self.algorithm.extra_bytes
        self.loss_scale = RoundLossScale(config.amp, self.global_state[0].device)  # fp16 AMP's, else inert
        self.clock = ClientClock(config, len(self.sizes))
        self._timing: tuple[int, RoundTiming] | None = None  # the last round's, asked for more than once

    def client_privacy(self) -> ClientPrivacy | None:
        """Return the round's client-level DP (``dp_clip``), or ``None``; refuse a method it cannot bound."""
        # the accountant is told the clients the rounds sample from: those not held out
        plan = PrivacyPlan.for_config(self.config, self.participant_count())
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

    def drawn_clients(self, round_index: int) -> list[int]:
        """Return the clients round ``round_index`` samples, less those with an empty shard (nothing to train on).

        With ``over_select``, (1 + f) times the round's clients are sampled (`round_timing` keeps the first to return).
        """
        holdout = holdout_of(self.partition)
        fraction = self.config.fraction
        if self.config.over_select:
            fraction = over_selected_fraction(fraction, self.config.over_select, self.participant_count())
        sampled = sample_participants(len(self.sizes), fraction, self.config.seed, round_index, holdout,
                                      poisson=self.config.client_sampling == "poisson")
        return [int(k) for k in sampled if self.sizes[k] > 0]

    def participant_count(self) -> int:
        """Return the clients that rounds sample from: those not held out (`fedsim.schedule.holdout_of`)."""
        return len(self.sizes) - len(holdout_of(self.partition))

    def round_timing(self, round_index: int) -> RoundTiming:
        """Return round ``round_index``'s `fedsim.rounds.system.RoundTiming`: which drawn clients it keeps, which fail
        to return (``client_dropout``), return too late (``round_deadline``) or after the round had its clients
        (``over_select``), and its simulated seconds (`fedsim.clock`)."""
        if self._timing is None or self._timing[0] != round_index:
            drawn = self.drawn_clients(round_index)
            seconds = {client: self.clock.seconds(
                client, samples=local_sample_count(int(self.sizes[client]), self.client_training(client, round_index)),
                bytes_down=self.state_bytes, bytes_up=self.state_bytes) for client in drawn}
            wanted = cohort_size(self.config.fraction, self.participant_count()) if self.config.over_select else None
            timing = time_round(drawn, dropped_clients(self.config, drawn, round_index), seconds,
                                deadline=self.config.round_deadline, wanted=wanted)
            self._timing = (round_index, timing)
        return self._timing[1]

    def sampled_clients(self, round_index: int) -> list[int]:
        """Return the clients of round ``round_index`` that train and return in time (`round_timing`)."""
        return self.round_timing(round_index).kept

    def dropped_clients(self, round_index: int) -> list[int]:
        """Return the clients drawn in round ``round_index`` that fail to return (``client_dropout``)."""
        return self.round_timing(round_index).failed

    def client_training(self, client: int, round_index: int):
        """Return ``client``'s local training in round ``round_index``: the run's, or a straggler's partial work."""
        if not self.config.stragglers:  # the common case, once per client: no draw at all
            return self.training
        if client not in stragglers(self.config, self.drawn_clients(round_index), round_index):
            return self.training
        return partial_work(self.config, self.training, client, round_index)

    def note_system(self, stats: RoundStats, round_index: int) -> None:
        """Count round ``round_index``'s lost clients (sent the model, whose work the round did not take) and
        stragglers, and its simulated seconds (`round_timing`). The lost clients' downloads add to the bytes
        `close_round` counted."""
        timing = self.round_timing(round_index)
        stats.dropped = len(timing.lost)
        stats.bytes_down += len(timing.lost) * self.state_bytes
        stats.stragglers = len(stragglers(self.config, self.drawn_clients(round_index), round_index))
        stats.sim_s = timing.seconds

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
        """Return `RoundServer.state_dict`'s and the clients' loss scale."""
        state = super().state_dict()
        if (scale := self.loss_scale.state_dict()) is not None:
            state["scaler"] = scale
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        super().load_state_dict(state)
        self.loss_scale.load_state_dict(state.get("scaler"))
