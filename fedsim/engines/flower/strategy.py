"""fedsim's FedAvg as a Flower strategy: seeded client sampling, replies in partition order, the shared server step.

`SeededFedAvg` is Flower's ``FedAvg`` with its two template methods filled in by fedsim's core,
so Flower's own ``Strategy.start`` drives it:

- ``configure_train`` samples the round's clients with `fedsim.schedule.sample_clients`
  (seeded by (seed, round); Flower's own sampling is ``random.sample``, unseeded) and sends each
  the global model and the round;
- ``aggregate_train`` adds the replies up in partition-id order (not arrival order, so the sum
  is the same every run), weighted by the shared rule (`fedsim.aggregate.aggregation_weights`)
  over the clients that replied, and applies the shared server step (FedAvg, FedAvgM).

Its ``evaluate_fn`` evaluates on the server and records the round through the shared recorder.
"""

from __future__ import annotations

import time

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from ...aggregate import accumulate, aggregation_weights
from ...recorder import RoundStats
from .client_app import config_json
from .records import from_record, to_record


class SeededFedAvg(FedAvg):
    """FedAvg over the nodes that hold the run's partitions, reproducible round for round.

    Parameters
    ----------
    rounds : fedsim.engines.inprocess.fedavg.FedAvgRounds
        The server's side of the run: the global model, the sampling, the server optimizer.
    names : list of str
        The names of the global tensors (`records.state_names`).
    nodes : dict
        The Flower node id serving each partition id.
    recorder : fedsim.recorder.Recorder
        Started; the run goes on from its ``progress.round``.
    evaluate : callable
        Returns the global model's test metrics.
    stop_requested : threading.Event, optional
        When set, the next round does not start: the run stops as after Ctrl-C (`RunInterrupted`).
    """

    def __init__(self, rounds, names: list[str], nodes: dict[int, int], recorder, evaluate, stop_requested=None):
        super().__init__(fraction_train=rounds.config.fraction, fraction_evaluate=0.0, min_available_nodes=0,
                         min_train_nodes=0)
        self.rounds, self.names, self.nodes = rounds, names, nodes
        self.recorder, self.evaluate, self.stop_requested = recorder, evaluate, stop_requested
        self.first_round = recorder.progress.round
        self.lost: dict[int, list[int]] = {}  # round -> the partitions whose client did not reply
        self._sampled: list[int] = []  # the round's clients, and those of them whose node was online
        self._sent: list[int] = []
        self._stats = RoundStats()
        self._started = 0.0

    def round_index(self, server_round: int) -> int:
        """Return fedsim's 0-based index of Flower's 1-based ``server_round`` (a resumed run starts later)."""
        return self.first_round + server_round - 1

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """Send the global model to the clients fedsim's seeded sampler picks for this round."""
        if self.stop_requested is not None and self.stop_requested.is_set():
            raise KeyboardInterrupt  # the recorder turns it into RunInterrupted, naming what is saved
        self._started = time.perf_counter()
        round_index = self.round_index(server_round)
        self.recorder.schedule_round(round_index)
        self._sampled = self.rounds.sampled_clients(round_index)
        online = set(grid.get_node_ids())  # a SuperNode the SuperLink has marked offline gets nothing
        self._sent = [client for client in self._sampled if self.nodes[client] in online]
        config["server-round"] = server_round
        config["fedsim-round"] = round_index
        config["fedsim-config"] = config_json(self.rounds.config)
        content = RecordDict({"arrays": to_record(self.names, self.rounds.global_state), "config": config})
        return [Message(content=content, message_type=MessageType.TRAIN, dst_node_id=self.nodes[client])
                for client in self._sent]

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Weigh the trained models in partition-id order and apply the server step; note the clients lost."""
        valid, _ = self._check_and_log_replies(list(replies), is_train=True)
        by_client = {int(reply.content["metrics"]["partition-id"]): reply for reply in valid}
        clients = [client for client in self._sent if client in by_client]
        lost = [client for client in self._sampled if client not in by_client]
        if lost:
            self.lost[self.round_index(server_round)] = lost
        stats = self._stats = RoundStats(clients=len(clients))
        if not clients:  # no client came back: the model stays
            return None, None
        rounds = self.rounds
        weights = aggregation_weights(rounds.config.weights, rounds.sizes, clients)
        mean_state = [torch.zeros_like(tensor) for tensor in rounds.global_state]
        for client, weight in zip(clients, weights):
            content = by_client[client].content
            accumulate(mean_state, from_record(content["arrays"], self.names, rounds.global_state), float(weight))
            counts = content["metrics"]
            stats.add_client(int(counts["samples"]), float(counts["loss-sum"]), int(counts["steps"]))
        rounds.step_server(mean_state, stats, len(clients))
        stats.bytes_down = len(self._sent) * rounds.state_bytes  # a lost client was sent the model too
        return to_record(self.names, rounds.global_state), MetricRecord({"train-loss": stats.train_loss})

    def record_round(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Flower's ``evaluate_fn``: evaluate on the server when due and record the round (not round 0)."""
        if server_round == 0:
            return None
        round_index = self.round_index(server_round)
        metrics, eval_s = None, 0.0
        if self.recorder.evaluation_due(round_index):
            started = time.perf_counter()
            metrics = self.evaluate()
            eval_s = time.perf_counter() - started
        self.recorder.record_round(self._stats, metrics, wall_s=time.perf_counter() - self._started, eval_s=eval_s,
                                   global_state=self.rounds.global_state, engine_state=self.rounds.state_dict)
        if metrics is None:
            return None
        return MetricRecord({name: float(value) for name, value in metrics.items() if isinstance(value, (int, float))})
