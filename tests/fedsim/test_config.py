"""RunConfig: settings a strategy does not read are refused, switching strategies resets them, dtype, #C=k."""

import dataclasses
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import partitions
from fedsim import checks
from fedsim.config.comparison import comparison_configs
from fedsim.config.run_config import RunConfig
from fedsim.config.validation import DTYPES
from fedsim.models import create_model
from fedsim.config.partitioning import make_partition, partition_for
from fedsim.config.strategies import SETTINGS, get_strategy, list_strategies

# One setting each strategy-specific field can take away from its default, and a strategy that does not read it.
UNREAD = [
    ("fraction", 0.5, "allreduce"),
    ("local_epochs", 2, "reweighted"),
    ("local_steps", 3, "allreduce"),
    ("mu", 5.0, "allreduce"),
    ("moon_mu", 5.0, "fedavg"),
    ("moon_temperature", 0.1, "scaffold"),
    ("server_lr", 0.5, "reweighted"),
    ("server_momentum", 0.9, "allreduce"),
    ("server_optimizer", "yogi", "allreduce"),
    ("server_beta1", 0.5, "reweighted"),
    ("server_beta2", 0.5, "allreduce"),
    ("server_tau", 0.1, "allreduce"),
    ("uneven", "cycle", "fedavg"),
    ("fused", False, "scaffold"),
    ("dynamic_rule", "cosine", "fedavg"),
    ("temperature", 0.5, "allreduce"),
    ("compression", "int8", "fedavg"),
    ("powersgd_rank", 3, "fedavg"),
    ("sync_bn", True, "fedavg"),
    ("client_state_memory", 64.0, "reweighted"),
    ("client_dropout", 0.2, "allreduce"),
    ("stragglers", 0.5, "reweighted"),
    ("vectorize", True, "allreduce"),
    ("vectorize_chunk", 8, "reweighted"),
    ("client_sampling", "poisson", "allreduce"),
    ("dp_clip", 1.0, "allreduce"),
    ("dp_noise", 1.0, "reweighted"),
    ("dp_target_epsilon", 8.0, "allreduce"),
    ("dp_delta", 1e-6, "reweighted"),
    ("dp_accountant", "pld", "allreduce"),
    ("dp_adaptive_quantile", 0.5, "reweighted"),
    ("dp_clip_lr", 0.1, "allreduce"),
    ("dp_count_noise", 2.0, "reweighted"),
    ("client_speed", "lognormal:0,1", "allreduce"),
    ("bandwidth", "constant:10", "reweighted"),
    ("sample_seconds", 0.01, "allreduce"),
    ("round_deadline", 5.0, "reweighted"),
    ("over_select", 0.3, "allreduce"),
    ("asynchronous", "fedbuff", "reweighted"),
    ("buffer", 4, "allreduce"),
    ("concurrency", 8, "reweighted"),
    ("staleness", "constant", "allreduce"),
    ("async_alpha", 0.5, "reweighted"),
]


def test_every_strategy_specific_setting_has_a_case():
    assert sorted(field for field, _, _ in UNREAD) == sorted(SETTINGS)


@pytest.mark.parametrize("field, value, strategy", UNREAD, ids=[case[0] for case in UNREAD])
def test_a_setting_the_strategy_does_not_read_is_refused_naming_both(field, value, strategy):
    with pytest.raises(ValueError, match=rf"`{field}`={value!r} does nothing with `strategy`={strategy!r} "
                                         r"\(it is .*\); remove it or use `strategy`="):
        RunConfig(strategy=strategy, **{field: value})


@pytest.mark.parametrize("field", ["dynamic_rule", "temperature"])
def test_dynamic_settings_need_the_dynamic_rule(field):
    value = {"dynamic_rule": "cosine", "temperature": 0.5}[field]
    with pytest.raises(ValueError, match=rf"`{field}`={value!r} does nothing with `weights`='size' .*"
                                         r"use `weights`='dynamic'"):
        RunConfig(strategy="reweighted", **{field: value})
    assert getattr(RunConfig(strategy="reweighted", weights="dynamic", **{field: value}), field) == value


@pytest.mark.parametrize("strategy", list_strategies())
def test_settings_at_their_defaults_are_accepted_by_every_strategy(strategy):
    defaults = {field.name: field.default for field in dataclasses.fields(RunConfig) if field.name in SETTINGS}
    assert sorted(defaults) == sorted(SETTINGS)
    assert RunConfig(strategy=strategy, **defaults) == RunConfig(strategy=strategy)
    # a default spelled as another type of the same number (1 for 1.0) is the default too
    spelled = RunConfig(strategy=strategy, fraction=1, mu=0, temperature=1)
    assert spelled == RunConfig(strategy=strategy) and type(spelled.fraction) is float


def test_the_weights_check_still_names_the_rule_and_the_strategy():
    with pytest.raises(ValueError, match="`weights`='dynamic' does not apply to `strategy`='fedavg'"):
        RunConfig(strategy="fedavg", weights="dynamic")


#: The strategies that run as themselves (fedadam and the like run fedavg with their settings).
BASES = [name for name in list_strategies() if not get_strategy(name).named_settings]


@pytest.mark.parametrize("source", BASES)
@pytest.mark.parametrize("target", BASES)
def test_for_strategy_resets_what_the_target_does_not_read(source, target):
    own = {"fedavg": {"fraction": 0.5, "mu": 0.1, "local_steps": 2, "weights": "equal"},
           "allreduce": {"uneven": "cycle", "fused": False},
           "reweighted": {"uneven": "cycle", "weights": "dynamic", "temperature": 0.5},
           "scaffold": {"fraction": 0.5, "server_lr": 0.5},
           "fednova": {"local_steps": 2, "server_optimizer": "adam"},
           "moon": {"moon_mu": 5.0, "moon_temperature": 0.1, "weights": "equal"}}
    config = RunConfig(strategy=source, lr=0.2, num_partitions=4, **own[source])
    switched = config.for_strategy(target)
    assert (switched.strategy, switched.lr, switched.num_partitions) == (target, 0.2, 4)
    assert switched.weights == RunConfig(strategy=target).weights
    defaults = RunConfig(strategy=target)
    for field in SETTINGS:
        kept = get_strategy(target).reads(field, switched.weights)
        assert getattr(switched, field) == (getattr(config, field) if kept else getattr(defaults, field))
    if source == "reweighted":  # the dynamic rule's temperature goes with the rule
        assert switched.temperature == 1.0


@pytest.mark.parametrize(
    "weights, target, expected",
    [("equal", "reweighted", "equal"), ("equal", "allreduce", "equal"), ("size", "reweighted", "size"),
     ("size", "allreduce", "equal")],
)
def test_for_strategy_keeps_weights_only_where_the_rule_applies(weights, target, expected):
    config = RunConfig(strategy="fedavg", weights=weights)
    assert config.for_strategy(target, keep_weights=True).weights == expected
    assert config.for_strategy(target).weights == RunConfig(strategy=target).weights


def test_for_strategy_keeps_the_dynamic_settings_with_the_dynamic_rule():
    config = RunConfig(strategy="reweighted", weights="dynamic", temperature=0.5, uneven="cycle")
    kept = config.replace(rounds=3).for_strategy("reweighted", keep_weights=True)
    assert (kept.weights, kept.temperature, kept.uneven) == ("dynamic", 0.5, "cycle")
    assert config.for_strategy("fedavg", keep_weights=True).temperature == 1.0


def test_replace_switches_strategy_through_for_strategy():
    config = RunConfig(strategy="fedavg", fraction=0.5, mu=0.1)
    assert config.replace(strategy="allreduce") == config.for_strategy("allreduce")
    with pytest.raises(ValueError, match="`mu`=0.2 does nothing with `strategy`='allreduce'"):
        config.replace(strategy="allreduce", mu=0.2)


def test_comparison_configs_gives_each_setting_to_the_strategies_that_read_it():
    configs = comparison_configs({"fraction": 0.5, "uneven": "cycle", "lr": 0.2, "weights": "equal"},
                                       ["allreduce", "reweighted", "fedavg"])
    assert list(configs) == ["allreduce", "reweighted", "fedavg"]
    assert [(c.fraction, c.uneven, c.lr, c.weights) for c in configs.values()] == [
        (1.0, "cycle", 0.2, "equal"), (1.0, "cycle", 0.2, "equal"), (0.5, "join", 0.2, "equal")]


@pytest.mark.parametrize(
    "settings, strategies, match",
    [
        ({"strategy": "reweighted"}, ["fedavg"], "`strategy`='reweighted' does not apply to a comparison.*`strategies`"),
        ({"weights": "dynamic"}, ["reweighted", "fedavg"], "`weights`='dynamic' does not apply to 'fedavg'"),
        ({"weights": "class-balanced"}, ["allreduce", "fedavg"], "`weights`='class-balanced' does not apply to 'fedavg'"),
        ({"mu": 0.1}, ["allreduce", "reweighted"], "`mu`=0.1 does nothing with `strategies`='allreduce,reweighted'"
                                                   ".*add 'fedavg' to `strategies`"),
        ({"temperature": 0.5}, ["reweighted"], "`temperature`=0.5 does nothing with `weights`='size'"),
        ({}, [], "`strategies` is empty"),
        ({}, ["fedavg", "fedsgd"], "unknown strategy 'fedsgd' in `strategies`"),
        ({}, ["fedavg", "fedavg"], "`strategies` names 'fedavg' twice"),
        ({"learning_rate": 0.1}, ["fedavg"], "unknown key 'learning_rate'"),
    ],
)
def test_comparison_configs_refuses(settings, strategies, match):
    with pytest.raises(ValueError, match=match):
        comparison_configs(settings, strategies)


def test_dtype_choices_and_torch_dtype():
    assert DTYPES == ("float32", "float64") and RunConfig().dtype == "float32"
    assert RunConfig(dtype="float64").torch_dtype is torch.float64
    assert RunConfig().torch_dtype is torch.float32
    with pytest.raises(ValueError, match="unknown `dtype`='float16'; known: float32, float64"):
        RunConfig(dtype="float16")


def test_config_module_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from fedsim.config.run_config import RunConfig\n"
            "print(RunConfig(dtype='float64').dtype)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "float64"


def test_class_assignment_defaults():
    assert RunConfig().class_assignment_mode == "first-deterministic"
    assert inspect.signature(make_partition).parameters["class_assignment_mode"].default == "first-deterministic"
    assert inspect.signature(partitions.pathological).parameters["class_assignment_mode"].default == "random"


@pytest.mark.parametrize("seed", range(20))
def test_default_c_equals_k_holds_every_class_with_as_many_clients_as_classes(seed):
    labels = np.repeat(np.arange(10), 30)
    config = RunConfig(partition="pathological", num_partitions=10, classes_per_partition=2, seed=seed)
    counts = partition_for(config, labels).counts(labels)
    assert (counts > 0).any(axis=0).all()
    assert ((counts > 0).sum(axis=1) == 2).all()


def test_fedsim_checks_are_the_partitions_checks():
    from partitions import _checks

    assert (checks.check_integer, checks.check_number, checks.check_choice) == (
        _checks.check_integer, _checks.check_number, _checks.check_choice)


def test_numpy_scalars_are_valid_settings_and_model_sizes():
    config = RunConfig(rounds=np.int64(2), num_partitions=np.int64(4), seed=np.int64(1), lr=np.float32(0.5))
    assert (type(config.rounds), type(config.lr)) == (int, float)
    assert json.loads(json.dumps(config.to_dict()))["rounds"] == 2  # config.json takes it as it is
    model = create_model("mlp", num_classes=np.int64(10), in_channels=np.int64(1), image_size=np.int64(28))
    plain = create_model("mlp", num_classes=10, in_channels=1, image_size=28)
    assert [p.shape for p in model.parameters()] == [p.shape for p in plain.parameters()]
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_micro_batches_reach_the_clients_and_may_not_outnumber_the_samples():
    from fedsim.client.training import LocalTraining

    assert LocalTraining.from_config(RunConfig(micro_batches=2)).micro_batches == 2
    with pytest.raises(ValueError, match="`micro_batches`=11 must be at most `batch_size`=10"):
        RunConfig(micro_batches=11)


@pytest.mark.parametrize("name, settings, label", [
    ("fedprox", {"mu": 0.01}, "fedprox"),
    ("fedavgm", {"server_momentum": 0.9}, "fedavgm"),
    ("fedadagrad", {"server_optimizer": "adagrad", "server_lr": 0.01}, "fedadagrad"),
    ("fedadam", {"server_optimizer": "adam", "server_lr": 0.01}, "fedadam"),
    ("fedyogi", {"server_optimizer": "yogi", "server_lr": 0.01}, "fedyogi"),
])
def test_a_named_fedavg_variant_runs_fedavg_with_its_settings_and_is_recorded_by_its_name(name, settings, label):
    config = RunConfig(strategy=name)
    assert config.strategy == "fedavg" and config.label == label
    assert {field: getattr(config, field) for field in settings} == settings
    assert config == RunConfig(strategy="fedavg", **settings)  # one run, two spellings
    assert RunConfig.from_mapping(config.to_dict()).label == label  # config.json says what ran


def test_a_named_variant_keeps_what_is_given_and_refuses_a_contradiction():
    assert RunConfig(strategy="fedadam", server_lr=0.1).server_lr == 0.1
    assert RunConfig(strategy="fedprox", mu=0.5).mu == 0.5
    with pytest.raises(ValueError, match="`strategy`='fedadam' is fedavg with `server_optimizer`='adam'; it cannot "
                                         "take `server_optimizer`='yogi': use `strategy`='fedyogi'"):
        RunConfig(strategy="fedadam", server_optimizer="yogi")
    # the server optimizer is part of what a run is called, over any local round
    assert RunConfig(strategy="fedavg", server_optimizer="adam").label == "fedadam"
    assert RunConfig(strategy="scaffold", server_momentum=0.9).label == "scaffold+fedavgm"
    assert RunConfig(strategy="fedavg", mu=0.1, server_optimizer="yogi").label == "fedprox+fedyogi"
