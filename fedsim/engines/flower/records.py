"""What travels between the Flower server and its clients: named model tensors and the run's config.

Models travel as ``ArrayRecord`` s (NumPy's format without pickle; every dtype, float64 included,
arrives bit for bit). The run's config travels as Flower run-config entries, one per
`fedsim.config.RunConfig` field, so that ``flwr run --run-config "rounds=5 lr=0.01"`` sets them.
"""

from __future__ import annotations

import json
from collections import OrderedDict

import torch
from flwr.app import ArrayRecord

from ...config import RunConfig

#: Fields that are not scalars travel as JSON text (Flower's run config holds scalars only).
_JSON_FIELDS = ("dataset_options",)


def state_names(model: torch.nn.Module) -> list[str]:
    """Return the names of `fedsim.client.state_tensors` in its order: parameters, then floating-point buffers."""
    buffers = [name for name, buffer in model.named_buffers() if buffer.is_floating_point()]
    return [*(name for name, _ in model.named_parameters()), *buffers]


def to_record(names: list[str], tensors: list[torch.Tensor]) -> ArrayRecord:
    """Return ``tensors`` as an ``ArrayRecord`` keyed by ``names``."""
    return ArrayRecord(OrderedDict((name, tensor.detach().cpu()) for name, tensor in zip(names, tensors)))


def from_record(record: ArrayRecord, names: list[str], like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Return the record's tensors in the order of ``names``, on the device of ``like``'s tensors."""
    state = record.to_torch_state_dict()
    missing = [name for name in names if name not in state]
    if missing:
        raise ValueError(f"the model record lacks {len(missing)} of the model's tensors, e.g. {missing[0]!r}: "
                         "the server and the client built different models")
    return [state[name].to(device=tensor.device, dtype=tensor.dtype) for name, tensor in zip(names, like)]


def to_run_config(config: RunConfig) -> dict:
    """Return ``config`` as Flower run-config entries (dashed names; unset fields left out)."""
    entries = {}
    for name, value in config.to_dict().items():
        if name in _JSON_FIELDS:
            value = json.dumps(value)
        if value is not None:
            entries[name.replace("_", "-")] = value
    return entries


def from_run_config(entries) -> RunConfig:
    """Return the `RunConfig` that `to_run_config` (or a Flower app's ``[tool.flwr.app.config]``) describes."""
    settings = {name.replace("-", "_"): value for name, value in dict(entries).items()}
    for name in _JSON_FIELDS:
        if isinstance(settings.get(name), str):
            settings[name] = json.loads(settings[name])
    return RunConfig.from_mapping(settings, source="the Flower run config")
