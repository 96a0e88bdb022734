"""The in-process engine's promises: the strategies are one algorithm in three settings.

Every equivalence runs in float64 (``dtype="float64"``), where two summation orders agree to
~1e-16 per operation and a handful of steps stays far below `EXACT`. In float32 the same
comparisons would depend on the CPU's kernels: one ReLU pre-activation near zero flips sign
between two summation orders and moves single gradient elements by 10% (DESIGN "Numerics").
"""

import numpy as np
import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.schedule import SampleGrid
from fedsim.engines.inprocess.gradient import InProcessGradientRounds
from fedsim.build import build_model
from fedsim.schedule import sample_clients
from fedsim.client.tasks import create_task
from fedsim.client.training import training_batch
from partitions import Partition, dirichlet, iid

from .numerics import EXACT, relative_distance

pytestmark = pytest.mark.numerics

SMALL = {"model": "mlp", "rounds": 3, "lr": 0.1, "num_partitions": 10, "eval_every": 3, "dtype": "float64"}


def final_state(mnist5k, partition, grid=None, **settings):
    return run(RunConfig(**{**SMALL, **settings}), data=mnist5k, partition=partition, grid=grid).global_state


# rounds a fifth of an epoch long, on FedAvg's grid with C = 0.2, to keep the tests quick
FIFTH = SampleGrid(fraction=0.2, batch_size=10)


@pytest.fixture(scope="module")
def equal_shards(mnist5k):
    return iid(mnist5k.train_labels.numpy(), 10, seed=0)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_fedavg_with_one_local_step_equals_allreduce(mnist5k, equal_shards, momentum):
    """tau = 1, plain client SGD, equal weights: FedAvg's arithmetic is allreduce's (server momentum ~ momentum)."""
    full_batch = int(equal_shards.sizes.max())  # every step uses each shard whole: batch order cannot matter
    allreduce = final_state(mnist5k, equal_shards, strategy="allreduce", batch_size=full_batch, momentum=momentum)
    fedavg = final_state(mnist5k, equal_shards, strategy="fedavg", batch_size=full_batch, local_steps=1,
                         weights="equal", server_momentum=momentum)
    torch.testing.assert_close(fedavg, allreduce, **EXACT)


def test_reweighted_with_equal_weights_equals_allreduce(mnist5k, equal_shards):
    allreduce = final_state(mnist5k, equal_shards, strategy="allreduce", batch_size=20)
    for weights in ("equal", "size"):  # equal shards: size weights are 1/K
        reweighted = final_state(mnist5k, equal_shards, strategy="reweighted", weights=weights, batch_size=20)
        torch.testing.assert_close(reweighted, allreduce, **EXACT)


def test_class_balanced_weights_on_globally_balanced_shards_equal_allreduce(mnist5k):
    labels = mnist5k.train_labels.numpy()
    # every shard holds 40 of each class: p_k = p_global, all importance weights are 1
    by_class = [np.flatnonzero(labels == c) for c in range(10)]
    balanced = Partition([np.concatenate([idx[40 * k : 40 * (k + 1)] for idx in by_class]) for k in range(10)],
                         num_samples=labels.size, scheme="manual")
    allreduce = final_state(mnist5k, balanced, strategy="allreduce", batch_size=20)
    reweighted = final_state(mnist5k, balanced, strategy="reweighted", weights="class-balanced", batch_size=20)
    torch.testing.assert_close(reweighted, allreduce, **EXACT)


@pytest.mark.parametrize(
    "settings",
    [
        {"strategy": "allreduce"},
        {"strategy": "allreduce", "uneven": "cycle"},
        {"strategy": "reweighted", "weights": "size"},
        {"strategy": "reweighted", "weights": "class-balanced"},
        {"strategy": "reweighted", "weights": "dynamic", "dynamic_rule": "loss", "temperature": 0.5},
    ],
    ids=lambda s: "-".join(map(str, s.values())),
)
def test_fused_forward_equals_per_rank_loop(mnist5k, settings):
    uneven = dirichlet(mnist5k.train_labels.numpy(), 10, 0.3, seed=1)
    options = {**settings, "rounds": 2, "batch_size": 10, "grid": FIFTH}
    fused = final_state(mnist5k, uneven, fused=True, **options)
    looped = final_state(mnist5k, uneven, fused=False, **options)
    torch.testing.assert_close(fused, looped, **EXACT)


def test_float32_fused_forward_is_close_to_the_loop_as_a_whole(mnist5k):
    """The float32 default agrees with float64 semantics in norm, not element by element.

    A ReLU kink can move single elements of one step's float32 gradient by 10%, but only a few
    elements of one step, so the whole model after two rounds moves by far less: ~5e-8 of its
    norm was seen on AVX-512 and default kernels, 3.0e-4 under AVX2's (one kink more). 2e-3 leaves
    room for kinks and kernel choice, and stays well below a real difference (a wrong weight or a
    missing rank moves the model by more than 1e-2 of its norm).
    """
    uneven = dirichlet(mnist5k.train_labels.numpy(), 10, 0.3, seed=1)
    options = {"strategy": "reweighted", "weights": "size", "rounds": 2, "batch_size": 10, "grid": FIFTH,
               "dtype": "float32"}
    fused = final_state(mnist5k, uneven, fused=True, **options)
    looped = final_state(mnist5k, uneven, fused=False, **options)
    assert relative_distance(fused, looped) < 2e-3


@pytest.mark.parametrize("equal, uneven, authority", [(True, "join", 0), (True, "cycle", 0), (False, "join", 9)])
def test_batchnorm_models_keep_per_rank_statistics(mnist5k, equal_shards, equal, uneven, authority):
    shards = equal_shards if equal else dirichlet(mnist5k.train_labels.numpy(), 10, 0.3, seed=1)
    config = RunConfig(strategy="allreduce", model="cnn", norm="batch", uneven=uneven, dtype="float64")

    def running_mean_after(ranks):
        model = build_model(config, mnist5k, torch.device("cpu"))
        rounds = InProcessGradientRounds(config, model, mnist5k, create_task(10), shards)
        assert not rounds.fused  # a fused forward would pool the batch statistics of all ranks
        rounds.step(rounds.schedule.batches(0), ranks)
        return next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)).running_mean

    # Each rank updates the broadcast statistics; the authoritative rank's update survives, as in
    # DDP: the highest active rank when some rank sits out (Join), rank 0 otherwise.
    torch.testing.assert_close(running_mean_after(list(range(10))), running_mean_after([authority]))


def test_join_divides_by_all_ranks(mnist5k):
    """A rank that has run out adds nothing, and the others are not scaled up (DDP Join semantics)."""
    config = RunConfig(strategy="allreduce", model="mlp", batch_size=10, dtype="float64")
    shards = iid(mnist5k.train_labels.numpy(), 2, seed=0)
    model = build_model(config, mnist5k, torch.device("cpu"))
    rounds = InProcessGradientRounds(config, model, mnist5k, create_task(10), shards)
    batches = rounds.schedule.batches(0)
    rounds.step(batches, [0])
    half = [p.grad.clone() for p in rounds.params]
    rounds.step([batches[0], None], [0])
    torch.testing.assert_close([p.grad for p in rounds.params], half, **EXACT)
    rounds.fused = False
    rounds.step([batches[0], None], [0])
    torch.testing.assert_close([p.grad for p in rounds.params], half, **EXACT)
    assert_alone_is_half(rounds, model, mnist5k, batches[0], half)


def assert_alone_is_half(rounds, model, data, batch, combined):
    """``combined`` must be rank 0's plain mean-loss gradient divided by K = 2."""
    model.zero_grad()
    inputs, targets = training_batch(data, batch, rounds.generator(0), 0.0, rounds.device, rounds.dtype)
    create_task(10).loss(model(inputs), targets).mean().backward()
    torch.testing.assert_close([p.grad / 2 for p in rounds.params], combined, **EXACT)


@pytest.mark.parametrize("strategy", ["allreduce", "fedavg"])
def test_feature_noise_skew_spares_partition_zero_only(mnist5k, equal_shards, strategy):
    clean = final_state(mnist5k, equal_shards, strategy=strategy, rounds=1, batch_size=50)
    noisy = final_state(mnist5k, equal_shards, strategy=strategy, rounds=1, batch_size=50, feature_noise=0.5)
    assert not torch.equal(clean[0], noisy[0])
    one_rank = Partition([equal_shards.shard(0)], num_samples=equal_shards.num_samples, scheme="manual")
    # with a single partition its level is 0: nothing changes
    torch.testing.assert_close(
        final_state(mnist5k, one_rank, strategy=strategy, rounds=1, batch_size=50, num_partitions=1),
        final_state(mnist5k, one_rank, strategy=strategy, rounds=1, batch_size=50, num_partitions=1,
                    feature_noise=0.5),
        rtol=0, atol=0,
    )


def test_dynamic_weights_also_divide_by_all_ranks_under_join(mnist5k):
    config = RunConfig(strategy="reweighted", weights="dynamic", model="mlp", batch_size=10, dtype="float64")
    shards = iid(mnist5k.train_labels.numpy(), 2, seed=0)
    model = build_model(config, mnist5k, torch.device("cpu"))
    rounds = InProcessGradientRounds(config, model, mnist5k, create_task(10), shards)
    batch = rounds.schedule.batches(0)[0]
    rounds.step([batch, None], [0])
    assert_alone_is_half(rounds, model, mnist5k, batch, [p.grad.clone() for p in rounds.params])


def test_a_round_whose_sampled_clients_are_all_empty_leaves_the_model(mnist5k):
    holder = int(sample_clients(4, 0.25, seed=0, round_index=0)[0])  # the one client with data
    shards = [np.arange(40) if k == holder else [] for k in range(4)]
    lonely = Partition(shards, num_samples=mnist5k.train_images.shape[0], scheme="manual")
    config = {"strategy": "fedavg", "weights": "equal", "fraction": 0.25, "rounds": 8, "server_momentum": 0.9,
              "num_partitions": 4, "batch_size": 10, "eval_every": 1}
    result = run(RunConfig(**{**SMALL, **config}), data=mnist5k, partition=lonely)
    sampled = [holder in sample_clients(4, 0.25, seed=0, round_index=r) for r in range(8)]
    assert any(sampled) and not all(sampled)
    for before, row, has_data in zip([None, *result.rows], result.rows, sampled):
        if before is not None and not has_data:  # an empty cohort: no samples, no change, no momentum drift
            assert row["samples_seen"] == before["samples_seen"] and row["test_loss"] == before["test_loss"]


def test_local_steps_keep_allreduce_on_fedavgs_grid(mnist5k):
    uneven = Partition([np.arange(15), np.arange(15, 40)], num_samples=mnist5k.train_images.shape[0], scheme="manual")
    fedavg = RunConfig(**{**SMALL, "local_steps": 2, "batch_size": 10, "rounds": 3, "num_partitions": 2})
    grid = SampleGrid.from_config(fedavg)  # as `compare` gives every strategy
    seen = {config.strategy: [row["samples_seen"] for row in run(config, data=mnist5k, partition=uneven, grid=grid).rows]
            for config in (fedavg, fedavg.for_strategy("allreduce"))}
    assert seen["fedavg"] == [35, 70, 105]  # 2 steps: 10 + 5 samples from the first shard, 10 + 10 from the second
    assert all(abs(a - b) < 2 * 10 for a, b in zip(seen["fedavg"], seen["allreduce"]))


def test_micro_batches_equal_one_batch_for_the_gradient_strategies(mnist5k, equal_shards):
    """Gradient accumulation over micro-batches is the whole batch's gradient (no BatchNorm, no dropout)."""
    options = {"strategy": "reweighted", "weights": "size", "batch_size": 20, "rounds": 1, "grid": FIFTH}
    whole = final_state(mnist5k, equal_shards, **options)
    accumulated = final_state(mnist5k, equal_shards, micro_batches=3, **options)
    torch.testing.assert_close(accumulated, whole, **EXACT)
