"""`MethodStrategy`: any fedsim method as a Flower strategy in a user's own ``ServerApp``."""

from __future__ import annotations

import logging

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from ..algorithms import declared
from ..client.update import set_state, state_tensors
from ..engines.flower.records import extra_tensors, from_record, state_names, to_record
from ..rounds.server_side import RoundServer
from ..support import check_runs_on
from .messages import (BROADCAST_RECORD, METHOD_ENTRY, PARTITION_METRIC, STEPS_METRIC, method_config, method_name,
                       settings_entry)

#: Flower's logger, where its own strategies write.
FLOWER_LOGGER = logging.getLogger("flwr")


class MethodStrategy(FedAvg):
    """A fedsim method (SCAFFOLD, FedNova, FedProx, FedOpt's servers, or your own `fedsim.Algorithm`) as a Flower
    strategy: Flower's ``FedAvg`` whose aggregation is fedsim's round.

    Use it where a ``ServerApp`` uses Flower's ``FedAvg``, with ``Strategy.start``; the
    ``ClientApp`` wraps its training with `fedsim.flower.ClientMethod`. Each round it sends the
    global model (``"arrays"``, the model's ``state_dict``), the method's settings and, where the
    method has one, its broadcast state (SCAFFOLD's server control variate); it orders the
    replies by their ``partition-id`` (the node's node config; else by node id), so that the sum
    does not depend on the order they arrived in, weighs each by the method's rule over
    ``num-examples`` and the steps it took (``num-steps``), adds the method's reply tensors to
    its sums and applies the method's server hooks and the server optimizer.

    Parameters
    ----------
    method : str or type
        A fedsim strategy of local training (``"fedavg"``, ``"scaffold"``, ``"fednova"``), a
        reference (``"path/to/file.py:Name"``, ``"package.module:Name"``) or a subclass of
        `fedsim.Algorithm` defined at the top level of a module the ClientApp imports too.
    model : torch.nn.Module
        A model of the architecture the clients train, in the dtype the server computes in: its
        parameters and floating-point buffers are the global model, its integer buffers travel
        unchanged. Its values are replaced by the ``initial_arrays`` of ``start``.
    fraction_train, fraction_evaluate, min_train_nodes, min_evaluate_nodes, min_available_nodes, weighted_by_key, \
arrayrecord_key, configrecord_key, train_metrics_aggr_fn, evaluate_metrics_aggr_fn
        As Flower's ``FedAvg``'s; the nodes of a round are sampled as ``FedAvg`` samples them.
    num_clients : int, optional
        The federation's clients, over which SCAFFOLD's and FedDyn's server states average
        (their ``N``). Default: the nodes connected when the first round starts.
    **settings
        The method's and the server's `fedsim.RunConfig` settings (`fedsim.flower.messages.METHOD_SETTINGS`):
        ``weights`` (``"size"``, by ``num-examples``; ``"equal"``), ``mu`` (FedProx),
        ``momentum`` (the clients' SGD momentum, which FedNova's normalization reads;
        `ClientMethod` refuses an optimizer with another), ``algorithm_options``,
        ``server_lr``, ``server_momentum``, ``server_optimizer`` and its ``server_beta1``,
        ``server_beta2``, ``server_tau``. The clients' own training (learning rate, batches,
        epochs) is the ClientApp's; the method reads the learning rate from the client's optimizer.

    Examples
    --------
    In a ``ServerApp``'s main, in place of Flower's ``FedAvg``::

        strategy = MethodStrategy("scaffold", Net(), fraction_train=0.5)
        result = strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()), num_rounds=3,
                                train_config=ConfigRecord({"lr": 0.05}))
    """

    def __init__(self, method, model: torch.nn.Module, *, fraction_train: float = 1.0,
                 fraction_evaluate: float = 1.0, min_train_nodes: int = 2, min_evaluate_nodes: int = 2,
                 min_available_nodes: int = 2, weighted_by_key: str = "num-examples", arrayrecord_key: str = "arrays",
                 configrecord_key: str = "config", train_metrics_aggr_fn=None, evaluate_metrics_aggr_fn=None,
                 num_clients: int | None = None, **settings):
        super().__init__(fraction_train=fraction_train, fraction_evaluate=fraction_evaluate,
                         min_train_nodes=min_train_nodes, min_evaluate_nodes=min_evaluate_nodes,
                         min_available_nodes=min_available_nodes, weighted_by_key=weighted_by_key,
                         arrayrecord_key=arrayrecord_key, configrecord_key=configrecord_key,
                         train_metrics_aggr_fn=train_metrics_aggr_fn, evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"MethodStrategy's model must be a torch.nn.Module (the clients' architecture), got "
                            f"{type(model).__name__}")
        self.method, self.model, self.num_clients, self.settings = method_name(method), model, num_clients, settings
        # a wrong setting, or a method that cannot run around a ClientApp's loop, fails here, not in round 1
        check_runs_on(method_config(self.method, num_clients or 1, settings), "flower-app")
        self.names = state_names(model)
        self.server: RoundServer | None = None  # built in the first round, when the clients are known

    def summary(self) -> None:
        """Log the method and its settings, then Flower's ``FedAvg`` summary."""
        FLOWER_LOGGER.info("\t├──> fedsim method: %s %s", self.method, self.settings or "")
        super().summary()

    def round_server(self, grid: Grid) -> RoundServer:
        """Return the round's server, built the first time from the clients connected (`num_clients`)."""
        if self.server is None:
            num_clients = self.num_clients or len(list(grid.get_node_ids()))
            self.server = RoundServer(method_config(self.method, num_clients, self.settings), self.model, {})
            self.server.holds_client_states = False  # each node keeps its client's, in its Context.state
        return self.server

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """Sample the round's nodes as Flower's ``FedAvg`` does; send them the model, the method and its broadcast."""
        messages = list(super().configure_train(server_round, arrays, config, grid))
        server = self.round_server(grid)
        self.model.load_state_dict(arrays.to_torch_state_dict())  # the model Flower's `start` holds
        with torch.no_grad():
            torch._foreach_copy_(server.global_state, state_tensors(self.model))
        config[METHOD_ENTRY] = settings_entry(server.config)  # the messages hold this config record
        if broadcast := declared.broadcast(server.algorithm):
            record = to_record([], [], broadcast)
            for message in messages:
                message.content[BROADCAST_RECORD] = record
        return messages

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Combine the replies by the method's round, in partition order; return the new global model and metrics."""
        valid, _ = self._check_and_log_replies(replies, is_train=True)
        if not valid:
            return None, None
        contents = [reply.content for reply in sorted(valid, key=self.reply_order)]
        server = self.server
        clients = self.clients_of(contents)
        server.sizes = {client: self.metric(content, self.weighted_by_key)
                        for client, content in zip(clients, contents)}
        assignments, weighted_sum, stats = server.open_round(clients)
        for (client, weight), content in zip(assignments, contents):
            record = content[self.arrayrecord_key]
            server.hand_in(weighted_sum, stats, client, float(weight),
                           from_record(record, self.names, server.global_state),
                           steps=int(self.metric(content, STEPS_METRIC)), samples=int(server.sizes[client]),
                           loss_sum=0.0, reply=extra_tensors(record))
        server.step_server(weighted_sum)
        set_state(self.model, server.global_state)
        return ArrayRecord(self.model.state_dict()), self.train_metrics_aggr_fn(contents, self.weighted_by_key)

    @classmethod
    def reply_order(cls, reply: Message) -> tuple:
        """The order replies are added in: by ``partition-id``, else by the sending node's id."""
        partition = cls.found_metric(reply.content, PARTITION_METRIC)
        return (0, partition) if partition is not None else (1, reply.metadata.src_node_id)

    @classmethod
    def clients_of(cls, contents) -> list[int]:
        """Return the client each reply is from: their ``partition-id`` s where all have one, else their places."""
        partitions = [cls.found_metric(content, PARTITION_METRIC) for content in contents]
        if None in partitions:
            return list(range(len(contents)))
        partitions = [int(partition) for partition in partitions]
        if len(set(partitions)) < len(partitions):
            raise ValueError(f"two replies of a round come from one partition-id ({sorted(partitions)}): give each "
                             "node its own partition-id in its node config")
        return partitions

    @staticmethod
    def found_metric(content, name: str):
        """Return metric ``name`` of a reply (in its one MetricRecord), ``None`` where it has none."""
        return next((record[name] for record in content.metric_records.values() if name in record), None)

    @classmethod
    def metric(cls, content, name: str) -> float:
        """Return metric ``name`` of a reply, or say that its ClientApp does not reply through `ClientMethod`."""
        if (value := cls.found_metric(content, name)) is None:
            raise ValueError(f"a reply lacks the metric {name!r}: its ClientApp must reply with "
                             "fedsim.flower.ClientMethod.reply, which adds num-steps, and give num-examples")
        return value
