"""FedAvg's clients without rounds: an event queue on the simulated clock, FedBuff's buffer and FedAsync's mixing.

``concurrency`` clients train at any time, each from the model version it was sent. When one
returns, its update is weighed by its staleness (the server steps taken since it was sent,
`fedsim.staleness`) and the server takes it:

- FedBuff (Nguyen et al., AISTATS 2022) adds ``s(staleness) x (trained - sent)`` to a buffer,
  weighted by the run's rule (a client's size, or equal), and after ``buffer`` updates steps the
  server with their weighted mean as the round's mean delta (so the server optimizer, its
  learning rate and momentum, are FedAvg's);
- FedAsync (Xie et al. 2019) mixes each arriving model in: ``x <- x + a (trained - x)`` with
  ``a = async_alpha x s(staleness)``.

Then a client sampled from those not training (seeded by the run and the dispatch's index) takes
the free place. A client trains when it is sent the model, from that model: what it sends back
is fixed then, and waits in the queue until its simulated arrival. The queue is ordered by
arrival time, then client id, and every update that arrives at one time is taken before the
free places are filled, so a run repeats itself exactly, and with ``buffer`` = ``concurrency`` =
a round's clients, equal times and a constant staleness weight, FedBuff is FedAvg, round for
round. A row of ``metrics.csv`` is written every time a round's number of clients
(``fraction`` x K) has returned: the same client work as a synchronous round. A checkpoint holds
the clock, the clients in flight with their updates, and the buffer, so a resumed run goes on
to the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..aggregate import accumulate
from ..checks import SettingError
from ..client.update import state_tensors
from ..results.progress import RoundStats
from ..schedule import holdout_of
from ..seeding import Stream, derive_seed
from ..support import asynchronous_refusal, check_runs_on
from .fedavg import FedAvgRounds
from .system import cohort_size
from ..staleness import Staleness


@dataclass
class InFlight:
    """A client sent the model and not yet taken back.

    Attributes
    ----------
    client : int
    dispatch : int
        The index of the moment it was sent: the key of its training's random streams.
    version : int
        The server steps taken when it was sent.
    arrives : float
        The simulated time its update reaches the server.
    update : list of Tensor
        What it sends: FedBuff's ``trained - sent``, FedAsync's trained model.
    samples, steps : int
    loss_sum : float
    """

    client: int
    dispatch: int
    version: int
    arrives: float
    update: list[torch.Tensor]
    samples: int
    steps: int
    loss_sum: float

    @property
    def order(self) -> tuple[float, int]:
        """Its place in the queue: arrival time, then client id."""
        return self.arrives, self.client


class AsynchronousRounds(FedAvgRounds):
    """FedBuff or FedAsync (``asynchronous``) over `FedAvgRounds`' clients, with the same parameters.

    ``train_round`` takes updates until a round's number of clients has returned; the server
    steps inside it whenever its rule says.
    """

    def __init__(self, config, model, data, task, partition):
        super().__init__(config, model, data, task, partition)
        if (reason := asynchronous_refusal(config, self.algorithm)) is not None:
            raise reason
        if config.vectorize:
            check_runs_on(config, "cohorts")
        holdout = set(holdout_of(partition))
        self.participants = [k for k in range(len(self.sizes)) if k not in holdout and self.sizes[k] > 0]
        if not self.participants:
            raise SettingError("{asynchronous} needs a client that trains: every shard is empty or held out "
                               "({holdout_clients:name})", asynchronous=config.asynchronous)
        self.cohort = cohort_size(config.fraction, self.participant_count())
        self.concurrency = min(config.concurrency or self.cohort, len(self.participants))
        self.staleness = Staleness.parse(config.staleness)
        self.now, self.version, self.dispatches = 0.0, 0, 0
        self.in_flight: list[InFlight] = []
        self.buffer = [torch.zeros_like(tensor) for tensor in self.global_state]
        self.buffered, self.buffer_weight = 0, 0.0

    def train_round(self, round_index: int, samples_before: int = 0, target: int = 0) -> RoundStats:
        """Take updates, in their simulated order, until a round's number of clients has returned."""
        stats = RoundStats()
        started = self.now
        while stats.clients < self.cohort:
            if not self.in_flight or self.in_flight[0].arrives > self.now:  # what arrived at `now` is taken first
                self.dispatch(stats)
            self.take(self.in_flight.pop(0), stats)
        stats.sim_s = self.now - started
        stats.server_steps = self.version
        self.loss_scale.settle()  # fp16 AMP's clients of the row start the next from their most cautious scale
        return stats

    def dispatch(self, stats: RoundStats) -> None:
        """Fill the free places with clients not training, drawn as `fedsim.schedule.sample_clients` draws a round's.

        Each is sent the model and trains from it at once; its update joins the queue at its arrival time.
        """
        busy = {flight.client for flight in self.in_flight}
        free = [client for client in self.participants if client not in busy]
        count = min(self.concurrency - len(self.in_flight), len(free))
        if count <= 0:
            return
        rng = np.random.default_rng(derive_seed(self.config.seed, Stream.SAMPLING, self.dispatches))
        chosen = free if count >= len(free) else [free[k] for k in np.sort(rng.choice(len(free), count, replace=False))]
        for client in chosen:
            self.in_flight.append(self.send(client))
            stats.bytes_down += self.state_bytes
        self.in_flight.sort(key=lambda flight: flight.order)
        self.dispatches += 1

    def send(self, client: int) -> InFlight:
        """Train ``client`` from the current model and return it in flight, arriving after its simulated time."""
        update = self.train_client(client, self.dispatches)
        trained = state_tensors(self.model)
        with torch.no_grad():
            self.algorithm.after_client(client, self.global_state, trained, update.num_steps)  # its own state only
            if self.config.asynchronous == "fedbuff":
                sent = torch._foreach_sub([tensor.detach() for tensor in trained], self.global_state)
            else:
                sent = [tensor.detach().clone() for tensor in trained]
        seconds = self.clock.seconds(client, samples=update.samples_processed, bytes_down=self.state_bytes,
                                     bytes_up=self.state_bytes)
        return InFlight(client, self.dispatches, self.version, self.now + seconds, sent, update.samples_processed,
                        update.num_steps, update.loss_sum)

    def take(self, flight: InFlight, stats: RoundStats) -> None:
        """Take ``flight``'s update at its arrival: weigh it by its staleness, and step the server when its rule says."""
        self.now = flight.arrives
        staleness = self.version - flight.version
        stats.add_client(flight.samples, flight.loss_sum, flight.steps, f"client {flight.client}")
        stats.clients += 1
        stats.bytes_up += self.state_bytes
        stats.staleness_sum += staleness
        stats.staleness_max = max(stats.staleness_max, staleness)
        weight = self.staleness(staleness)
        if self.config.asynchronous == "fedasync":
            mix = self.config.async_alpha * weight  # x + a (trained - x), as a server step of lr 1
            with torch.no_grad():
                mixed = torch._foreach_sub(flight.update, self.global_state)
                torch._foreach_mul_(mixed, mix)
                torch._foreach_add_(mixed, self.global_state)
            self.server_step(mixed)
            return
        share = float(self.sizes[flight.client]) if self.config.weights == "size" else 1.0
        accumulate(self.buffer, flight.update, share * weight)
        self.buffered += 1
        self.buffer_weight += share
        if self.buffered == self.config.buffer:
            with torch.no_grad():  # the buffer's weighted mean delta, added to the model: the round's combination
                torch._foreach_mul_(self.buffer, 1.0 / self.buffer_weight)
                torch._foreach_add_(self.buffer, self.global_state)
            self.server_step(self.buffer)
            self.buffer = [torch.zeros_like(tensor) for tensor in self.global_state]
            self.buffered, self.buffer_weight = 0, 0.0

    def server_step(self, combined: list[torch.Tensor]) -> None:
        """Step the server to ``combined`` as FedAvg's round would (`RoundServer.step_server`); count the version."""
        self.begin_sums()
        self.step_server(combined)
        self.version += 1

    def run_notes(self) -> dict:
        """The server's steps and the simulated seconds, besides `FedAvgRounds.run_notes`."""
        return {**super().run_notes(), "server_steps": self.version, "clients_in_flight": len(self.in_flight)}

    def state_dict(self) -> dict:
        """Return `FedAvgRounds.state_dict`'s, the clock, the clients in flight and the buffer."""
        return {**super().state_dict(), "asynchronous": {
            "now": self.now, "version": self.version, "dispatches": self.dispatches,
            "in_flight": [vars(flight) for flight in self.in_flight],
            "buffer": self.buffer, "buffered": self.buffered, "buffer_weight": self.buffer_weight}}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        super().load_state_dict(state)
        clock = state["asynchronous"]
        self.now, self.version, self.dispatches = clock["now"], clock["version"], clock["dispatches"]
        self.in_flight = [InFlight(**{**flight, "update": [tensor.to(like) for tensor, like in
                                                           zip(flight["update"], self.global_state)]})
                          for flight in clock["in_flight"]]  # a checkpoint is read onto the CPU
        self.buffer = [tensor.to(like) for tensor, like in zip(clock["buffer"], self.global_state)]
        self.buffered, self.buffer_weight = clock["buffered"], clock["buffer_weight"]
