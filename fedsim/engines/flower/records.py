"""What travels between the Flower server and its clients: named model tensors and the run's config.

Models travel as ``ArrayRecord`` s (NumPy's format without pickle; every dtype, float64 included,
arrives bit for bit). The run's config travels as Flower run-config entries, one per
`fedsim.config.RunConfig` field, so that ``flwr run --run-config "rounds=5 lr=0.01"`` sets them.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict

import torch
from flwr.app import ArrayRecord

from ...config.run_config import RunConfig
from ...schedule import SampleGrid

#: Fields that are not scalars travel as JSON text (Flower's run config holds scalars only).
_JSON_FIELDS = ("dataset_options", "algorithm_options", "partition_options")

#: The app's own run-config entries beside the run's fields: the results folder ("" for none),
#: whether to resume it, the seconds to wait for the nodes and for each round, the samples
#: grid of a comparison (JSON of a `fedsim.schedule.SampleGrid`; "" for the run's own), and
#: whether the nodes are Flower's simulated SuperNodes, each able to train any client (the
#: server then assigns the partitions itself rather than asking every node for its own).
APP_ENTRIES = {"out": "", "resume": False, "timeout": 600.0, "grid": "", "simulated": False}


def state_names(model: torch.nn.Module) -> list[str]:
    """Return the names of `fedsim.client.state_tensors` in its order: parameters, then floating-point buffers."""
    return [*(name for name, _ in model.named_parameters()), *buffer_names(model)]


def buffer_names(model: torch.nn.Module) -> list[str]:
    """Return the names of the floating-point buffers (BatchNorm statistics), which travel with the model."""
    return [name for name, buffer in model.named_buffers() if buffer.is_floating_point()]


def gradient_names(model: torch.nn.Module) -> list[str]:
    """Return the names of the trainable parameters, whose gradients a client of allreduce or reweighted sends."""
    return [name for name, param in model.named_parameters() if param.requires_grad]


#: The name prefix of an algorithm's tensors (SCAFFOLD's control variates) in a message's one ArrayRecord.
EXTRA_PREFIX = "fedsim-extra."


def to_record(names: list[str], tensors: list[torch.Tensor], extra: list[torch.Tensor] = ()) -> ArrayRecord:
    """Return ``tensors`` as an ``ArrayRecord`` keyed by ``names``, with ``extra`` tensors keyed by position.

    ``extra`` is an algorithm's own tensors (`fedsim.algorithms.base.RoundAlgorithm.broadcast` and
    ``reply``): they travel in the model's record, as Flower's strategies accept one
    ``ArrayRecord`` per reply; `extra_tensors` reads them back.
    """
    entries = [*zip(names, tensors), *((f"{EXTRA_PREFIX}{index}", tensor) for index, tensor in enumerate(extra))]
    return ArrayRecord(OrderedDict((name, tensor.detach().cpu()) for name, tensor in entries))


def extra_tensors(record: ArrayRecord) -> list[torch.Tensor]:
    """Return the ``extra`` tensors of a `to_record` record, in their order, on the CPU."""
    state = record.to_torch_state_dict()
    count = sum(1 for name in state if name.startswith(EXTRA_PREFIX))
    return [state[f"{EXTRA_PREFIX}{index}"] for index in range(count)]


def from_record(record: ArrayRecord, names: list[str], like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Return the record's tensors in the order of ``names``, on the device of ``like``'s tensors."""
    state = record.to_torch_state_dict()
    missing = [name for name in names if name not in state]
    if missing:
        raise ValueError(f"the model record lacks {len(missing)} of the model's tensors, e.g. {missing[0]!r}: "
                         "the server and the client built different models")
    return [state[name].to(device=tensor.device, dtype=tensor.dtype) for name, tensor in zip(names, like)]


def to_run_config(config: RunConfig) -> dict:
    """Return ``config`` as Flower run-config entries: dashed names, unset fields as "" (TOML has no null)."""
    entries = {}
    for name, value in config.to_dict().items():
        if name in _JSON_FIELDS:
            value = json.dumps(value)
        entries[name.replace("_", "-")] = "" if value is None else value
    return entries


def from_run_config(entries) -> tuple[RunConfig, dict]:
    """Return the `RunConfig` that run-config ``entries`` describe, and the app's own entries (`APP_ENTRIES`).

    ``entries`` are `to_run_config`'s output or a Flower app's ``[tool.flwr.app.config]`` with
    ``flwr run --run-config`` overrides.
    """
    settings = {name.replace("-", "_"): value for name, value in dict(entries).items()}
    app = {name: settings.pop(name, default) for name, default in APP_ENTRIES.items()}
    optional = {field.name for field in dataclasses.fields(RunConfig) if field.default is None}
    for name in optional:
        if settings.get(name) == "":
            settings[name] = None
    for name in _JSON_FIELDS:
        if isinstance(settings.get(name), str):
            settings[name] = json.loads(settings[name] or "{}")
    return RunConfig.from_mapping(settings, source="the Flower run config"), app


def grid_entry(config: RunConfig, grid: SampleGrid | None) -> str:
    """Return ``grid`` as the app's ``grid`` entry: JSON, or "" for the config's own grid."""
    if grid is None or grid == SampleGrid.from_config(config):
        return ""
    return json.dumps(dataclasses.asdict(grid))


def grid_from_entry(entry: str) -> SampleGrid | None:
    """Return the `SampleGrid` that a `grid_entry` describes (``None``: the config's own)."""
    return SampleGrid(**json.loads(entry)) if entry else None
