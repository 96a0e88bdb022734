"""What every engine starts from: the data, task, partition, and the seeded model on its device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .checks import SettingError
from .models import create_model
from .config.partitioning import partition_for
from .seeding import Stream, derive_seed
from .client.tasks import create_task
from .client.training import seeded_global_rng, training_batch

#: Samples in the batch `check_model_fits` trains on, unless the run meets a batch of one.
FIT_CHECK_BATCH = 2


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
            partition = partition_for(config, data.train_labels.numpy(), data.train_client_ids)
        return cls(data, task, partition, build_model(config, data, device))


def resolve_device(name: str) -> torch.device:
    """Return the device for ``--device`` (``auto`` picks CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SettingError("{device} but no CUDA device is available; use 'cpu' or 'auto'", device=name)
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


def smallest_batch(batch_size: int, sizes) -> int:
    """Return the smallest batch a client's pass over its shard ends with: a shard's remainder, or the shard itself.

    Examples
    --------
    >>> smallest_batch(20, [40, 41, 7, 0])
    1
    """
    ends = [int(size) % batch_size or batch_size for size in sizes if size > 0]
    return min(ends, default=batch_size)


def check_model_fits(model: torch.nn.Module, config, data, partition) -> None:
    """Train ``model`` forward and backward on a tiny batch, so that a model the data does not fit fails at once.

    A model whose layers shrink an image smaller than the dataset's to nothing, or whose
    BatchNorm sees one value per channel (a batch of one sample reaching a 1x1 feature map),
    would otherwise fail with PyTorch's message once the run has started. The batch has two
    samples, or one where the run meets a batch of one (`smallest_batch`); the global random
    state is left as it was. ``model`` is changed (gradients, BatchNorm statistics): give it
    one built for the check.

    Raises
    ------
    ValueError
        Naming ``model``, ``dataset`` and, for a batch of one, ``batch_size``.
    """
    from .client.tasks import create_task

    size = min(FIT_CHECK_BATCH, smallest_batch(config.batch_size, partition.sizes), len(data.train_labels))
    param = next(model.parameters())
    task = create_task(data.num_classes, multilabel=data.multilabel)
    devices = [param.device] if param.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        inputs, targets = training_batch(data, torch.arange(size), torch.Generator().manual_seed(0), 0.0,
                                         param.device, param.dtype)
        model.train()
        try:
            task.loss(model(inputs), targets).sum().backward()
        except Exception as error:  # PyTorch raises several types for a shape that does not fit
            reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            subject = "{model}" + ("" if config.norm is None else " with {norm}")
            values = {"model": config.model, "norm": config.norm, "dataset": config.dataset,
                      "batch_size": config.batch_size, "reason": reason,
                      "image": f"{data.in_channels}x{data.image_size}x{data.image_size}"}
            if size == 1:
                where = ("every batch is one sample" if config.batch_size == 1 else
                         "a shard's last batch is one sample")
                raise SettingError(
                    subject + " cannot train on a batch of one sample of {dataset} ({image:text} images): "
                    "{reason:text}; with {batch_size} {where:text}: choose another {batch_size:name}, or a "
                    "{norm:name} other than 'batch'", where=where, **values) from None
            raise SettingError(subject + " does not fit {dataset} ({image:text} images, {classes:text} classes): one "
                               "forward and backward of {size:text} samples fails: {reason:text}; choose another "
                               "{model:name} or {dataset:name}", classes=data.num_classes, size=size,
                               **values) from None
