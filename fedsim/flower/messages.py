"""What `MethodStrategy` and `ClientMethod` add to Flower's messages, and the method's settings they carry.

A train message is Flower's ``FedAvg``'s (the model's ``ArrayRecord`` under ``"arrays"``, a
``ConfigRecord`` under ``"config"``) with the method's settings in the config (``fedsim.method``,
JSON) and, for a method whose server broadcasts a state (SCAFFOLD's ``c``), that state in an
``ArrayRecord`` of its own (``fedsim.broadcast``), so that the model's record stays the model's
``state_dict`` for the user's ``load_state_dict``. A reply is what Flower's ``FedAvg`` reads:
one ``ArrayRecord`` (the trained ``state_dict``, and the method's reply tensors under the keys
``fedsim-extra.0``, ``fedsim-extra.1``, ...) and one ``MetricRecord`` with ``num-examples``,
the optimizer steps the client took (``num-steps``) and its ``partition-id`` where its node has one.
"""

from __future__ import annotations

import json

from ..config.run_config import RunConfig

#: The config entry of a train message that holds the method's settings (JSON).
METHOD_ENTRY = "fedsim.method"
#: The content key of a train message's broadcast state.
BROADCAST_RECORD = "fedsim.broadcast"
#: The reply metrics fedsim reads besides the weight's (``num-examples``).
STEPS_METRIC, PARTITION_METRIC = "num-steps", "partition-id"

#: The run settings (`fedsim.config.RunConfig` fields) a `MethodStrategy` takes: the method's own and the
#: server's. The clients' training (lr, batch size, epochs, data) is the user's ClientApp's.
METHOD_SETTINGS = ("weights", "mu", "momentum", "algorithm_options", "server_lr", "server_momentum",
                   "server_optimizer", "server_beta1", "server_beta2", "server_tau", "seed")


def method_name(method) -> str:
    """Return the strategy name of ``method``: a fedsim strategy's name or reference, or a class's module reference.

    A class travels to the nodes by reference (``package.module:Name``), so it must be defined at
    the top level of a module that the ClientApp can import.
    """
    if isinstance(method, str):
        return method
    if not isinstance(method, type):
        raise TypeError(f"`method` must be a fedsim strategy's name, a reference or an Algorithm class, got "
                        f"{type(method).__name__}")
    module = method.__module__
    if module == "__main__" or "<locals>" in method.__qualname__:
        raise ValueError(f"`method`={method.__qualname__} must be defined at the top level of an importable module "
                         "(not __main__ or a function): the nodes import it by its module's name")
    return f"{module}:{method.__qualname__}"


def method_config(method: str, num_clients: int, settings: dict, **client) -> RunConfig:
    """Return the `RunConfig` of ``method`` with the strategy's ``settings`` over ``num_clients``.

    ``client`` gives what the client's side reads from its own training (its optimizer's ``lr``).
    """
    unknown = sorted(set(settings) - set(METHOD_SETTINGS))
    if unknown:
        raise TypeError(f"MethodStrategy takes the method's and the server's settings ({', '.join(METHOD_SETTINGS)}), "
                        f"not {', '.join(unknown)}: your ClientApp's training sets the rest")
    return RunConfig(strategy=method, num_partitions=num_clients, **settings, **client)


def settings_entry(config: RunConfig) -> str:
    """Return the ``fedsim.method`` entry of ``config``: its strategy, clients and `METHOD_SETTINGS`, as JSON."""
    fields = {"strategy": config.strategy, "num_partitions": config.num_partitions,
              **{name: getattr(config, name) for name in METHOD_SETTINGS}}
    return json.dumps(fields, sort_keys=True)


def from_settings_entry(entry: str, **client) -> RunConfig:
    """Return the `RunConfig` a ``fedsim.method`` entry describes, with the client's own ``client`` settings."""
    return RunConfig(**json.loads(entry), **client)
