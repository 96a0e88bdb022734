"""What every engine starts from: the data, task, partition, and the seeded model on its device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .models import create_model
from .partitioning import partition_for
from .seeding import Stream, derive_seed
from .tasks import create_task
from .training import seeded_global_rng


@dataclass
class RunSetup:
    """The pieces of a run every engine builds alike from its config (all functions of the config)."""

    data: object
    task: object
    partition: object
    model: torch.nn.Module

    @classmethod
    def build(cls, config, *, data=None, partition=None, device: torch.device | None = None) -> RunSetup:
        """Load the data, make the task, the partition and the seeded model (``data`` and ``partition`` if not given)."""
        data = data or config.load_dataset()
        task = create_task(data.num_classes, multilabel=data.multilabel, label_smoothing=config.label_smoothing)
        if partition is None:
            partition = partition_for(config, data.train_labels.numpy())
        return cls(data, task, partition, build_model(config, data, device))


def resolve_device(name: str) -> torch.device:
    """Return the device for ``--device`` (``auto`` picks CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("`device`='cuda' but no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(name)


def build_model(config, data, device: torch.device | None = None) -> torch.nn.Module:
    """Create the run's model on its device, in its dtype, initialised from the seed alone.

    The initialisation is drawn in float32 on the CPU whatever the run's device and dtype, so
    that every strategy and engine starts from the same weights, and a float64 run starts from
    the float32 run's weights widened.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        Reads ``model``, ``norm``, ``seed``, ``device`` and ``dtype``.
    data : fedsim.data.Dataset
        Gives the number of classes, input channels and image size.
    device : torch.device, optional
        Overrides ``config.device`` (a torchrun rank picks its own GPU).
    """
    options = {} if config.norm is None else {"norm": config.norm}
    with seeded_global_rng(derive_seed(config.seed, Stream.MODEL), torch.device("cpu")):
        model = create_model(config.model, num_classes=data.num_classes, in_channels=data.in_channels,
                             image_size=data.image_size, **options)
    device = resolve_device(config.device) if device is None else device
    return model.to(device=device, dtype=config.torch_dtype)
