"""The client core: local training and evaluation, shared by every engine.

One model object serves every client. The global state is copied into it, the client trains,
and the delta is read out with ``torch._foreach_*`` ops: no per-client ``nn.Module``, no deep
copies, and batches are drawn by indexing in-memory tensors (no DataLoader workers).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from .data import add_feature_noise, augment, normalize
from .optim import OptimizerConfig
from .seeding import derive_seed, torch_generator


def state_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Return the tensors a federation exchanges: the parameters, then the floating-point buffers.

    BatchNorm running statistics travel with the weights (as FedAvg implementations average
    them); integer buffers such as ``num_batches_tracked`` stay local.
    """
    buffers = [buffer for buffer in model.buffers() if buffer.is_floating_point()]
    return [*model.parameters(), *buffers]


def get_state(model: torch.nn.Module) -> list[torch.Tensor]:
    """Return detached copies of `state_tensors`."""
    return [tensor.detach().clone() for tensor in state_tensors(model)]


@torch.no_grad()
def set_state(model: torch.nn.Module, state: list[torch.Tensor]) -> None:
    """Copy ``state`` into the model's `state_tensors` in place."""
    targets = state_tensors(model)
    if len(targets) != len(state):
        raise ValueError(f"`state` has {len(state)} tensors but the model has {len(targets)}")
    torch._foreach_copy_(targets, state)


@dataclass
class ClientUpdate:
    """What a client sends back after local training.

    Attributes
    ----------
    delta : list of Tensor or None
        ``trained - global`` for every tensor of `state_tensors` (``None`` when not asked for).
    num_examples : int
        Size of the client's shard (FedAvg's ``n_k``).
    samples_processed : int
        Samples forwarded during training (epochs x shard, or steps x batch).
    num_steps : int
        Optimizer steps taken.
    loss_sum : float
        Sum of the per-sample training losses, before any class weights.
    label_counts : Tensor
        How many samples of each class the shard holds.
    """

    delta: list[torch.Tensor] | None
    num_examples: int
    samples_processed: int
    num_steps: int
    loss_sum: float
    label_counts: torch.Tensor

    @property
    def mean_loss(self) -> float:
        """Mean training loss per processed sample."""
        return self.loss_sum / max(self.samples_processed, 1)


def client_update(
    model: torch.nn.Module,
    global_state: list[torch.Tensor],
    data,
    indices,
    *,
    task,
    batch_size: int,
    epochs: int | None = None,
    local_steps: int | None = None,
    optimizer: OptimizerConfig = OptimizerConfig(),
    prox_mu: float = 0.0,
    class_weights: torch.Tensor | None = None,
    seed: int = 0,
    round: int = 0,
    client: int = 0,
    amp: bool = False,
    micro_batches: int = 1,
    drop_last: bool = False,
    noise_sigma: float = 0.0,
    return_delta: bool = True,
    scaler: torch.amp.GradScaler | None = None,
) -> ClientUpdate:
    """Train ``model`` from ``global_state`` on the client's samples and return the delta.

    Exactly one of ``epochs`` (passes over the shard) and ``local_steps`` (optimizer steps,
    reshuffling the shard whenever it is used up) is given. The result depends only on
    (``seed``, ``round``, ``client``) and the inputs: the same triple gives bit-identical
    output on the CPU.

    Parameters
    ----------
    model : torch.nn.Module
        The one model object shared by all clients; its state is overwritten.
    global_state : list of Tensor
        The global model, as `get_state` returns it.
    data : fedsim.data.Dataset
        In-memory dataset; the client reads ``data.train_images[indices]``.
    indices : array_like of int
        The client's sample indices (a partition's shard).
    task : fedsim.tasks.SingleLabel or fedsim.tasks.MultiLabel
    batch_size : int
        Samples per optimizer step.
    epochs, local_steps : int, optional
        Amount of local work, one of the two.
    optimizer : OptimizerConfig
        A fresh optimizer is built for every call, as a client starts without state.
    prox_mu : float, default 0
        FedProx proximal weight: adds ``mu * (w - w_global)`` to the gradient
        (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020).
    class_weights : Tensor, optional
        Per-class loss weights (single-label); a sample's loss is multiplied by the weight of its
        class, e.g. ``p_global(y) / p_k(y)`` for class-balanced aggregation.
    seed, round, client : int
        Name the random stream for shuffling, augmentation, noise and dropout.
    amp : bool, default False
        Mixed precision: bf16 autocast on CPU; fp16 autocast with a gradient scaler on CUDA.
    micro_batches : int, default 1
        Gradient accumulation: split each batch into this many forward/backward passes.
    drop_last : bool, default False
        Skip a last batch smaller than ``batch_size`` in each epoch.
    noise_sigma : float, default 0
        Standard deviation of Gaussian noise added to the normalised inputs (feature-noise skew).
    return_delta : bool, default True
        Compute ``trained - global``. An engine that averages many clients passes ``False``
        and reads the trained tensors straight from ``state_tensors(model)``, which saves a
        copy and a subtraction of the whole model per client.
    scaler : torch.amp.GradScaler, optional
        The fp16 loss scaler to use on CUDA with ``amp``; pass one that lives across clients so
        each client does not restart from the initial scale (and skip its first steps). A new
        one is made when omitted.

    Returns
    -------
    ClientUpdate
    """
    if (epochs is None) == (local_steps is None):
        raise ValueError("give exactly one of `epochs` and `local_steps`")
    work = epochs if epochs is not None else local_steps
    _check_positive("epochs" if epochs is not None else "local_steps", work)
    _check_positive("batch_size", batch_size)
    _check_positive("micro_batches", micro_batches)
    if prox_mu < 0:
        raise ValueError(f"`prox_mu` must be >= 0, got {prox_mu}")
    shard = _as_index_tensor(indices, data.train_images.shape[0])
    if shard.numel() == 0:
        raise ValueError(f"client {client} has no samples: its `indices` are empty")

    device = next(model.parameters()).device
    generator = torch_generator(seed, round, client)
    set_state(model, global_state)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer.build(params)
    if amp and device.type == "cuda":
        scaler = scaler or torch.amp.GradScaler("cuda")
    else:
        scaler = None
    weights = None if class_weights is None else class_weights.to(device)
    anchors = [p.detach().clone() for p in params] if prox_mu > 0 else None

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    processed = steps = 0
    with seeded_global_rng(derive_seed(seed, round, client, 1), device):
        for batch in _batches(shard, batch_size, epochs, local_steps, drop_last, generator):
            opt.zero_grad(set_to_none=True)
            for chunk in batch.chunk(micro_batches):
                inputs, targets = training_batch(data, chunk, generator, noise_sigma, device)
                with autocast(device, amp):
                    per_sample = task.loss(model(inputs), targets)
                loss_sum += per_sample.detach().sum()
                if weights is not None:
                    per_sample = per_sample * weights[targets]
                loss = per_sample.sum() / batch.numel()  # the mean over the whole batch
                (scaler.scale(loss) if scaler else loss).backward()
            if scaler and anchors is not None:
                scaler.unscale_(opt)  # the proximal term must be added to true, not scaled, gradients
            if anchors is not None:
                grads = [p.grad for p in params]
                torch._foreach_add_(grads, torch._foreach_sub([p.detach() for p in params], anchors), alpha=prox_mu)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            processed += batch.numel()
            steps += 1

    delta = None
    if return_delta:
        with torch.no_grad():
            delta = torch._foreach_sub(state_tensors(model), global_state)
    labels = data.train_labels[shard.to(data.train_labels.device)]
    return ClientUpdate(delta, int(shard.numel()), processed, steps, float(loss_sum), task.label_counts(labels).cpu())


@torch.no_grad()
def evaluate(model: torch.nn.Module, state, data, *, task, batch_size: int = 1000, split: str = "test") -> dict:
    """Return the task's metrics of ``state`` (or the model as is, if ``None``) on a split of ``data``.

    Parameters
    ----------
    model : torch.nn.Module
    state : list of Tensor or None
        Loaded into ``model`` first when given.
    data : fedsim.data.Dataset
    task : fedsim.tasks.SingleLabel or fedsim.tasks.MultiLabel
    batch_size : int, default 1000
    split : {"test", "train"}

    Returns
    -------
    dict
        ``loss`` and the task's metrics (``accuracy`` or F1/mAP) plus ``num_examples``.
    """
    if split not in ("test", "train"):
        raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
    _check_positive("batch_size", batch_size)
    if state is not None:
        set_state(model, state)
    images, labels = (data.test_images, data.test_labels) if split == "test" else (data.train_images, data.train_labels)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    logits = []
    for start in range(0, images.shape[0], batch_size):
        batch = normalize(images[start : start + batch_size], data).to(device, non_blocking=True)
        logits.append(model(batch).float().cpu())
    model.train(was_training)
    metrics = task.metrics(torch.cat(logits), labels.cpu())
    metrics["num_examples"] = int(images.shape[0])
    return metrics


def _batches(shard, batch_size, epochs, local_steps, drop_last, generator):
    """Yield index batches: ``epochs`` shuffled passes, or ``local_steps`` batches across reshuffles."""
    remaining = local_steps
    epoch = 0
    while (epochs is not None and epoch < epochs) or (remaining is not None and remaining > 0):
        order = shard[torch.randperm(shard.numel(), generator=generator)]
        for start in range(0, order.numel(), batch_size):
            batch = order[start : start + batch_size]
            if drop_last and batch.numel() < batch_size and order.numel() >= batch_size:
                break
            yield batch
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    return
        epoch += 1


def training_batch(data, indices, generator, noise_sigma, device):
    """Return normalised, augmented inputs and targets for the samples at ``indices``."""
    images = data.train_images[indices.to(data.train_images.device)]
    # Augment the uint8 images so that crop padding is black, as torchvision's RandomCrop pads.
    inputs = add_feature_noise(normalize(augment(images, data, generator), data), noise_sigma, generator)
    targets = data.train_labels[indices.to(data.train_labels.device)]
    return inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)


def autocast(device: torch.device, amp: bool):
    if not amp:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.float16 if device.type == "cuda" else torch.bfloat16)


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


def _as_index_tensor(indices, num_samples: int) -> torch.Tensor:
    array = np.asarray(indices)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"`indices` must be a 1-D array of integers, got shape {array.shape} dtype {array.dtype}")
    if array.size and (array.min() < 0 or array.max() >= num_samples):
        raise ValueError(f"`indices` must lie in [0, {num_samples}), got values in [{array.min()}, {array.max()}]")
    return torch.from_numpy(array.astype(np.int64, copy=False))


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1, got {value}")
