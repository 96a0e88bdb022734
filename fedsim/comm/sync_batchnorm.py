"""SyncBatchNorm on the CPU: BatchNorm statistics over all ranks' batches, over gloo.

PyTorch's ``torch.nn.SyncBatchNorm`` runs its fused kernels on GPUs only, and DDP refuses it on
a CPU module. `SyncBatchNorm` here is the same layer written with plain tensor operations: each
rank's count, mean and sum of squared deviations are summed over the ranks in one small
differentiable all-reduce and combined by Chan et al.'s parallel-variance rule (stable where a
sum of squares would cancel). `convert_sync_batchnorm` uses PyTorch's layer on a GPU and this
one elsewhere.

The result is BatchNorm over the concatenation of the ranks' batches, which is what the
in-process engine computes with one forward over all ranks' samples; the two engines agree.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.modules.batchnorm import _BatchNorm

from ..checks import SettingError


class _SumOverRanks(torch.autograd.Function):
    """All-reduce (sum) whose backward all-reduces the gradient: every rank's loss reaches every input."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        total = tensor.clone()
        dist.all_reduce(total, group=group)
        return total

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training statistics are those of every rank's batch together; any input of 2+ dimensions.

    Build it with `convert_sync_batchnorm`. It costs one all-reduce of ``K * (2C + 1)`` numbers
    per layer in the forward and one in the backward; in eval mode, or outside a process group,
    it is plain BatchNorm.

    Parameters
    ----------
    num_features, eps, momentum, affine, track_running_stats
        As in ``torch.nn.BatchNorm2d``.
    process_group : ProcessGroup, optional
        The ranks whose batches are normalized together (the default group when omitted).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected an input of at least 2 dimensions (batch, channels, ...), got {input.dim()}")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        group = self.process_group or dist.group.WORLD
        if not self.training or not dist.is_initialized() or dist.get_world_size(group) == 1:
            return super().forward(input)
        self._check_input_dim(input)
        mean, var, count = self._group_statistics(input, group)
        if self.track_running_stats:
            self._update_running_statistics(mean.detach(), var.detach(), count)
        shape = [1, -1] + [1] * (input.dim() - 2)
        dtype = mean.dtype
        output = (input.to(dtype) - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            output = output * self.weight.to(dtype).view(shape) + self.bias.to(dtype).view(shape)
        return output.to(input.dtype)

    def _group_statistics(self, input: torch.Tensor, group) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Return the mean and biased variance per channel over every rank's batch, and the sample count."""
        # at least float32, as BatchNorm's statistics are under autocast
        x = input.to(torch.promote_types(input.dtype, torch.float32))
        dims = [0, *range(2, x.dim())]
        channels = x.shape[1]
        mean = x.mean(dims)
        squares = (x - mean.view([1, -1] + [1] * (x.dim() - 2))).square().sum(dims)
        count = x.new_full((1,), x.numel() // channels)
        table = x.new_zeros(dist.get_world_size(group), 1 + 2 * channels)
        row = torch.cat([count, mean, squares])
        table = table.index_copy(0, torch.tensor([dist.get_rank(group)], device=x.device), row[None])
        table = _SumOverRanks.apply(table, group)
        counts, means, squares = table[:, :1], table[:, 1 : 1 + channels], table[:, 1 + channels :]
        total = counts.sum()
        mean = (counts * means).sum(0) / total
        squares = (squares + counts * (means - mean).square()).sum(0)
        return mean, squares / total, float(total.detach())

    def _update_running_statistics(self, mean: torch.Tensor, var: torch.Tensor, count: float) -> None:
        """Move the running mean and (unbiased) variance as ``torch.nn.BatchNorm2d`` does."""
        self.num_batches_tracked.add_(1)
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        with torch.no_grad():
            self.running_mean.lerp_(mean.to(self.running_mean.dtype), factor)
            unbiased = var * (count / max(count - 1.0, 1.0))
            self.running_var.lerp_(unbiased.to(self.running_var.dtype), factor)


def has_batchnorm(model: torch.nn.Module) -> bool:
    """Return whether ``model`` has a BatchNorm layer."""
    return any(isinstance(module, _BatchNorm) for module in model.modules())


def convert_sync_batchnorm(model: torch.nn.Module, process_group=None) -> torch.nn.Module:
    """Swap every BatchNorm layer inside ``model`` for a synchronized one, in place; return ``model``.

    On a GPU the layers become ``torch.nn.SyncBatchNorm`` (PyTorch's own conversion), elsewhere
    `SyncBatchNorm`. The new layers keep the old ones' parameters and buffers (the same tensors),
    so an optimizer or a reference to the model's tensors stays valid.
    """
    if isinstance(model, _BatchNorm):
        raise ValueError("convert_sync_batchnorm swaps the BatchNorm layers inside a model; got a BatchNorm layer")
    if next(model.parameters()).device.type == "cuda":
        return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group)
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if isinstance(child, _BatchNorm):
                parent.add_module(name, _synchronized(child, process_group))
    return model


def _synchronized(layer: _BatchNorm, process_group) -> SyncBatchNorm:
    """Return a `SyncBatchNorm` that holds ``layer``'s parameters and buffers."""
    synced = SyncBatchNorm(layer.num_features, layer.eps, layer.momentum, layer.affine, layer.track_running_stats,
                           process_group)
    for name, tensor in [*layer.named_parameters(recurse=False), *layer.named_buffers(recurse=False)]:
        setattr(synced, name, tensor)
    synced.train(layer.training)
    return synced


def check_sync_bn(model: torch.nn.Module, sits_out: bool) -> None:
    """Refuse `sync_bn` where it cannot run: a model without BatchNorm, or ranks that sit out steps.

    Each SyncBatchNorm forward is a collective, so every rank must run every step; ``Join``
    shadows only DDP's gradient all-reduce, not these.
    """
    if not has_batchnorm(model):
        raise SettingError("{sync_bn} needs a model with BatchNorm layers and this one has none; set {norm} or "
                           "leave {sync_bn:name} off", sync_bn=True, norm="batch")
    if sits_out:
        raise SettingError("{sync_bn} needs every rank at every step, but some rank sits out steps (its shard is "
                           "empty, or runs out first under {joined}); use {cycled} and no empty shard",
                           fields={"joined": "uneven", "cycled": "uneven"}, sync_bn=True, joined="join",
                           cycled="cycle")


def sync_bn_bytes(model: torch.nn.Module) -> int:
    """Return the bytes one rank sends per forward and backward for its SyncBatchNorm statistics.

    Each layer of C channels sends its count, C means and C squared deviations, forward and back,
    in the model's dtype or float32, whichever is wider.
    """
    itemsize = max(4, next(model.parameters()).element_size())
    return sum(2 * (2 * module.num_features + 1) * itemsize
               for module in model.modules() if isinstance(module, _BatchNorm))
