"""Gradient compression of allreduce and reweighted: what each rank sends, and what it costs on the wire.

=============  ==========================================================================
``none``       the gradient as it is
``fp16``       PyTorch's ``fp16_compress_hook``: each rank sends ``fp16(g) / K``, summed in fp16
``bf16``       the same in bfloat16 (``bf16_compress_hook``)
``int8``       `fedsim.comm.hooks.int8_compress_hook`: each gradient tensor quantized to 8 bits with a
               scale shared by all ranks (the largest magnitude over the ranks / 127), all-gathered
``powersgd``   PyTorch's ``powerSGD_hook`` (Vogels et al., NeurIPS 2019), rank ``powersgd_rank``,
               with error feedback; on ``fedsim ddp`` only
=============  ==========================================================================

Each scheme averages over the K ranks, as DDP does; reweighted scales rank r's gradient by
``w_r * K`` first (`fedsim.comm.hooks.weighted`), so the ranks still receive ``sum_r w_r g_r``, compressed.
The in-process engine applies the same functions to its ranks' gradients, so with 2 ranks the two
engines agree exactly; with more, the order in which the all-reduce adds the compressed values
may differ by a rounding.
"""

from __future__ import annotations

import torch

from ..checks import SettingError
from ..config.validation import COMPRESSIONS

__all__ = ["COMPRESSIONS", "check_in_process", "dequantize_mean", "int8_scale", "quantize_int8", "simulate", "wire_bytes"]
HALF_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
INT8_LEVELS = 127
# PowerSGD's settings beyond its rank: vanilla all-reduce for the first two steps (its minimum
# with error feedback), and only tensors it can shrink at least twofold are compressed.
POWERSGD_START_STEP = 2
POWERSGD_MIN_COMPRESSION_RATE = 2


def int8_scale(largest: torch.Tensor) -> torch.Tensor:
    """Return the quantization step of a tensor whose largest magnitude over all ranks is ``largest``."""
    return torch.where(largest > 0, largest / INT8_LEVELS, torch.ones_like(largest))


def quantize_int8(tensor: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Return ``round(tensor / scale)`` as int8 (it lies in [-127, 127] by the choice of ``scale``)."""
    return torch.round(tensor / scale).clamp_(-INT8_LEVELS, INT8_LEVELS).to(torch.int8)


def dequantize_mean(quantized_sum: torch.Tensor, scale: torch.Tensor, world_size: int, dtype) -> torch.Tensor:
    """Return the mean over ``world_size`` ranks from the sum of their quantized tensors."""
    return quantized_sum.to(dtype) * scale / world_size


def check_in_process(scheme: str) -> str:
    """Return ``scheme`` if the in-process engine can apply it; refuse PowerSGD, which lives in DDP's buckets."""
    if scheme == "powersgd":
        raise SettingError("{compression} runs on `fedsim ddp` only: its random projections and error feedback live "
                           "in DDP's gradient buckets; use fp16, bf16 or int8 in-process", compression=scheme)
    return scheme


def simulate(gradients: list[list[torch.Tensor]], scheme: str, world_size: int, scales=None) -> list[torch.Tensor]:
    """Return what the ranks receive when ``gradients`` (one list of tensors per active rank) go through ``scheme``.

    The in-process engine's stand-in for the DDP hooks: the same casts and quantization, the
    sum over ranks in rank order.

    Parameters
    ----------
    gradients : list of list of Tensor
        Each active rank's gradient, tensor by tensor.
    scheme : {"none", "fp16", "bf16", "int8"}
    world_size : int
        K, which the hooks divide by (joined ranks send zeros and count).
    scales : list of float, optional
        Each rank's factor ``w_r * K`` (reweighted); ``None`` for allreduce.
    """
    check_in_process(scheme)
    if scales is not None:
        gradients = [[g * scale for g in gradient] for gradient, scale in zip(gradients, scales)]
    combined = []
    for tensors in zip(*gradients):
        dtype = tensors[0].dtype
        if scheme in HALF_DTYPES:
            sent = [t.to(HALF_DTYPES[scheme]).div_(world_size) for t in tensors]
            total = sent[0].clone()
            for part in sent[1:]:
                total.add_(part)
            combined.append(total.to(dtype))
        elif scheme == "int8":
            scale = int8_scale(torch.stack([t.abs().max() for t in tensors]).max())
            quantized_sum = sum(quantize_int8(t, scale).to(torch.int32) for t in tensors)
            combined.append(dequantize_mean(quantized_sum, scale, world_size, dtype))
        else:
            raise SettingError("unknown {compression}; known: {known:text}", compression=scheme,
                               known=", ".join(COMPRESSIONS))
    return combined


def wire_bytes(params: list[torch.Tensor], scheme: str, steps_taken: int, powersgd_rank: int = 2) -> int:
    """Return the bytes one rank sends for one gradient under ``scheme``, after ``steps_taken`` steps with it.

    ``int8`` adds one scale per tensor (and each rank receives the K - 1 others' int8 tensors,
    an all-gather); PowerSGD sends its factors P and Q for the matrices it compresses and the
    other tensors whole, after its first `POWERSGD_START_STEP` steps.
    """
    if scheme == "none" or (scheme == "powersgd" and steps_taken < POWERSGD_START_STEP):
        return sum(p.numel() * p.element_size() for p in params)
    if scheme in HALF_DTYPES:
        return sum(p.numel() * 2 for p in params)
    if scheme == "int8":
        return sum(p.numel() + p.element_size() for p in params)
    total = 0
    for p in params:  # PowerSGD's own rule (``_should_compress``) on each tensor seen as rows x the rest
        rows = p.shape[0] if p.dim() else 1
        cols = p.numel() // rows
        factors = (rows + cols) * min(rows, cols, powersgd_rank)
        total += (factors if factors * POWERSGD_MIN_COMPRESSION_RATE < rows * cols else p.numel()) * p.element_size()
    return total
