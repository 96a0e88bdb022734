"""The Flower ``ServerApp``: map the partitions to nodes, run the strategy, write the results folder.

The server builds the run from its config as every engine does (data, partition, seeded model),
evaluates on the test split itself, and writes the folder of `fedsim run` through the shared
recorder, checkpoints and resume included.
"""

from __future__ import annotations

import time

from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

from ...user_code import UserCodeError
from ...results.outcome import record_user_code_error
from ...config.run_config import RunConfig
from ...support import check_runs_on
from ...rounds.fedavg import FedAvgRounds
from ...rounds.result import EngineRun
from .client_app import config_json
from .records import from_run_config, grid_from_entry, state_names, to_record
from .gradient_steps import GradientSteps
from .strategy import SeededFedAvg

#: Seconds the server waits for every partition's node to connect, and for one round's replies.
DEFAULT_TIMEOUT_S = 600.0


class FederatedServer:
    """The server side of a run submitted with ``flwr run``; `app` is its ``ServerApp``.

    The run's settings and the app's own options (`fedsim.engines.flower.records.APP_ENTRIES`:
    the results folder, resume, the timeout, the samples grid) come from Flower's run config.
    """

    def __init__(self):
        self.app = ServerApp()
        self.app.main()(self.main)

    def main(self, grid: Grid, context: Context) -> None:
        """Run the rounds still to run and write the results folder with the summary."""
        config, options = from_run_config(context.run_config)
        out, resume, timeout_s = options["out"] or None, options["resume"], options["timeout"]
        check_flower_config(config, resume=resume)
        engine_run = EngineRun.build(config, out, resume=resume)
        rounds = engine_run.rounds
        if isinstance(rounds, FedAvgRounds):
            rounds.holds_client_states = False  # each node keeps its client's
        simulated = options["simulated"]
        nodes = (assign_partitions if simulated else find_partitions)(grid, config, timeout_s)
        recorder = engine_run.start(grid=grid_from_entry(options["grid"]))
        names = state_names(engine_run.setup.model)
        strategy_class = SeededFedAvg if isinstance(rounds, FedAvgRounds) else GradientSteps
        strategy = strategy_class(rounds, names, nodes, recorder, engine_run.evaluation)
        strategy.names_clients = simulated  # each message says which client its node trains
        try:
            strategy.start(grid, to_record(names, rounds.global_state), num_rounds=strategy.num_rounds,
                           timeout=timeout_s, evaluate_fn=strategy.evaluate_fn)
        except UserCodeError as error:  # the launcher, in another process, reads it back and ends with it
            if out is not None:
                record_user_code_error(out, config, recorder.summary(), error)
            raise
        # which sampled clients did not reply, by round (1-based, as the rows count): a lost SuperNode
        # or a client that raised; the round went on with the others
        lost = {str(round_index + 1): clients for round_index, clients in strategy.lost.items()}
        recorder.finish(rounds.global_state, extra={**rounds.run_notes(), "lost_clients": lost})


def check_flower_config(config: RunConfig, *, resume: bool = False, deployment: bool = False) -> None:
    """Refuse what the Flower engine does not run, naming the setting and where it runs.

    The rules are `fedsim.support`'s Flower columns (``deployment`` picks the deployment's).
    """
    check_runs_on(config, "flower-deployment" if deployment else "flower-simulation", resume=resume)


def assign_partitions(grid: Grid, config: RunConfig, timeout_s: float) -> dict[int, int]:
    """Return a node id for each partition id of a simulation: partition k to the k-th smallest node id.

    Flower's simulated SuperNodes are alike (each builds the run from its config, so it can train
    any client), and each message names the client its node trains. Asking each node for its
    node config's partition instead (`find_partitions`) costs a round trip to every node before
    the first round: about 4 s for 1,000 nodes here. A client keeps its state on the one node it
    is assigned to for the whole run.

    Raises
    ------
    RuntimeError
        When fewer nodes than partitions are connected within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while len(node_ids := sorted(grid.get_node_ids())) < config.num_partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"after {timeout_s:g} s only {len(node_ids)} simulated SuperNodes are connected for "
                               f"{config.num_partitions} partitions")
        time.sleep(0.5)
    return dict(enumerate(node_ids[: config.num_partitions]))


def find_partitions(grid: Grid, config: RunConfig, timeout_s: float) -> dict[int, int]:
    """Wait until every partition has a node; return the node id serving each partition id.

    Each node is asked for its ``partition-id`` (the ClientApp's ``query`` handler checks it).

    Raises
    ------
    RuntimeError
        When the nodes do not cover 0..K-1 within ``timeout_s``, or a node's answer is an error
        (a partition id out of range), or two nodes claim one partition.
    """
    num_partitions = config.num_partitions
    question = RecordDict({"config": ConfigRecord({"fedsim-config": config_json(config)})})
    deadline = time.monotonic() + timeout_s
    nodes: dict[int, int] = {}
    asked: set[int] = set()
    while len(nodes) < num_partitions:
        new = [node for node in grid.get_node_ids() if node not in asked]
        if new:
            asked.update(new)
            questions = [Message(question, dst_node_id=node, message_type=MessageType.QUERY) for node in new]
            for reply in grid.send_and_receive(questions, timeout=max(1.0, deadline - time.monotonic())):
                node = reply.metadata.src_node_id
                if reply.has_error():
                    raise RuntimeError(f"SuperNode {node} cannot serve this run: {reply.error.reason}")
                partition = int(reply.content["node"]["partition-id"])
                if partition in nodes:
                    raise RuntimeError(f"SuperNodes {nodes[partition]} and {node} both claim "
                                       f"`partition-id`={partition}")
                nodes[partition] = node
        if time.monotonic() > deadline:
            missing = sorted(set(range(num_partitions)) - set(nodes))
            raise RuntimeError(f"after {timeout_s:g} s no SuperNode serves partition(s) {missing[:10]} of "
                               f"{num_partitions}; start one per partition id")
        if len(nodes) < num_partitions:
            time.sleep(0.5)
    return nodes
