"""The client core: local training and evaluation, shared by every engine.

One model object serves every client. The global state is copied into it, the client trains,
and the delta is read out with ``torch._foreach_*`` ops: no per-client ``nn.Module``, no deep
copies, and batches are drawn by indexing in-memory tensors (no DataLoader workers).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..checks import check_integer
from ..data import normalize
from ..seeding import Stream, derive_seed, torch_generator
from .training import LocalTraining, as_index_tensor, local_gradient, loss_scaler, seeded_global_rng


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
    training: LocalTraining,
    seed: int = 0,
    round: int = 0,
    client: int = 0,
    class_weights: torch.Tensor | None = None,
    noise_sigma: float = 0.0,
    return_delta: bool = True,
    scaler: torch.amp.GradScaler | None = None,
    terms=None,
) -> ClientUpdate:
    """Train ``model`` from ``global_state`` on the client's samples and return the delta.

    The result depends only on (``seed``, ``round``, ``client``) and the inputs: the same
    triple gives bit-identical output on the CPU.

    Parameters
    ----------
    model : torch.nn.Module
        The one model object shared by all clients; its state is overwritten. Its parameters'
        device and dtype are the run's.
    global_state : list of Tensor
        The global model, as `get_state` returns it.
    data : fedsim.data.Dataset
        In-memory dataset; the client reads ``data.train_images[indices]``.
    indices : array_like of int
        The client's sample indices (a partition's shard).
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    training : fedsim.client.LocalTraining
        Batch size, epochs or steps, optimizer, AMP, micro-batches.
    seed, round, client : int
        Name the random stream for shuffling, augmentation, noise and dropout.
    class_weights : Tensor, optional
        Per-class loss weights (single-label); a sample's loss is multiplied by the weight of its
        class, e.g. ``p_global(y) / p_k(y)`` for class-balanced aggregation.
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
    terms : fedsim.algorithms.LocalTerms, optional
        What the run's algorithm changes in this client's training (`fedsim.algorithms.Algorithm.local_terms`):
        a loss per sample, a penalty per step, a correction after each step.

    Returns
    -------
    ClientUpdate
    """
    if not isinstance(training, LocalTraining):
        raise TypeError(f"`training` must be a fedsim.client.LocalTraining, got {type(training).__name__}")
    shard = as_index_tensor(indices, data.train_images.shape[0])
    if shard.numel() == 0:
        raise ValueError(f"client {client} has no samples: its `indices` are empty")

    device = next(model.parameters()).device
    generator = torch_generator(seed, Stream.CLIENT_DATA, round, client)
    set_state(model, global_state)
    model.train()
    all_params = list(model.parameters())
    params = [p for p in all_params if p.requires_grad]
    opt = training.optimizer.build(params)
    scaler = (scaler or loss_scaler(True, device)) if training.amp else None

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    processed = steps = 0
    with seeded_global_rng(derive_seed(seed, Stream.CLIENT_DROPOUT, round, client), device), \
            terms.training(model) if terms is not None else contextlib.nullcontext():
        for batch in local_batches(shard, training, generator):
            opt.zero_grad(set_to_none=True)
            for chunk in batch.chunk(training.micro_batches):
                # each chunk's summed loss over the whole batch's size: the batch mean
                loss_sum += local_gradient(model, data, chunk, task=task, generator=generator,
                                           weight=1.0 / batch.numel(), class_weights=class_weights,
                                           noise_sigma=noise_sigma, amp=training.amp, scaler=scaler,
                                           terms=terms).loss_sum
            if terms is not None and (gradients := terms.penalty_gradient(all_params)) is not None:
                if scaler:  # the penalty's gradient joins the loss's unscaled
                    scaler.unscale_(opt)
                add_gradients(all_params, gradients)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            if terms is not None:
                with torch.no_grad():
                    terms.after_step(all_params)
            processed += batch.numel()
            steps += 1

    delta = None
    if return_delta:
        with torch.no_grad():
            delta = torch._foreach_sub(state_tensors(model), global_state)
    labels = data.train_labels[shard.to(data.train_labels.device)]
    return ClientUpdate(delta, int(shard.numel()), processed, steps, float(loss_sum), task.label_counts(labels).cpu())


@torch.no_grad()
def add_gradients(params: list[torch.Tensor], gradients: list[torch.Tensor | None]) -> None:
    """Add ``gradients`` (``None``: none) to the trainable ``params``' ``.grad``, as a backward would accumulate them.

    A parameter the loss left without a gradient gets one, as a backward through a penalty gives it.
    """
    pairs = [(param, gradient) for param, gradient in zip(params, gradients)
             if param.requires_grad and gradient is not None]
    for param, _ in pairs:
        if param.grad is None:
            param.grad = torch.zeros_like(param)
    if pairs:
        torch._foreach_add_([param.grad for param, _ in pairs], [gradient for _, gradient in pairs])


@torch.no_grad()
def evaluate(model: torch.nn.Module, state, data, *, task, batch_size: int = 256, split: str = "test",
             indices=None) -> dict:
    """Return the task's metrics of ``state`` (or the model as is, if ``None``) on a split of ``data``.

    Parameters
    ----------
    model : torch.nn.Module
    state : list of Tensor or None
        Loaded into ``model`` first when given.
    data : fedsim.data.Dataset
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    batch_size : int, default 256
        Evaluation batches of 256 images ran a quarter faster than batches of 1,000 on a 2-core
        CPU (the McMahan CNN on MNIST: the activations stay in cache).
    split : {"test", "train"}
    indices : array_like of int, optional
        Evaluate on these samples of the split only (a client's shard); all of them by default.

    Returns
    -------
    dict
        ``loss`` and the task's metrics (``accuracy`` or F1/mAP) plus ``num_examples``.
    """
    if split not in ("test", "train"):
        raise ValueError(f"`split` must be 'test' or 'train', got {split!r}")
    check_integer("batch_size", batch_size, minimum=1)
    if state is not None:
        set_state(model, state)
    images, labels = (data.test_images, data.test_labels) if split == "test" else (data.train_images, data.train_labels)
    if indices is not None:
        indices = torch.as_tensor(indices, dtype=torch.int64)
        images, labels = images[indices], labels[indices]
    metrics = task.metrics(predict(model, images, data, batch_size), labels.cpu())
    metrics["num_examples"] = int(images.shape[0])
    return metrics


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, data, batch_size: int = 256) -> torch.Tensor:
    """Return the model's logits of ``images`` (of ``data``'s kind, normalized as its), in eval mode, on the CPU."""
    param = next(model.parameters())
    was_training = model.training
    model.eval()
    logits = []
    for start in range(0, images.shape[0], batch_size):
        batch = normalize(images[start : start + batch_size], data, dtype=param.dtype)
        logits.append(model(batch.to(param.device, non_blocking=True)).cpu())
    model.train(was_training)
    return torch.cat(logits)


def local_step_count(num_samples: int, training: LocalTraining) -> int:
    """Return how many batches `local_batches` yields for a shard of ``num_samples`` (> 0), without drawing them."""
    if training.local_steps is not None:
        return training.local_steps
    full, rest = divmod(num_samples, training.batch_size)
    dropped = training.drop_last and num_samples >= training.batch_size  # a short last batch skipped
    return training.epochs * (full + (1 if rest and not dropped else 0))


def local_sample_count(num_samples: int, training: LocalTraining) -> int:
    """Return how many samples the batches of `local_batches` hold for a shard of ``num_samples`` (> 0).

    Every pass over the shard yields the same batch sizes, full ones then the rest, whatever its
    shuffle, so the count needs no draw: the simulated clock (`fedsim.clock`) knows how long a
    client's round takes before it trains.

    Examples
    --------
    >>> local_sample_count(25, LocalTraining(batch_size=10, epochs=2))
    50
    >>> local_sample_count(25, LocalTraining(batch_size=10, epochs=None, local_steps=4))  # 10, 10, 5, then 10
    35
    """
    full, rest = divmod(num_samples, training.batch_size)
    if training.drop_last and full:
        rest = 0  # a short last batch skipped
    sizes = [training.batch_size] * full + ([rest] if rest else [])
    if training.local_steps is None:
        return training.epochs * sum(sizes)
    passes, steps = divmod(training.local_steps, len(sizes))
    return passes * sum(sizes) + sum(sizes[:steps])


def local_batches(shard: torch.Tensor, training: LocalTraining, generator: torch.Generator):
    """Yield a client's index batches: ``epochs`` shuffled passes, or ``local_steps`` batches across reshuffles.

    Each pass is a permutation drawn from ``generator`` when the pass starts, so a client's
    random stream is consumed in the same order however its batches are used.
    """
    epochs, remaining, batch_size = training.epochs, training.local_steps, training.batch_size
    epoch = 0
    while (epochs is not None and epoch < epochs) or (remaining is not None and remaining > 0):
        order = shard[torch.randperm(shard.numel(), generator=generator)]
        for start in range(0, order.numel(), batch_size):
            batch = order[start : start + batch_size]
            if training.drop_last and batch.numel() < batch_size and order.numel() >= batch_size:
                break
            yield batch
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    return
        epoch += 1
