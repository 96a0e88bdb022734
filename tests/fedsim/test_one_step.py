"""Clients whose round is one SGD step train in one forward: the per-client loop's result, in float64."""

import dataclasses

import pytest
import torch

from fedsim.build import RunSetup
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.engines.inprocess.fedavg import InProcessFedAvgRounds
from fedsim.engines.inprocess.one_step import OneStepClients, _groups
from fedsim.models import register_model
from fedsim.client.optim import OptimizerConfig

from .numerics import EXACT, assert_rows_close, relative_distance

# digits: 1,797 images over 60 clients, about 24 each; with batch 32 most rounds are one step
BASE = {"dataset": "digits", "model": "mlp", "dtype": "float64", "num_partitions": 60, "fraction": 0.5,
        "rounds": 3, "batch_size": 32, "lr": 0.1, "vectorize": False}
CASES = {
    "fedavg, all one step": {"partition": "iid"},
    # FedProx's term is zero at a client's only step, which starts from the global model: the one-step clients
    # drop it. The quantity skew adds clients of several steps to the same rounds, on which it acts
    # (test_fedprox_acts_only_on_the_clients_of_several_steps).
    "FedProx, momentum, weight decay, FedAvgM, feature noise": {
        "partition": "quantity", "alpha": 0.5, "min_partition_size": 0, "mu": 0.1, "momentum": 0.5,
        "weight_decay": 0.01, "server_momentum": 0.5, "feature_noise": 0.2},
    "quantity skew: one-step and longer clients in a round": {"partition": "quantity", "alpha": 0.5,
                                                               "min_partition_size": 0},
    "fednova, FedAdam, one local step each": {"strategy": "fednova", "partition": "dirichlet", "alpha": 0.5,
                                             "min_partition_size": 0, "local_steps": 1,
                                             "server_optimizer": "adam", "server_lr": 0.01},
}


@pytest.fixture
def fused_clients(monkeypatch):
    """Count the clients that `OneStepClients.train` trains together."""
    counted = []
    train = OneStepClients.train

    def counting(self, round_index, clients, weighted_sum, stats):
        counted.append(len(clients))
        return train(self, round_index, clients, weighted_sum, stats)

    monkeypatch.setattr(OneStepClients, "train", counting)
    return counted


@pytest.mark.numerics
@pytest.mark.parametrize("case", list(CASES))
def test_one_forward_for_the_one_step_clients_ends_where_the_loop_ends(tmp_path, fused_clients, case):
    config = RunConfig(**{**BASE, **CASES[case]})
    fused = run(config, tmp_path / "fused")
    assert sum(fused_clients) >= 30  # most of the 3 x 30 sampled clients went through the fused path
    looped = run(config.replace(fused=False), tmp_path / "looped")
    torch.testing.assert_close(fused.global_state, looped.global_state, **EXACT)
    assert_rows_close(fused.rows, looped.rows)  # one forward sums in another order than the loop


@pytest.mark.numerics
def test_fedprox_acts_only_on_the_clients_of_several_steps():
    prox = RunConfig(**{**BASE, **CASES["FedProx, momentum, weight decay, FedAvgM, feature noise"]})
    assert relative_distance(run(prox).global_state, run(prox.replace(mu=0.0)).global_state) > 1e-6
    one_step = prox.replace(partition="iid", min_partition_size=10)  # every client takes one step
    torch.testing.assert_close(run(one_step).global_state, run(one_step.replace(mu=0.0)).global_state, **EXACT)


@pytest.mark.numerics
def test_float32_one_forward_is_close_to_the_loop_as_a_whole(tmp_path):
    config = RunConfig(**{**BASE, "dtype": "float32", "model": "cnn", "partition": "iid"})
    fused, looped = run(config), run(config.replace(fused=False))
    assert relative_distance(fused.global_state, looped.global_state) < 1e-4


def fedavg_rounds(config, optimizer=None) -> InProcessFedAvgRounds:
    setup = RunSetup.build(config)
    rounds = InProcessFedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    if optimizer is not None:  # a client optimizer the command line does not offer
        rounds.training = dataclasses.replace(rounds.training, optimizer=optimizer)
        rounds.one_step = OneStepClients(rounds) if OneStepClients.applies(rounds) else None
    return rounds


@pytest.mark.numerics
def test_nesterov_clients_in_one_forward_end_where_the_loop_ends():
    config = RunConfig(**BASE, partition="iid", weight_decay=0.01)
    nesterov = OptimizerConfig(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
    fused, looped = fedavg_rounds(config, nesterov), fedavg_rounds(config, nesterov)
    looped.one_step = None
    for round_index in range(2):
        fused.train_round(round_index)
        looped.train_round(round_index)
    torch.testing.assert_close(fused.global_state, looped.global_state, **EXACT)


@pytest.mark.parametrize("settings, optimizer", [
    ({"strategy": "scaffold"}, None), ({"strategy": "moon"}, None), ({"model": "cnn", "norm": "batch"}, None),
    ({"fused": False}, None), ({}, OptimizerConfig(name="adam", lr=0.01)),
])
def test_what_one_forward_would_not_compute_is_trained_client_by_client(settings, optimizer):
    assert fedavg_rounds(RunConfig(**{**BASE, **settings}), optimizer).one_step is None


def test_groups_keep_each_forward_within_the_limit():
    assert list(_groups([3, 3, 3, 9, 1], 6)) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert list(_groups([], 6)) == []


class Noise(torch.nn.Module):
    """A user's random layer, which draws from torch's global stream in training."""

    def forward(self, inputs):
        return inputs + 0.1 * torch.randn_like(inputs) if self.training else inputs


@register_model("test-noisy-mlp")
def noisy_mlp(*, num_classes, in_channels, image_size, norm=None, se=False):
    return torch.nn.Sequential(torch.nn.Flatten(), Noise(), torch.nn.Linear(in_channels * image_size**2, num_classes))


@pytest.mark.parametrize("strategy", ["fedavg", "allreduce"])
def test_a_fused_forward_draws_a_random_layer_from_the_runs_stream(strategy, fused_clients):
    """One-step clients' forward (and allreduce's fused step) seed the global stream: the same run twice in one
    process, whose global stream has moved on in between, ends in the same model."""
    settings = {**BASE, "model": "test-noisy-mlp", "strategy": strategy, "partition": "iid"}
    if strategy == "allreduce":
        for name in ("vectorize", "fraction"):  # FedAvg's alone
            del settings[name]
    config = RunConfig(**settings)
    first, second = run(config).global_state, run(config).global_state
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert relative_distance(run(config.replace(seed=1)).global_state, first) > 1e-3
    if strategy == "fedavg":
        assert fused_clients  # the clients took their one step together
