"""The Flower ``ClientApp``: each SuperNode trains the partition its node config names with the shared client core.

A node's ``node_config`` gives ``partition-id`` and ``num-partitions`` (Flower's simulation
engine sets them for node i of N; a SuperNode takes ``--node-config``). The node builds the
run's data, partition and seeded model once per process from the run's config, which every
message carries (they are functions of it), then trains the client ``partition-id`` from
each round's global model, seeded by (seed, round, partition-id) as in every engine; under
allreduce and reweighted it computes the gradient of its batch at one global step instead, as
the rank ``partition-id`` of the other engines computes it.
"""

from __future__ import annotations

import functools
import json

import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from ...algorithms import declared
from ...build import RunSetup
from ...checks import SettingError
from ...client.update import evaluate, state_tensors
from ...config.run_config import RunConfig
from ...rounds.result import build_rounds
from .records import buffer_names, extra_tensors, from_record, gradient_names, state_names, to_record

#: The key of a client's own state in its node's ``Context.state``.
CLIENT_STATE = "fedsim-client-state"
#: The config entry of a train message that names the client its node trains (simulated nodes, which the
#: server assigns); without it the node trains the partition of its own node config.
CLIENT_ENTRY = "fedsim-client"


class ClientWorker:
    """One node's copy of the run: the data, the partition and the model its client trains.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    """

    def __init__(self, config: RunConfig):
        setup = RunSetup.build(config)
        self.config = config
        self.rounds = build_rounds(config, setup)
        self.names = state_names(setup.model)
        self.gradient_names, self.buffer_names = gradient_names(setup.model), buffer_names(setup.model)
        self.trained = state_tensors(setup.model)

    def partition_id(self, node_config) -> int:
        """Return the node's ``partition-id``, checked against the run's partitions."""
        count = self.config.num_partitions
        if "partition-id" not in node_config:
            raise ValueError("this SuperNode has no `partition-id` in its node config; start it with "
                             f"--node-config \"partition-id=K num-partitions={count}\", K in 0..{count - 1}")
        partition_id = node_config["partition-id"]
        if not isinstance(partition_id, int) or not 0 <= partition_id < count:
            raise ValueError(f"`partition-id`={partition_id!r} is outside the run's partitions 0..{count - 1}")
        declared = node_config.get("num-partitions", count)
        if declared != count:
            raise SettingError("the node config says `num-partitions`={declared:text} but the run has "
                               "{num_partitions}", declared=repr(declared), num_partitions=count)
        return partition_id

    def train(self, client: int, round_index: int, content: RecordDict, node_state: RecordDict) -> tuple[dict, dict]:
        """Train ``client`` from the global model in ``content``; return its records and its counts.

        ``node_state`` is the node's own state across rounds (Flower's ``Context.state``), where
        the client keeps what its algorithm needs from round to round (SCAFFOLD's control
        variate, MOON's previous model); the algorithm's share of the round's sums goes back
        with the model.
        """
        rounds, algorithm = self.rounds, self.rounds.algorithm
        with torch.no_grad():
            torch._foreach_copy_(rounds.global_state, from_record(content["arrays"], self.names, rounds.global_state))
        begin_client(algorithm, client, extra_tensors(content["arrays"]), node_state)
        update = rounds.train_client(client, round_index)
        reply = end_client(algorithm, client, rounds.global_state, self.trained, update.num_steps, node_state)
        records = {"arrays": to_record(self.names, self.trained, reply)}
        counts = {"num-examples": len(rounds.partition.shard(client)), "partition-id": client,
                  "samples": update.samples_processed, "loss-sum": float(update.loss_sum), "steps": update.num_steps}
        return records, counts

    def evaluate(self, client: int, global_record) -> dict:
        """Return the metrics of the global model in ``global_record`` on ``client``'s own training shard."""
        rounds = self.rounds
        state = from_record(global_record, self.names, rounds.global_state)
        metrics = evaluate(rounds.model, state, rounds.data, task=rounds.task, split="train",
                           indices=rounds.partition.shard(client))
        numbers = {name: float(value) for name, value in metrics.items() if isinstance(value, (int, float))}
        return {**numbers, "num-examples": int(metrics["num_examples"]), "partition-id": client}

    def gradient(self, client: int, step: int, global_record) -> tuple[RecordDict, dict]:
        """Compute ``client``'s gradient at global ``step`` (allreduce, reweighted) from the model in ``global_record``.

        The record holds the parameters and the BatchNorm statistics the step starts from. The
        gradient is of the batch's mean loss, unweighted: the server weighs it. Returns the
        gradient and the updated statistics, by name in one record, and the client's counts.
        """
        rounds = self.rounds
        with torch.no_grad():
            torch._foreach_copy_(rounds.global_state, from_record(global_record, self.names, rounds.global_state))
        result = rounds.client_gradient(client, step)
        # one record, as Flower's strategies expect one per reply: the names of parameters and buffers differ
        records = {"arrays": to_record([*self.gradient_names, *self.buffer_names],
                                       [*(param.grad for param in rounds.params), *rounds.buffers])}
        counts = {"num-examples": int(result.samples), "partition-id": client, "samples": int(result.samples),
                  "loss-sum": float(result.loss_sum), "mean-loss": float(result.weighted_mean_loss)}
        return records, counts


def begin_client(algorithm, client: int, broadcast: list[torch.Tensor], node_state: RecordDict) -> None:
    """On a node, before ``client`` trains: take the server's ``broadcast`` and the state the client kept in its
    node's ``Context.state`` (``node_state``), and zero the round's sums."""
    declared.receive_broadcast(algorithm, broadcast)
    kept = node_state.get(CLIENT_STATE)
    declared.set_client_state(algorithm, client, None if kept is None else extra_tensors(kept))
    declared.begin_round(algorithm)


@torch.no_grad()
def end_client(algorithm, client: int, global_state: list[torch.Tensor], trained: list[torch.Tensor], steps: int,
               node_state: RecordDict) -> list[torch.Tensor]:
    """On a node, after ``client`` trained: run the method's `after_client`, keep the client's state in
    ``node_state`` for its next round; return the method's reply (its share of the round's sums)."""
    algorithm.after_client(client, global_state, trained, steps)
    if (state := declared.client_state(algorithm, client)) is not None:
        node_state[CLIENT_STATE] = to_record([], [], state)
    return declared.reply(algorithm)


@functools.lru_cache(maxsize=2)
def _worker(config_json: str) -> ClientWorker:
    """Return this process's worker for a run, built once (a node serves many rounds of one run)."""
    return ClientWorker(RunConfig(**json.loads(config_json)))


def client_app() -> ClientApp:
    """Return the ``ClientApp``: it serves any run, whose config each message carries (``fedsim-config``).

    Handlers: ``query`` answers the node's partition (the server maps nodes to partitions with
    it before the first round); ``train`` trains that partition's client; ``evaluate`` returns
    the global model's metrics on that client's own training shard (``num-examples``, ``loss``,
    ``accuracy``), for a strategy that evaluates on the clients, as Flower's ``FedAvg`` does
    with ``fraction_evaluate`` > 0 (fedsim's strategies evaluate on the server's test split). The server sending
    the config keeps the two sides from disagreeing about the run.
    """
    app = ClientApp()

    def worker(message: Message) -> ClientWorker:
        return _worker(message.content["config"]["fedsim-config"])

    @app.query()
    def query(message: Message, context: Context) -> Message:
        partition_id = worker(message).partition_id(context.node_config)
        return Message(RecordDict({"node": ConfigRecord({"partition-id": partition_id})}), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        work = worker(message)
        config = message.content["config"]
        client = int(config[CLIENT_ENTRY]) if CLIENT_ENTRY in config else work.partition_id(context.node_config)
        if "fedsim-step" in config:  # allreduce, reweighted: one gradient step
            records, counts = work.gradient(client, int(config["fedsim-step"]), message.content["arrays"])
        else:  # fedavg and the algorithms on its round: a round of local training
            records, counts = work.train(client, int(config["fedsim-round"]), message.content, context.state)
        return Message(RecordDict({**records, "metrics": MetricRecord(counts)}), reply_to=message)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        work = worker(message)
        metrics = work.evaluate(work.partition_id(context.node_config), message.content["arrays"])
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=message)

    return app


def config_json(config: RunConfig) -> str:
    """Return ``config`` as the ``fedsim-config`` text the messages carry."""
    return json.dumps(config.to_dict(), sort_keys=True)
