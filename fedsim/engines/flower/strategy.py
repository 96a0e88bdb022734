"""fedsim's strategies as Flower strategies: seeded clients, replies in partition order, the shared server step.

Each is Flower's ``FedAvg`` with its template methods filled in by fedsim's core, so Flower's
own ``Strategy.start`` drives it:

- ``configure_train`` sends the global model to the clients of the round, which fedsim's
  schedule picks (FedAvg's clients are seeded by (seed, round); Flower's own sampling is
  ``random.sample``, unseeded);
- ``aggregate_train`` adds the replies up in partition-id order (not arrival order, so the sum
  is the same every run), weighted by the shared rule (`fedsim.aggregate.aggregation_weights`)
  over the clients that replied, and applies the shared server step;
- its ``evaluate_fn`` evaluates on the server and records the round through the shared recorder.

`SeededFedAvg` runs fedavg, a Flower round per fedsim round. `GradientSteps`
(`fedsim.engines.flower.gradient_steps`) runs allreduce (as FedSGD) and reweighted, a Flower
round per gradient step.
"""

from __future__ import annotations

import logging
import time

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from ...algorithms import declared
from ...results.client_eval import evaluate_round
from ...results.progress import RoundStats
from .client_app import CLIENT_ENTRY, config_json
from .records import extra_tensors, from_record, to_record


#: Flower's logger, where its own strategies log the replies that carry an error.
FLOWER_LOGGER = logging.getLogger("flwr")


def answered(replies) -> list[Message]:
    """Return the replies that carry content; log each that carries an error instead, with its node, as Flower does."""
    valid = []
    for reply in replies:
        if reply.has_error():
            FLOWER_LOGGER.info("\t> Received error in reply from node %d: %s", reply.metadata.src_node_id,
                               reply.error.reason)
        else:
            valid.append(reply)
    return valid


class FedsimStrategy(FedAvg):
    """What fedsim's Flower strategies share: the nodes of the partitions, lost clients, recording a round.

    Parameters
    ----------
    rounds : FedAvgRounds or GradientRounds
        The server's side of the run (`fedsim.engines.inprocess`): the global model, the
        schedule, the server optimizer.
    names : list of str
        The names of the global tensors (`records.state_names`).
    nodes : dict
        The Flower node id serving each partition id.
    recorder : fedsim.results.recorder.Recorder
        Started; the run goes on from its ``progress.round``.
    evaluation : fedsim.results.client_eval.Evaluation
        Evaluates the global model on the server.
    """

    def __init__(self, rounds, names: list[str], nodes: dict[int, int], recorder, evaluation):
        super().__init__(fraction_train=rounds.config.fraction, fraction_evaluate=0.0, min_available_nodes=0,
                         min_train_nodes=0)
        self.rounds, self.names, self.nodes = rounds, names, nodes
        self.recorder, self.evaluation = recorder, evaluation
        self.lost: dict[int, list[int]] = {}  # fedsim round -> the partitions whose client did not reply
        self._sent: list[int] = []  # the clients sent this Flower round's message (their node was online)
        self._stats = RoundStats()
        self._started = 0.0
        # whether each message names the client its node trains (simulated nodes, `assign_partitions`), rather than
        # the node training the partition of its own node config
        self.names_clients = False

    @property
    def num_rounds(self) -> int:
        """The number of Flower rounds that run the recorder's pending rounds."""
        raise NotImplementedError

    def evaluate_fn(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Flower's ``evaluate_fn``, called before the first Flower round (0) and after each: record what ended."""
        raise NotImplementedError

    def begin_round(self, round_index: int) -> None:
        """Start fedsim round ``round_index``: put its samples on the grid, reset the counts."""
        self._started = time.perf_counter()
        self.recorder.schedule_round(round_index)
        self._stats = RoundStats()

    def messages(self, clients: list[int], content: RecordDict, grid: Grid) -> list[Message]:
        """Return one train message with ``content`` for each of ``clients`` whose node is online."""
        online = set(grid.get_node_ids())  # a SuperNode the SuperLink has marked offline gets nothing
        self._sent = [client for client in clients if self.nodes[client] in online]
        return [Message(content=self.content_for(client, content), message_type=MessageType.TRAIN,
                        dst_node_id=self.nodes[client]) for client in self._sent]

    def content_for(self, client: int, content: RecordDict) -> RecordDict:
        """Return ``content`` for ``client``'s node: naming the client where the nodes are assigned (`names_clients`);
        the model's record is shared, not copied."""
        if not self.names_clients:
            return content
        config = ConfigRecord({**content["config"], CLIENT_ENTRY: client})
        return RecordDict({**content, "config": config})

    def replies_in_order(self, replies, round_index: int, expected: list[int]) -> tuple[list[int], dict]:
        """Return the clients that replied, in partition-id order, and their replies' contents.

        The ``expected`` clients that did not reply (a lost SuperNode, a handler that raised)
        are noted as lost in fedsim round ``round_index``.
        """
        by_client = {int(reply.content["metrics"]["partition-id"]): reply.content for reply in answered(replies)}
        lost = [client for client in expected if client not in by_client]
        if lost:  # a client lost at several steps of a round is named once
            self.lost[round_index] = sorted(set(self.lost.get(round_index, [])) | set(lost))
        return [client for client in expected if client in by_client], by_client

    def record(self, round_index: int, stats: RoundStats) -> MetricRecord | None:
        """Evaluate on the server when due and record fedsim round ``round_index``; return the test metrics."""
        metrics, clients, eval_s = evaluate_round(self.recorder, round_index, self.evaluation)
        self.recorder.record_round(stats, metrics, wall_s=time.perf_counter() - self._started, eval_s=eval_s,
                                   global_state=self.rounds.global_state, engine_state=self.rounds.state_dict,
                                   clients=clients)
        if metrics is None:
            return None
        return MetricRecord({name: float(value) for name, value in metrics.items() if isinstance(value, (int, float))})


class SeededFedAvg(FedsimStrategy):
    """FedAvg over the nodes that hold the run's partitions, reproducible round for round.

    Takes the parameters of `FedsimStrategy`, with ``rounds`` a
    `fedsim.rounds.fedavg.FedAvgRounds`.
    """

    def __init__(self, rounds, names, nodes, recorder, evaluation):
        super().__init__(rounds, names, nodes, recorder, evaluation)
        self.first_round = recorder.progress.round
        self._sampled: list[int] = []

    @property
    def num_rounds(self) -> int:
        """One Flower round per pending fedsim round."""
        return len(self.recorder.pending_rounds())

    def round_index(self, server_round: int) -> int:
        """Return fedsim's 0-based index of Flower's 1-based ``server_round`` (a resumed run starts later)."""
        return self.first_round + server_round - 1

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """Send the global model to the clients fedsim's seeded sampler picks for this round."""
        round_index = self.round_index(server_round)
        self.begin_round(round_index)
        self._sampled = self.rounds.sampled_clients(round_index)
        config["server-round"] = server_round
        config["fedsim-round"] = round_index
        config["fedsim-config"] = config_json(self.rounds.config)
        arrays = to_record(self.names, self.rounds.global_state, declared.broadcast(self.rounds.algorithm))
        content = RecordDict({"arrays": arrays, "config": config})
        return self.messages(self._sampled, content, grid)

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Weigh the trained models in partition-id order and apply the server step; note the clients lost."""
        round_index, rounds = self.round_index(server_round), self.rounds
        clients, by_client = self.replies_in_order(replies, round_index, self._sampled)
        assignments, weighted_sum, stats = rounds.open_round(clients)
        for client, weight in assignments:
            content = by_client[client]
            counts = content["metrics"]
            # the node ran the method's client hook; what it sends back besides the model is its reply
            rounds.hand_in(weighted_sum, stats, client, float(weight),
                           from_record(content["arrays"], self.names, rounds.global_state), steps=int(counts["steps"]),
                           samples=int(counts["samples"]), loss_sum=float(counts["loss-sum"]),
                           reply=extra_tensors(content["arrays"]))
        self._stats = rounds.close_round(round_index, weighted_sum, stats, sent=len(self._sent))
        if not clients and rounds.privacy is None:  # no client came back: the model stays (DP still released noise)
            return None, None
        return to_record(self.names, rounds.global_state), MetricRecord({"train-loss": stats.train_loss})

    def evaluate_fn(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Flower's ``evaluate_fn``: evaluate on the server when due and record the round (not round 0)."""
        if server_round == 0:
            return None
        return self.record(self.round_index(server_round), self._stats)
