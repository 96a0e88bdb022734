"""SyncBatchNorm as an option of allreduce and reweighted: where it runs and where it is refused.

The multi-process checks (the layer against BatchNorm of the concatenated batches, and the two
engines agreeing) are in test_distributed.py.
"""

import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.models import create_model
from fedsim.comm.sync_batchnorm import SyncBatchNorm, convert_sync_batchnorm, sync_bn_bytes

DIGITS = {"dataset": "digits", "num_partitions": 2, "partition": "dirichlet", "alpha": 0.3, "rounds": 1,
          "batch_size": 20, "dtype": "float64"}
SYNC = {**DIGITS, "strategy": "allreduce", "model": "cnn", "norm": "batch", "sync_bn": True, "uneven": "cycle"}


def test_conversion_keeps_the_tensors_and_outside_a_process_group_is_batchnorm():
    model = create_model("resnet18", num_classes=10, in_channels=3, image_size=32)
    tensors = {name: tensor for name, tensor in model.state_dict(keep_vars=True).items()}
    reference = create_model("resnet18", num_classes=10, in_channels=3, image_size=32)
    reference.load_state_dict(model.state_dict())
    assert convert_sync_batchnorm(model) is model
    assert all(module.__class__ is not torch.nn.BatchNorm2d for module in model.modules())
    assert sum(isinstance(module, SyncBatchNorm) for module in model.modules()) == 20
    assert all(model.state_dict(keep_vars=True)[name] is tensor for name, tensor in tensors.items())
    images = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model(images), reference(images), rtol=0, atol=0)


def test_statistics_bytes_count_every_layer_forward_and_back():
    model = create_model("cnn", num_classes=10, in_channels=1, image_size=28, norm="batch").double()
    assert sync_bn_bytes(model) == 2 * (2 * 32 + 1) * 8 + 2 * (2 * 64 + 1) * 8


def test_sync_bn_changes_the_run_and_counts_its_bytes():
    synced, per_rank = run(RunConfig(**SYNC)), run(RunConfig(**{**SYNC, "sync_bn": False}))
    assert not all(torch.equal(a, b) for a, b in zip(synced.global_state, per_rank.global_state))
    extra = synced.rows[-1]["bytes_up"] - per_rank.rows[-1]["bytes_up"]
    model = create_model("cnn", num_classes=10, in_channels=1, image_size=8, norm="batch").double()
    assert extra > 0 and extra % sync_bn_bytes(model) == 0


@pytest.mark.parametrize("settings, message", [
    ({"norm": "group"}, "needs a model with BatchNorm layers"),
    ({"uneven": "join"}, "some rank sits out steps"),
    ({"compression": "fp16"}, "runs on `fedsim ddp` only"),
])
def test_the_in_process_engine_refuses_what_sync_bn_cannot_run(settings, message):
    with pytest.raises(ValueError, match=message):
        run(RunConfig(**{**SYNC, **settings}))


@pytest.mark.parametrize("settings, message", [
    ({"strategy": "fedavg"}, "`sync_bn`=True does nothing with `strategy`='fedavg'"),
    ({"strategy": "reweighted", "weights": "dynamic", "dynamic_rule": "cosine"}, "no per-rank gradient to score"),
    ({"strategy": "reweighted", "weights": "dynamic", "micro_batches": 2}, "`micro_batches` must be 1, got 2"),
])
def test_the_config_refuses_sync_bn_where_it_means_nothing(settings, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**{**SYNC, "uneven": "join", **settings})
