"""A round's clients trained as cohorts (torch.func) end where the per-client loop ends, in float64."""

import dataclasses

import pytest
import torch

from fedsim.algorithms import Algorithm
from fedsim.algorithms.fedprox import Proximal
from fedsim.build import RunSetup
from fedsim.client.loss_scale import RoundLossScale
from fedsim.client.update import local_batches, local_step_count
from fedsim.config.run_config import RunConfig
from fedsim.data import Dataset, register_dataset
from fedsim.engines.inprocess import run
from fedsim.engines.inprocess.fedavg import InProcessFedAvgRounds
from fedsim.engines.inprocess.stacked_optim import stacked_optimizer
from fedsim.engines.inprocess.stacked_scaler import StackedLossScaler
from fedsim.engines.inprocess.vectorized import VectorizedClients, pad
from fedsim.models import register_model
from fedsim.client.optim import OptimizerConfig
from fedsim.client import training
from fedsim.client.training import LocalTraining

from .numerics import EXACT, assert_rows_close, relative_distance

# digits: 1,797 images; quantity skew over 30 clients gives shards of a few to a few hundred samples, so a
# cohort's clients take from 1 to 30 steps of B=10 and most end an epoch on a short batch
BASE = {"dataset": "digits", "model": "mlp", "dtype": "float64", "num_partitions": 30, "fraction": 0.5,
        "rounds": 2, "batch_size": 10, "lr": 0.1, "partition": "quantity", "alpha": 0.5, "min_partition_size": 0,
        "vectorize": True}
CASES = {
    "fedavg: unequal steps, short last batches": {},
    "momentum, weight decay, FedAvgM, feature noise, cohorts of 4": {
        "momentum": 0.9, "weight_decay": 0.01, "server_momentum": 0.5, "feature_noise": 0.2, "vectorize_chunk": 4},
    "FedProx over two epochs, held-out clients": {"mu": 0.1, "local_epochs": 2, "holdout_clients": 0.2,
                                                  "local_test_fraction": 0.2, "partition": "dirichlet",
                                                  "min_partition_size": 10},
    "SCAFFOLD, every client": {"strategy": "scaffold", "fraction": 1.0},
    "MOON: clients with and without a previous model in a cohort": {"strategy": "moon", "rounds": 3},
    # the 2NN above trains through batched products (stacked_mlp); a model of another kind through vmap
    "vmap: FedProx, momentum, weight decay": {"model": "test-module-mlp", "mu": 0.1, "momentum": 0.9,
                                              "weight_decay": 0.01},
    "vmap: SCAFFOLD with short batches": {"model": "test-module-mlp", "strategy": "scaffold"},
    "FedNova, stragglers and dropouts, FedAdam": {"strategy": "fednova", "local_epochs": 3, "stragglers": 0.5,
                                                 "client_dropout": 0.2, "server_optimizer": "adam", "server_lr": 0.01},
    "local steps, multi-label": {"dataset": "multi-mnist", "num_partitions": 12, "local_steps": 3,
                                 "local_epochs": 1, "dataset_options": {"num_train": 600, "num_test": 100}},
}


@register_model("test-module-mlp")
class ModuleMLP(torch.nn.Module):
    """The 2NN's layers in a module of its own: the cohort's forward goes through vmap."""

    def __init__(self, *, num_classes, in_channels, image_size, norm=None, se=False):
        super().__init__()
        self.hidden = torch.nn.Linear(in_channels * image_size ** 2, 64)
        self.out = torch.nn.Linear(64, num_classes)

    def forward(self, inputs):
        return self.out(torch.relu(self.hidden(inputs.flatten(1))))


@pytest.fixture
def cohorts(monkeypatch):
    """Record the size of every cohort `VectorizedClients` trains."""
    sizes = []
    train_cohort = VectorizedClients._train_cohort

    def counting(self, members, order, terms, weighted_sum, stats):
        train_cohort(self, members, order, terms, weighted_sum, stats)
        sizes.append(len(members))

    monkeypatch.setattr(VectorizedClients, "_train_cohort", counting)
    return sizes


def looped(config: RunConfig) -> RunConfig:
    """The same run with every client trained in turn."""
    return config.replace(vectorize=False, vectorize_chunk=RunConfig().vectorize_chunk)


@pytest.mark.numerics
@pytest.mark.parametrize("case", list(CASES))
def test_cohorts_end_where_the_loop_ends(tmp_path, cohorts, case):
    config = RunConfig(**{**BASE, **CASES[case]})
    vectorized = run(config, tmp_path / "vectorized")
    assert sum(cohorts) >= 8 and 0 not in cohorts  # the rounds' clients trained as cohorts, none fell back
    loop = run(looped(config), tmp_path / "loop")
    torch.testing.assert_close(vectorized.global_state, loop.global_state, **EXACT)
    assert_rows_close(vectorized.rows, loop.rows)
    assert vectorized.summary["client_training"].startswith("vectorized")
    assert loop.summary["client_training"] == "loop: `vectorize`=False"


@pytest.mark.numerics
def test_the_cases_change_the_model():
    """Each setting the cases vary acts, so that a cohort ignoring it would fail their comparison."""
    base = RunConfig(**BASE)
    final = run(base).global_state
    for settings in ({"mu": 0.1}, {"momentum": 0.9}, {"feature_noise": 0.2}):
        assert relative_distance(run(base.replace(**settings)).global_state, final) > 1e-6, settings
    three_epochs = base.replace(local_epochs=3)
    assert relative_distance(run(three_epochs.replace(stragglers=0.5)).global_state,
                             run(three_epochs).global_state) > 1e-6


def fedavg_rounds(config, optimizer=None) -> InProcessFedAvgRounds:
    setup = RunSetup.build(config)
    if optimizer is not None:  # a client optimizer the command line does not offer
        config = config.replace(vectorize=False)  # built for the loop, then switched to cohorts if asked
    rounds = InProcessFedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    if optimizer is not None:
        rounds.training = dataclasses.replace(rounds.training, optimizer=optimizer)
    return rounds


#: The stacked optimizers' settings that the loop's optimizers are compared with.
OPTIMIZERS = {"nesterov": OptimizerConfig(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
              "adam": OptimizerConfig(name="adam", lr=0.01, weight_decay=0.01),
              "adamw": OptimizerConfig(name="adamw", lr=0.01, weight_decay=0.1)}


@pytest.mark.numerics
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS.values()), ids=list(OPTIMIZERS))
def test_each_client_keeps_its_own_optimizer_state(optimizer):
    config = RunConfig(**BASE)
    cohort, loop = fedavg_rounds(config, optimizer), fedavg_rounds(config, optimizer)
    cohort.vectorized = VectorizedClients(cohort, chunk=7)
    for round_index in range(2):
        cohort.train_round(round_index)
        loop.train_round(round_index)
    torch.testing.assert_close(cohort.global_state, loop.global_state, **EXACT)
    assert relative_distance(cohort.global_state, fedavg_rounds(config).global_state) > 1e-3  # it trained


@register_dataset("test-crop-flip")
def crop_flip_images(*, root, download, seed):
    """Random 3x12x12 images of 4 classes, augmented by crops and flips as CIFAR is."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (300, 3, 12, 12), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 4, (300,), generator=generator)
    return Dataset("test-crop-flip", images[:240], labels[:240], images[240:], labels[240:], num_classes=4,
                   augmentation="crop-flip")


@pytest.mark.numerics
def test_each_client_draws_its_augmentation_from_its_own_stream(tmp_path):
    config = RunConfig(**{**BASE, "dataset": "test-crop-flip", "num_partitions": 8, "fraction": 1.0})
    torch.testing.assert_close(run(config).global_state, run(looped(config)).global_state, **EXACT)


def dropout_mlp(dropout):
    """A 2NN with dropout after each hidden layer, the second one used twice in a forward."""
    def build(*, num_classes, in_channels, image_size, norm=None, se=False):
        second = dropout(0.2)
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(in_channels * image_size ** 2, 32),
                                   torch.nn.ReLU(), dropout(0.3), torch.nn.Linear(32, 32), torch.nn.ReLU(), second,
                                   torch.nn.Linear(32, 32), second, torch.nn.Linear(32, num_classes))
    return build


class GaussianNoise(torch.nn.Module):
    """A user's layer that draws from the global stream in training: no cohort can draw it per client."""

    def forward(self, inputs):
        return inputs + 0.1 * torch.randn_like(inputs) if self.training else inputs


register_model("test-dropout-mlp")(dropout_mlp(torch.nn.Dropout))
register_model("test-noise-mlp")(dropout_mlp(lambda p: GaussianNoise()))
register_model("test-dropout2d-mlp")(dropout_mlp(torch.nn.Dropout1d))


def test_a_draw_outside_dropout_is_found_by_one_forward_that_leaves_the_random_state_and_modes_as_they_were():
    from fedsim.data import load_dataset
    from fedsim.engines.inprocess.random_draws import random_draws_outside_dropout

    data = load_dataset("digits")
    noisy = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(0.5), GaussianNoise(), torch.nn.Linear(64, 10))
    noisy.eval()
    state = torch.random.get_rng_state()
    assert random_draws_outside_dropout(noisy, data) == ["aten.randn_like"]
    assert torch.equal(torch.random.get_rng_state(), state)
    assert not any(module.training for module in noisy.modules())
    assert random_draws_outside_dropout(torch.nn.Sequential(*list(noisy)[:2], noisy[3]), data) == []


@pytest.mark.numerics
def test_each_client_draws_its_dropout_masks_from_its_own_stream(tmp_path, cohorts):
    config = RunConfig(**{**BASE, "model": "test-dropout-mlp"})
    cohort = run(config)
    assert sum(cohorts) >= 8
    torch.testing.assert_close(cohort.global_state, run(looped(config)).global_state, **EXACT)


def test_a_forward_that_draws_outside_dropout_falls_back_to_the_loop_or_is_refused_when_asked(tmp_path):
    # not fused: the one-step clients' fused forward would draw the noise from the unseeded global stream
    config = RunConfig(**{**BASE, "model": "test-noise-mlp", "vectorize": None, "fused": False})
    automatic = run(config)
    assert automatic.summary["client_training"].startswith(
        "loop: the model draws random numbers in its forward outside nn.Dropout (aten.randn_like)")
    torch.testing.assert_close(automatic.global_state, run(looped(config)).global_state, rtol=0, atol=0)
    with pytest.raises(ValueError, match="`vectorize`=True: the model draws random numbers in its forward"):
        run(config.replace(vectorize=True), tmp_path / "asked")


@pytest.mark.numerics
def test_a_cnn_runs_as_cohorts_when_asked_and_otherwise_in_the_loop(tmp_path):
    config = RunConfig(**{**BASE, "model": "cnn", "rounds": 1, "fraction": 0.2, "vectorize": None})
    automatic = run(config, tmp_path / "automatic")
    assert automatic.summary["client_training"].startswith("loop: on the CPU a convolution")
    asked = run(config.replace(vectorize=True), tmp_path / "asked")
    assert asked.summary["client_training"] == "vectorized, cohorts of up to 128 clients"
    assert asked.summary["vectorized_peak_mb"] > 0
    torch.testing.assert_close(asked.global_state, automatic.global_state, **EXACT)


class ProxByParity(Algorithm):
    """FedProx whose even clients have twice the odd ones' mu: a cohort of both has no common stacked form."""

    vectorizable = True  # Proximal.stacked, for a cohort whose clients share one mu

    def local_terms(self, client, global_state):
        return Proximal(global_state[: self.num_params], 0.2 if client % 2 == 0 else 0.1)


@pytest.mark.numerics
def test_a_cohort_whose_terms_have_no_stacked_form_is_left_to_the_loop_before_it_trains(tmp_path, cohorts):
    config = RunConfig(**{**BASE, "strategy": f"{__name__}:ProxByParity", "vectorize": None})
    automatic = run(config)
    assert cohorts == []  # no cohort began training
    assert automatic.summary["client_training"] == ("loop: proxbyparity's client terms have no stacked form for "
                                                    "this cohort (`LocalTerms.stacked`)")
    torch.testing.assert_close(automatic.global_state, run(looped(config)).global_state, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"`vectorize`=True: proxbyparity's client terms have no stacked form"):
        run(config.replace(vectorize=True), tmp_path / "asked")


@pytest.mark.numerics
def test_float32_cohorts_are_close_to_the_loop_as_a_whole():
    config = RunConfig(**{**BASE, "dtype": "float32"})
    assert relative_distance(run(config).global_state, run(looped(config)).global_state) < 1e-4


@pytest.mark.parametrize("settings, reason", [
    ({"model": "cnn", "norm": "batch"}, "BatchNorm updates its running statistics"),
    ({"model": "test-dropout2d-mlp"}, "Dropout1d drops whole channels"),
    ({"micro_batches": 2}, "`micro_batches` splits a step"),
    ({"amp": True, "dtype": "float32", "model": "test-module-mlp"}, "under AMP, torch.func's vmap(grad) does not "
                                                                     "compute the loop's mixed precision"),
])
def test_asking_for_cohorts_where_they_do_not_apply_is_refused_with_the_reason(settings, reason):
    config = RunConfig(**{**BASE, **settings})
    with pytest.raises(ValueError, match=r"`vectorize`=True: " + reason.replace("(", r"\(").replace(")", r"\)")):
        fedavg_rounds(config)
    unset = fedavg_rounds(config.replace(vectorize=None))  # left unset, the loop runs and says why
    assert unset.vectorized is None and str(unset.loop_reason).startswith(reason)


def test_other_engines_refuse_cohorts():
    from fedsim.engines.distributed.launch import check_world_size
    from fedsim.engines.flower import check_flower_config

    config = RunConfig(**BASE)
    for check, engine in ((lambda: check_flower_config(config), "the Flower engine"),
                          (lambda: check_world_size(config, 2), "fedsim ddp")):
        with pytest.raises(ValueError, match=f"`vectorize`=True trains a round's clients as cohorts in one process; "
                                             f"{engine} trains each client alone"):
            check()
    check_flower_config(config.replace(vectorize=None))


@pytest.mark.parametrize("settings, error", [
    ({"vectorize": "yes"}, "`vectorize` must be true, false or unset"),
    ({"vectorize_chunk": 0}, "`vectorize_chunk` must be"),
    ({"vectorize": False, "vectorize_chunk": 8}, "`vectorize_chunk`=8 does nothing with `vectorize`=False"),
])
def test_bad_settings_are_refused_naming_them(settings, error):
    with pytest.raises((ValueError, TypeError), match=error):
        RunConfig(**{**BASE, **settings})
    with pytest.raises(ValueError, match="`vectorize`=True does nothing with `strategy`='allreduce'"):
        RunConfig(dataset="digits", strategy="allreduce", vectorize=True)


@pytest.mark.parametrize("size, training", [
    (25, LocalTraining(batch_size=10)), (30, LocalTraining(batch_size=10, epochs=2)),
    (25, LocalTraining(batch_size=10, drop_last=True)), (7, LocalTraining(batch_size=10, drop_last=True)),
    (25, LocalTraining(batch_size=10, epochs=None, local_steps=4)),
])
def test_step_count_is_the_number_of_batches_the_client_draws(size, training):
    batches = list(local_batches(torch.arange(size), training, torch.Generator().manual_seed(0)))
    assert local_step_count(size, training) == len(batches)


def test_padding_repeats_the_first_entry():
    assert pad(torch.tensor([4, 5]), 4).tolist() == [4, 5, 4, 4]
    assert pad(torch.tensor([4, 5]), 2).tolist() == [4, 5]


def test_a_cohort_names_the_client_whose_loss_stopped_being_finite():
    from fedsim.interrupts import RunDiverged
    from fedsim.schedule import sample_clients

    from .test_divergence import NOT_FINITE_LOSS, OVERFLOW

    config = RunConfig(strategy=OVERFLOW, model="mlp", batch_size=20, num_partitions=4, fraction=0.5, rounds=8,
                       vectorize=True)
    with pytest.raises(RunDiverged) as diverged:
        run(config)
    assert diverged.value.round == 4
    sampled = {f"client {k}" for k in sample_clients(4, 0.5, config.seed, diverged.value.round - 1)}
    assert diverged.value.where in sampled and NOT_FINITE_LOSS.search(diverged.value.what)


@pytest.fixture(params=["bf16", "fp16"])
def amp_precision(request, monkeypatch):
    """AMP in bf16 (the CPU's), or in fp16 with each client's loss scale (CUDA's, run here on the CPU)."""
    if request.param == "fp16":
        monkeypatch.setitem(training.AMP_DTYPES, "cpu", torch.float16)
    return request.param


#: A first scale at which every fp16 gradient overflows, on any kernel (a logit's gradient alone is ~2^24/B, and
#: fp16 ends at 65504), and one back-off to 2^8, at which none comes near it: which steps are skipped is the
#: rule's, not the arithmetic's (a scale halved step by step meets the edge, where kernels decide).
FORCED_OVERFLOW = {"init_scale": 2.0**24, "backoff_factor": 2.0**-16, "growth_interval": 10**6}


def force_first_overflow(rounds: InProcessFedAvgRounds) -> InProcessFedAvgRounds:
    """Give ``rounds`` a round scale at which every client's first step overflows and no later step does."""
    rounds.loss_scale.scaler = torch.amp.GradScaler("cpu", **FORCED_OVERFLOW)
    return rounds


@pytest.mark.numerics
def test_under_amp_cohorts_train_as_the_loop_skipped_steps_included(amp_precision):
    # momentum and FedProx; in fp16 each client's first step of round 1 overflows and is skipped, in both
    config = RunConfig(**{**BASE, "dtype": "float32", "amp": True, "momentum": 0.9, "mu": 0.1})
    cohort, loop, float32 = fedavg_rounds(config), fedavg_rounds(looped(config)), fedavg_rounds(looped(config)
                                                                                               .replace(amp=False))
    assert cohort.vectorized is not None
    if amp_precision == "fp16":
        cohort, loop = force_first_overflow(cohort), force_first_overflow(loop)
    for round_index in range(2):
        for rounds in (cohort, loop, float32):
            rounds.train_round(round_index)
    # The rows differ where two kernels round half-precision sums apart, and how far is the kernels' choice: a
    # batched fp16 product and a plain one measured 0.02-0.04 of AMP's own effect under AVX2 and AVX-512 and 0.16
    # under ATen's plainest kernels. A cohort that lost AMP, or a step's skip, stands ~1 away or more.
    amp_effect = relative_distance(loop.global_state, float32.global_state)
    assert relative_distance(cohort.global_state, loop.global_state) < 0.5 * amp_effect
    if amp_precision == "fp16":  # one back-off from the first scale, no growth: the rule's scale, a power of two
        expected = FORCED_OVERFLOW["init_scale"] * FORCED_OVERFLOW["backoff_factor"]
        assert cohort.loss_scale.scaler.get_scale() == expected and loop.loss_scale.scaler.get_scale() == expected


def test_the_next_round_starts_from_the_smallest_scale_a_client_ended_with():
    scale = RoundLossScale(False, torch.device("cpu"))
    scale.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    scale.keep(2.0**10, 3)
    scale.keep(2.0**8, 1)
    scale.keep(2.0**11, 0)
    scale.settle()
    assert scale.scaler.get_scale() == 2.0**8 and scale.scaler.state_dict()["_growth_tracker"] == 1
    scale.settle()  # no client this round: the scale stays
    assert scale.scaler.get_scale() == 2.0**8


def test_a_client_starts_from_the_rounds_scale_whatever_the_client_before_it_met(monkeypatch):
    """fp16 in the loop: client 1's first step overflows and backs its scale off; client 2 starts from the round's."""
    monkeypatch.setitem(training.AMP_DTYPES, "cpu", torch.float16)
    config = RunConfig(dataset="digits", model="mlp", num_partitions=4, fraction=0.5, batch_size=10, amp=True,
                       vectorize=False)
    rounds = force_first_overflow(fedavg_rounds(config))
    starts, ends = [], []
    for_client = rounds.loss_scale.for_client

    def recorded():
        scaler = for_client()
        starts.append(scaler.get_scale())
        return scaler

    monkeypatch.setattr(rounds.loss_scale, "for_client", recorded)
    monkeypatch.setattr(rounds.loss_scale, "keep", lambda scale, growth_count: ends.append(scale))
    rounds.train_round(0)
    backed_off = FORCED_OVERFLOW["init_scale"] * FORCED_OVERFLOW["backoff_factor"]
    assert len(starts) == 2 and starts == [FORCED_OVERFLOW["init_scale"]] * 2
    assert ends == [backed_off] * 2  # each overflowed once, then trained


@pytest.mark.numerics
def test_under_amp_a_cohort_that_needs_vmap_falls_back_to_the_loop_or_is_refused_when_asked(tmp_path):
    # MOON's loss per sample (from round 1, with previous models) takes the vmap path even for the 2NN, and
    # vmap(grad) does not compute AMP's: round 0 trains as cohorts, round 1 in the loop
    config = RunConfig(**{**BASE, "strategy": "moon", "dtype": "float32", "amp": True, "vectorize": None})
    automatic = run(config)
    assert automatic.summary["client_training"].startswith("loop: under AMP, torch.func's vmap(grad) does not")
    loop = run(looped(config)).global_state
    amp_effect = relative_distance(loop, run(looped(config).replace(amp=False)).global_state)
    assert relative_distance(automatic.global_state, loop) < 0.1 * amp_effect
    with pytest.raises(ValueError, match="`vectorize`=True: under AMP, torch.func's vmap"):
        run(config.replace(vectorize=True), tmp_path / "asked")


@pytest.mark.numerics
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS.values()), ids=list(OPTIMIZERS))
def test_a_skipped_step_leaves_a_client_as_its_own_gradscaler_leaves_it(optimizer):
    """Stacked scales, skips and optimizer rows against one GradScaler and loop optimizer per client."""
    steps, broken = [6, 6, 4], {(0, 0), (1, 0), (2, 0), (1, 2), (0, 4), (2, 3)}  # (client, step): a non-finite gradient
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(5, 3, dtype=torch.float64, generator=generator)
    gradients = torch.randn(len(steps), max(steps), 5, 3, dtype=torch.float64, generator=generator)
    for client, step in broken:
        gradients[client, step, 2, 1] = float("inf")
    scaler_settings = {"init_scale": 2.0**10, "growth_interval": 2}

    stacks = [start.expand(len(steps), 5, 3).clone()]
    stacked_scales = StackedLossScaler(torch.amp.GradScaler("cpu", **scaler_settings), len(steps), start.device)
    stacked = stacked_optimizer(optimizer, stacks)
    for step in range(max(steps)):
        active = sum(count > step for count in steps)
        scaled = [gradients[:active, step] * stacked_scales.scales[:active, None, None].double()]
        skipped = stacked_scales.unscale(scaled)
        stacked.step([stacks[0][:active]], scaled, skipped)
        stacked_scales.update(skipped)

    for client, count in enumerate(steps):
        param = torch.nn.Parameter(start.clone())
        own = optimizer.build([param])
        scaler = torch.amp.GradScaler("cpu", **scaler_settings)
        scaler.scale(torch.ones((), dtype=torch.float64))  # its scale is made at the first scale()
        for step in range(count):
            param.grad = gradients[client, step] * scaler.get_scale()
            scaler.step(own)
            scaler.update()
        torch.testing.assert_close(stacks[0][client], param.detach(), **EXACT)
        assert stacked_scales.final()[client] == (scaler.get_scale(), scaler.state_dict()["_growth_tracker"])
