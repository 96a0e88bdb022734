"""The local work every engine runs: the local-training settings, one rank's weighted gradient,
and the batch, precision and seeding helpers that `fedsim.client.client_update` shares with it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from ..checks import SettingError, check_integer
from ..data import add_feature_noise, augment, normalize
from .optim import OptimizerConfig


@dataclass(frozen=True)
class LocalTraining:
    """How a client trains locally: the settings `fedsim.client.client_update` takes as one object.

    Parameters
    ----------
    batch_size : int
        Samples per optimizer step.
    epochs, local_steps : int, optional
        Amount of local work, exactly one of the two: passes over the shard, or optimizer steps
        (reshuffling the shard whenever it is used up).
    optimizer : OptimizerConfig
        A fresh optimizer is built for every client, as a client starts without state.
    amp : bool, default False
        Mixed precision: bf16 autocast on CPU; fp16 autocast with a gradient scaler on CUDA.
    micro_batches : int, default 1
        Gradient accumulation: split each batch into this many forward/backward passes.
    drop_last : bool, default False
        Skip a last batch smaller than ``batch_size`` in each epoch.

    Examples
    --------
    >>> LocalTraining(batch_size=10, epochs=None, local_steps=5).local_steps
    5
    """

    batch_size: int = 10
    epochs: int | None = 1
    local_steps: int | None = None
    optimizer: OptimizerConfig = OptimizerConfig()
    amp: bool = False
    micro_batches: int = 1
    drop_last: bool = False

    def __post_init__(self):
        if (self.epochs is None) == (self.local_steps is None):
            raise SettingError("give exactly one of `epochs` and {local_steps:name}")
        check_integer("epochs" if self.epochs is not None else "local_steps",
                      self.epochs if self.epochs is not None else self.local_steps, minimum=1)
        check_integer("batch_size", self.batch_size, minimum=1)
        check_integer("micro_batches", self.micro_batches, minimum=1)
        if not isinstance(self.optimizer, OptimizerConfig):
            raise TypeError(f"`optimizer` must be an OptimizerConfig, got {type(self.optimizer).__name__}")

    @classmethod
    def from_config(cls, config) -> LocalTraining:
        """Return a FedAvg client's local training under a `fedsim.config.RunConfig`."""
        return cls(
            batch_size=config.batch_size,
            epochs=None if config.local_steps else config.local_epochs,
            local_steps=config.local_steps,
            optimizer=OptimizerConfig(lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay),
            amp=config.amp,
            micro_batches=config.micro_batches,
        )


@dataclass
class LocalGradient:
    """What `local_gradient` adds up: samples forwarded and the sums of their losses, raw and weighted.

    The sums stay 0-d tensors on the run's device, so that a caller summing many batches does
    not wait for each one (a ``float()`` per batch would synchronise a GPU).
    """

    samples: int
    loss_sum: torch.Tensor
    weighted_loss_sum: torch.Tensor

    @property
    def weighted_mean_loss(self) -> float:
        """Mean class-weighted loss per sample: the dynamic rule's score."""
        return float(self.weighted_loss_sum) / self.samples

    @classmethod
    def zero(cls) -> LocalGradient:
        """Nothing forwarded yet: the start of a sum over micro-batches."""
        return cls(0, torch.zeros(()), torch.zeros(()))

    def __add__(self, other: LocalGradient) -> LocalGradient:
        """The sums of two micro-batches of one batch."""
        return LocalGradient(self.samples + other.samples, self.loss_sum + other.loss_sum,
                             self.weighted_loss_sum + other.weighted_loss_sum)


def local_gradient(model, data, indices, *, task, generator: torch.Generator, weight: float | None = None,
                   class_weights: torch.Tensor | None = None, noise_sigma: float = 0.0, amp: bool = False,
                   scaler: torch.amp.GradScaler | None = None, terms=None) -> LocalGradient:
    """Add the gradient of ``weight * sum_i c(y_i) * loss_i`` over the samples at ``indices`` to ``.grad``.

    One rank's contribution to one step of allreduce or reweighted, and one micro-batch of a
    client's step: the caller zeroes, combines and applies the gradients.

    Parameters
    ----------
    model : torch.nn.Module
        Its parameters' device and dtype are the run's.
    data : fedsim.data.Dataset
    indices : Tensor of int64
        The batch's sample indices.
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    generator : torch.Generator
        Draws the batch's augmentation and feature noise.
    weight : float, optional
        Multiplies the summed sample losses; ``1 / len(indices)`` (the batch mean) by default.
    class_weights : Tensor, optional
        Per-class loss weights ``c(y)`` (single-label), e.g. this rank's row of
        `fedsim.aggregate.class_balance_weights`.
    noise_sigma : float, default 0
        Feature-noise level of this rank or client.
    amp : bool, default False
        Autocast (bf16 on CPU, fp16 on CUDA).
    scaler : torch.amp.GradScaler, optional
        Scales the loss before ``backward`` (fp16 on CUDA).
    terms : fedsim.algorithms.LocalTerms, optional
        An algorithm's client terms: their `~fedsim.algorithms.LocalTerms.sample_loss` is added to each
        sample's (class-weighted) loss.
    """
    loss, result = batch_loss(model, data, indices, task=task, generator=generator, weight=weight,
                              class_weights=class_weights, noise_sigma=noise_sigma, amp=amp, terms=terms)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    return result


def batch_loss(model, data, indices, *, task, generator: torch.Generator, weight: float | None = None,
               class_weights: torch.Tensor | None = None, noise_sigma: float = 0.0,
               amp: bool = False, terms=None) -> tuple[torch.Tensor, LocalGradient]:
    """Return the loss `local_gradient` differentiates, and its sums, without the backward pass.

    A DDP rank needs the batch's loss between the two: the dynamic weights' communication
    hook reads it during ``backward``. The parameters are those of `local_gradient`.
    """
    param = next(model.parameters())
    inputs, targets = training_batch(data, indices, generator, noise_sigma, param.device, param.dtype)
    with autocast(param.device, amp):
        outputs = model(inputs)
        raw = task.loss(outputs, targets)
    weighted = raw if class_weights is None else raw * class_weights.to(raw)[targets]
    count = targets.shape[0]
    scale = 1.0 / count if weight is None else weight
    loss = weighted.sum() * scale
    extra = None if terms is None else terms.sample_loss(inputs, outputs)
    if extra is not None:  # differentiated, but the sums returned stay the task's losses
        loss = loss + extra.sum() * scale
    raw_sum = raw.detach().sum()
    return loss, LocalGradient(count, raw_sum, raw_sum if class_weights is None else weighted.detach().sum())


def training_batch(data, indices, generator, noise_sigma, device, dtype=torch.float32):
    """Return normalised, augmented inputs (in ``dtype``) and targets for the samples at ``indices``."""
    images = data.train_images[indices.to(data.train_images.device)]
    # Augment the uint8 images so that crop padding is black, as torchvision's RandomCrop pads.
    inputs = add_feature_noise(normalize(augment(images, data, generator), data, dtype=dtype), noise_sigma, generator)
    targets = data.train_labels[indices.to(data.train_labels.device)]
    return inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)


#: The half precision of ``amp`` on each device type: fp16 on CUDA (its losses scaled, `loss_scaler`),
#: bf16 elsewhere (whose exponent range needs no scaling).
AMP_DTYPES = {"cuda": torch.float16}


def amp_dtype(device: torch.device) -> torch.dtype:
    """Return the half precision ``amp`` computes in on ``device`` (`AMP_DTYPES`)."""
    return AMP_DTYPES.get(device.type, torch.bfloat16)


def autocast(device: torch.device, amp: bool):
    """Return the autocast context of ``amp``: bf16 on the CPU, fp16 on CUDA (or no-op)."""
    if not amp:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=amp_dtype(device))


def loss_scaler(amp: bool, device: torch.device) -> torch.amp.GradScaler | None:
    """Return the loss scaler that ``amp`` needs in fp16 (CUDA); bf16 needs none."""
    return torch.amp.GradScaler(device.type) if amp and amp_dtype(device) == torch.float16 else None


@contextlib.contextmanager
def seeded_global_rng(seed: int, device: torch.device):
    """Seed torch's global RNG (dropout, stochastic depth) for one client, restoring it afterwards.

    Only the generators of ``device`` are touched: ``torch.manual_seed`` would also queue a
    seeding of every CUDA device while CUDA is uninitialised, and that queue (with a stack
    trace per entry) grows by one entry per client or step for the whole run.
    """
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.default_generator.manual_seed(seed)
        if devices:
            with torch.cuda.device(devices[0]):
                torch.cuda.manual_seed(seed)
        yield


def as_index_tensor(indices, num_samples: int) -> torch.Tensor:
    """Return ``indices`` as an int64 tensor after checking it is 1-D and within ``[0, num_samples)``."""
    array = np.asarray(indices)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"`indices` must be a 1-D array of integers, got shape {array.shape} dtype {array.dtype}")
    if array.size and (array.min() < 0 or array.max() >= num_samples):
        raise ValueError(f"`indices` must lie in [0, {num_samples}), got values in [{array.min()}, {array.max()}]")
    return torch.from_numpy(array.astype(np.int64, copy=False))
