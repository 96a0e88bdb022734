"""Gradient compression: what a rank sends, what the ranks receive, and the bytes counted."""

import pytest
import torch

from fedsim.comm.compression import quantize_int8, simulate, wire_bytes
from fedsim.config.run_config import RunConfig


def gradients(seed, shapes=((30, 20), (20,))):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes]


def test_half_precision_receives_the_mean_within_half_precision_rounding():
    ranks = [gradients(0), gradients(1)]
    mean = [(a + b) / 2 for a, b in zip(*ranks)]
    for scheme, tolerance in (("fp16", 2e-3), ("bf16", 1.6e-2)):
        received = simulate(ranks, scheme, world_size=2)
        assert all(r.dtype == torch.float64 for r in received)
        for got, want in zip(received, mean):
            assert (got - want).abs().max() <= tolerance * want.abs().max()


def test_int8_is_within_half_a_step_per_rank_and_scales_weigh_the_ranks():
    ranks = [gradients(0), gradients(1)]
    scales = [0.5, 1.5]  # reweighted: w_r * K for weights 1/4, 3/4
    received = simulate(ranks, "int8", world_size=2, scales=scales)
    for got, a, b in zip(received, *ranks):
        want = (0.5 * a + 1.5 * b) / 2
        step = torch.maximum((0.5 * a).abs().max(), (1.5 * b).abs().max()) / 127
        assert (got - want).abs().max() <= step / 2 + 1e-12  # two ranks' rounding, each <= step / 2, averaged


def test_int8_quantization_uses_the_whole_range():
    tensor = torch.tensor([-2.0, 0.0, 1.0, 2.0])
    assert quantize_int8(tensor, torch.tensor(2.0 / 127)).tolist() == [-127, 0, 64, 127]


def test_wire_bytes_count_the_compressed_size():
    params = [torch.zeros(512, 3136), torch.zeros(512), torch.zeros(10, 512)]
    full = sum(p.numel() * 4 for p in params)
    assert wire_bytes(params, "none", steps_taken=5) == full
    assert wire_bytes(params, "fp16", steps_taken=5) == full // 2
    assert wire_bytes(params, "int8", steps_taken=5) == full // 4 + 3 * 4
    # PowerSGD: the first two steps travel whole; then the matrices as rank-2 factors, (rows + cols) * 2
    # elements each (both shrink more than twofold), and the bias whole.
    assert wire_bytes(params, "powersgd", steps_taken=1) == full
    assert wire_bytes(params, "powersgd", steps_taken=2) == ((512 + 3136) * 2 + 512 + (10 + 512) * 2) * 4


def test_compression_is_a_setting_of_the_gradient_strategies():
    with pytest.raises(ValueError, match="`compression`='int8' does nothing with `strategy`='fedavg'"):
        RunConfig(strategy="fedavg", compression="int8")
    with pytest.raises(ValueError, match="unknown `compression`='zip'; known: none, fp16"):
        RunConfig(strategy="allreduce", compression="zip")
    with pytest.raises(ValueError, match="`powersgd_rank`=4 does nothing without"):
        RunConfig(strategy="allreduce", powersgd_rank=4)
