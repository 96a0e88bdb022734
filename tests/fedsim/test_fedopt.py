"""FedOpt's server optimizers (Reddi et al., ICLR 2021) against their update rules, worked by hand."""

import math

import pytest
import torch

from fedsim.build import RunSetup
from fedsim.client import client_update, get_state
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.schedule import sample_clients
from fedsim.server import ServerOptimizer
from fedsim.client.training import LocalTraining

from .numerics import EXACT

pytestmark = pytest.mark.numerics  # fedsim's arithmetic against the rules' by hand

BETA1, BETA2, TAU, LR = 0.9, 0.99, 1e-3, 0.1
DELTAS = [0.5, -0.2]  # two rounds' mean delta of a one-element model


def by_hand(rule: str) -> float:
    """Algorithm 2 of the paper, one number at a time: m from 0, v from tau^2."""
    x, m, v = 1.0, 0.0, TAU * TAU
    for delta in DELTAS:
        m = BETA1 * m + (1 - BETA1) * delta
        if rule == "adagrad":
            v = v + delta * delta
        elif rule == "adam":
            v = BETA2 * v + (1 - BETA2) * delta * delta
        else:
            v = v - (1 - BETA2) * delta * delta * math.copysign(1.0, v - delta * delta)
        x = x + LR * m / (math.sqrt(v) + TAU)
    return x


@pytest.mark.parametrize("rule", ["adagrad", "adam", "yogi"])
def test_each_adaptive_server_optimizer_follows_its_update_rule(rule):
    param = torch.ones(1, dtype=torch.float64, requires_grad=True)
    server = ServerOptimizer([param], optimizer=rule, lr=LR, beta1=BETA1, beta2=BETA2, tau=TAU)
    for delta in DELTAS:
        server.step_delta([torch.tensor([delta], dtype=torch.float64)])
    assert float(param.detach()) == pytest.approx(by_hand(rule), rel=1e-14)


DIGITS = {"strategy": "fedavg", "dataset": "digits", "model": "mlp", "num_partitions": 4, "rounds": 2,
          "batch_size": 20, "lr": 0.1, "dtype": "float64"}


@pytest.mark.parametrize("server_lr", [1.0, 0.3])
def test_server_sgd_steps_by_its_lr_times_the_clients_weighted_mean_delta(server_lr):
    """x + lr * sum_k p_k delta_k over the sampled clients, p_k = n_k / sum of theirs; lr 1 is FedAvg's mean."""
    assert (RunConfig(**DIGITS).server_optimizer, RunConfig(**DIGITS).server_lr) == ("sgd", 1.0)  # plain FedAvg
    # half of 4 clients a round ([1, 2], then [0, 2]): weights over all 4 would not sum to 1
    config = RunConfig(**DIGITS, fraction=0.5, server_optimizer="sgd", server_lr=server_lr)
    setup = RunSetup.build(config)
    training = LocalTraining.from_config(config)
    x = get_state(setup.model)
    for round_index in range(config.rounds):
        clients = sample_clients(config.num_partitions, config.fraction, config.seed, round_index)
        assert len(clients) == 2
        updates = [client_update(setup.model, x, setup.data, setup.partition.shard(k), task=setup.task,
                                 training=training, seed=config.seed, round=round_index, client=k) for k in clients]
        p = [update.num_examples / sum(u.num_examples for u in updates) for update in updates]
        if server_lr == 1.0:  # FedAvg (McMahan et al. 2017): the size-weighted mean of the trained models
            x = [sum(pk * (xi + update.delta[i]) for pk, update in zip(p, updates)) for i, xi in enumerate(x)]
        else:
            x = [xi + server_lr * sum(pk * update.delta[i] for pk, update in zip(p, updates)) for i, xi in enumerate(x)]
    torch.testing.assert_close(run(config).global_state, x, **EXACT)


def test_adam_resumes_its_moments(tmp_path):
    adam = RunConfig(**DIGITS, server_optimizer="adam", server_lr=0.01)
    run(adam.replace(rounds=1), tmp_path / "a")
    resumed = run(adam, tmp_path / "a", resume=True)
    torch.testing.assert_close(resumed.global_state, run(adam).global_state, **EXACT)
    assert resumed.summary["final_test_accuracy"] > 0.5


@pytest.mark.parametrize("settings, message", [
    ({"server_optimizer": "adam", "server_momentum": 0.9}, "`server_momentum`=0.9 does nothing with "
                                                          "`server_optimizer`='adam'"),
    ({"server_tau": 0.01}, "`server_tau`=0.01 does nothing with `server_optimizer`='sgd'"),
    ({"server_optimizer": "adagrad", "server_beta2": 0.9}, "`server_beta2`=0.9 does nothing"),
    ({"server_optimizer": "rmsprop"}, "`server_optimizer`"),
    ({"server_optimizer": "adam", "server_beta1": 1.0}, "`server_beta1`"),
    ({"strategy": "allreduce", "server_optimizer": "adam"}, "`server_optimizer`='adam'"),
])
def test_a_server_optimizer_setting_that_is_not_read_is_refused(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunConfig(**{**DIGITS, **settings})
