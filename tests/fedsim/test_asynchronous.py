"""Asynchronous rounds (FedBuff, FedAsync) against their rules worked by hand, in float64, and against FedAvg.

Three clients whose rounds take 4, 2 and 1 seconds on the simulated clock (speeds 1, 2 and 4 for
the same work) give the timeline below, which both servers share: an update arrives, the server
takes it, and the client that returned is sent the model again (the only one free). A staleness
off by one, a weight of 1/(1+s) for 1/sqrt(1+s), or a buffer that divides by other than its K,
lands elsewhere. FedBuff whose buffer and concurrency are a round's clients, with equal times,
is FedAvg round for round.
"""

import math
import re
import os
import subprocess
import sys

import pytest
import torch

from fedsim.build import RunSetup
from fedsim.checks import SettingError
from fedsim.client import get_state
from fedsim.config.comparison import comparison_configs, comparison_settings
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.results.folder import read_rows
from fedsim.support import refusal

from .checkpoints import kill_resume_and_run_straight
from .numerics import EXACT, assert_rows_close
from .test_clock import timed
from .test_user_algorithms import trained_models

#: (arrival time, client, the time it was sent) of the first six updates, clients taking 4, 2 and 1 seconds:
#: at t = 2 client 1 and client 2 arrive together and are taken in id order, as at t = 4 all three are.
TIMELINE = [(1, 2, 0), (2, 1, 0), (2, 2, 1), (3, 2, 2), (4, 0, 0), (4, 1, 2)]
#: Each client's seconds for its work.
SECONDS = [4.0, 2.0, 1.0]


def models_by_hand(config, server_step):
    """The global model after each update of `TIMELINE`, every rule written out.

    ``server_step(x, version, arrived)`` takes one arrival: the version it was sent, that model, and
    the client's model trained from it; it returns the new model and version. The clients that
    arrive at one time are sent the model again once all of them are taken. Each client trains
    STEPS full-shard steps from the model it was sent (`trained_models`).
    """
    setup = RunSetup.build(config)
    models = [get_state(setup.model)]  # by version
    version, sent = 0, {}  # client -> (version, its trained model) of its last dispatch
    for client in (0, 1, 2):
        sent[client] = (0, trained_models(setup, models[0], [client])[0])
    history, returned, sent_at = [], [], dict.fromkeys((0, 1, 2), 0)
    for index, (time, client, was_sent) in enumerate(TIMELINE):
        assert was_sent == sent_at[client] and time == was_sent + SECONDS[client]  # the timeline adds up
        from_version, trained = sent[client]
        x, version = server_step(models[-1], version, (from_version, models[from_version], trained))
        if len(models) <= version:
            models.append(x)
        history.append(models[-1])
        returned.append(client)
        if index + 1 == len(TIMELINE) or TIMELINE[index + 1][0] > time:  # every arrival at `time` is taken first
            for again in returned:
                sent[again] = (version, trained_models(setup, models[-1], [again])[0])
                sent_at[again] = time
            returned.clear()
    return history


def polynomial(staleness, a=0.5):
    return (1.0 + staleness) ** -a


@pytest.mark.numerics
def test_fedbuff_takes_each_update_weighed_by_its_staleness_and_steps_after_k_of_them(tmp_path):
    # K = 2, equal weights, server lr 0.7: x <- x + 0.7 (1/K) sum s(staleness) (trained - sent)
    config = timed(tmp_path, SECONDS, rounds=2, asynchronous="fedbuff", buffer=2, weights="equal",
                   server_lr=0.7)
    buffer = []

    def fedbuff(x, version, arrived):
        from_version, sent_model, trained = arrived
        weight = polynomial(version - from_version)
        buffer.append([weight * (yi - si) for yi, si in zip(trained, sent_model)])
        if len(buffer) < 2:
            return x, version
        mean = [sum(parts) / 2 for parts in zip(*buffer)]
        buffer.clear()
        return [xi + 0.7 * di for xi, di in zip(x, mean)], version + 1

    history = models_by_hand(config, fedbuff)
    result = run(config)
    # rows every 3 updates: at t = 2 (staleness 0, 0, 1; one step), at t = 4 (0, 2, 1; two more)
    assert [row["sim_time_s"] for row in result.rows] == [2.0, 4.0]
    assert [row["server_steps"] for row in result.rows] == [1, 3]
    assert [row["staleness_max"] for row in result.rows] == [1, 2]
    assert [row["staleness_mean"] for row in result.rows] == [1 / 3, 1.0]
    for got, want in zip(result.global_state, history[5], strict=True):
        torch.testing.assert_close(got, want, **EXACT)
    for got, want in zip(run(config.replace(rounds=1)).global_state, history[2], strict=True):
        torch.testing.assert_close(got, want, **EXACT)


@pytest.mark.numerics
def test_fedasync_mixes_each_arriving_model_in_with_alpha_times_its_staleness_weight(tmp_path):
    # x <- x + a (trained - x), a = 0.6 / sqrt(1 + staleness), a server step at every update
    config = timed(tmp_path, SECONDS, rounds=2, asynchronous="fedasync", async_alpha=0.6)

    def fedasync(x, version, arrived):
        from_version, _, trained = arrived
        mix = 0.6 * polynomial(version - from_version)
        return [xi + mix * (yi - xi) for xi, yi in zip(x, trained)], version + 1

    history = models_by_hand(config, fedasync)
    result = run(config)
    # versions 0..5; the updates' staleness: 0, 1, 1 (client 2 sent at version 1), 0, 4, 2
    assert [row["staleness_max"] for row in result.rows] == [1, 4]
    assert [row["server_steps"] for row in result.rows] == [3, 6]
    for got, want in zip(result.global_state, history[5], strict=True):
        torch.testing.assert_close(got, want, **EXACT)


@pytest.mark.numerics
@pytest.mark.parametrize("weights", ["size", "equal"])
def test_fedbuff_with_k_and_concurrency_a_rounds_clients_and_equal_times_is_fedavg_round_for_round(tmp_path, weights):
    # half of 4 clients a round, server lr 0.7 and momentum 0.5: every client takes 1 s for its work
    settings = {"num_partitions": 4, "fraction": 0.5, "rounds": 3, "server_lr": 0.7, "server_momentum": 0.5,
                "weights": weights}
    config = timed(tmp_path, [1.0] * 4, **settings)
    fedavg = run(config)
    # every update arrives from the model it was sent (staleness 0), whose weight is 1 under any staleness rule
    fedbuff = run(config.replace(asynchronous="fedbuff", buffer=2, concurrency=2))
    assert [row["server_steps"] for row in fedbuff.rows] == [1, 2, 3]
    assert [row["sim_time_s"] for row in fedavg.rows] == [1.0, 2.0, 3.0]
    asynchronous_only = ("server_steps", "staleness_max", "staleness_mean")
    assert_rows_close([{k: v for k, v in row.items() if k not in asynchronous_only} | {"strategy": "fedavgm"}
                       for row in fedbuff.rows], fedavg.rows)
    for got, want in zip(fedbuff.global_state, fedavg.global_state, strict=True):
        torch.testing.assert_close(got, want, **EXACT)


@pytest.mark.numerics
def test_a_resumed_asynchronous_run_takes_its_clients_in_flight_and_its_buffer_back(tmp_path):
    # 3 clients training, a buffer of 3 and rows every 2 updates: every checkpoint holds clients in flight
    # and a part-filled buffer
    config = RunConfig(dataset="digits", model="mlp", num_partitions=6, fraction=0.3, rounds=5, batch_size=10,
                       asynchronous="fedbuff", buffer=3, concurrency=3, client_speed="lognormal:0,0.7",
                       dtype="float64")
    run(config.replace(rounds=2), tmp_path / "broken")
    resumed = run(config, tmp_path / "broken", resume=True)
    straight = run(config)
    assert_rows_close(resumed.rows, straight.rows)
    for got, want in zip(resumed.global_state, straight.global_state, strict=True):
        torch.testing.assert_close(got, want, **EXACT)


def _fedbuff_run(out, *extra, rounds):
    args = ["run", "--strategy", "fedbuff", "--model", "mlp", "--dataset", "digits", "--rounds", str(rounds),
            "--batch-size", "10", "--num-partitions", "10", "--fraction", "0.2", "--concurrency", "4",
            "--buffer", "5", "--client-speed", "lognormal:0,1", "--bandwidth", "uniform:1,10", "--quiet",
            "--out", str(out), *extra]
    return subprocess.Popen([sys.executable, "-m", "fedsim", *args], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_an_asynchronous_run_killed_with_sigkill_resumes_to_the_same_rows_and_model(tmp_path):
    # killed with clients in flight, and a part-filled buffer unless the kill lands on a fifth row (2 updates a
    # row, 5 a step); the in-process resume test always has one
    rounds = kill_resume_and_run_straight(_fedbuff_run, tmp_path, kill_at=3, rounds_at_least=8)
    final = [torch.load(tmp_path / name / "model.pt", weights_only=True)["state"] for name in ("killed", "straight")]
    assert all(torch.equal(a, b) for a, b in zip(*final))  # one process kind, one machine: the same arithmetic
    rows = [read_rows(tmp_path / name / "metrics.csv") for name in ("killed", "straight")]
    assert [row["round"] for row in rows[0]] == list(range(1, rounds + 1))
    assert [{k: v for k, v in row.items() if k != "wall_s"} for row in rows[0]] == \
        [{k: v for k, v in row.items() if k != "wall_s"} for row in rows[1]]


@pytest.mark.parametrize("strategy, hooks", [("scaffold", "end_round"), ("fednova", "scale, to_delta")])
def test_a_method_whose_server_acts_on_a_rounds_clients_is_refused_with_its_hooks(strategy, hooks):
    config = RunConfig(dataset="digits", model="mlp", strategy=strategy, asynchronous="fedbuff")
    with pytest.raises(SettingError, match=rf"`strategy`='{strategy}''s server acts on a round's clients together "
                                           rf"\({hooks}.*\), and `asynchronous`='fedbuff' takes one update"):
        run(config)
    assert refusal(config, "inprocess") is not None
    assert refusal(RunConfig(strategy="moon", asynchronous="fedbuff"), "inprocess") is None


@pytest.mark.parametrize("engine, message", [
    ("ddp", r"fedsim ddp shares a round's clients out"),
    ("flower-simulation", r"the Flower engine takes each reply when it arrives in wall time"),
    ("workers", r"trains a round's clients in parallel"),
    ("cohorts", r"leave `vectorize` out"),
])
def test_asynchronous_rounds_run_in_process_alone_and_other_engines_say_why(engine, message):
    for config in (RunConfig(strategy="fedasync"), RunConfig(strategy="fedprox", asynchronous="fedbuff")):
        reason = refusal(config, engine)
        assert reason is not None and re.search(message, str(reason))


@pytest.mark.parametrize("settings, message", [
    ({"buffer": 4}, r"`buffer`=4 does nothing without `asynchronous` \(the rounds are synchronous\)"),
    ({"strategy": "fedasync", "buffer": 4}, r"`buffer`=4 is fedbuff's; it does nothing with `asynchronous`='fedasync'"),
    ({"strategy": "fedbuff", "round_deadline": 3.0}, r"`round_deadline`=3.0 shapes a synchronous round"),
    ({"strategy": "fedbuff", "client_dropout": 0.1}, r"`client_dropout`=0.1 shapes a synchronous round"),
    ({"strategy": "fedasync", "server_lr": 0.5}, r"`server_lr`=0.5 is a server step's; fedasync mixes"),
    ({"strategy": "fedbuff", "asynchronous": "fedasync"}, r"`strategy`='fedbuff' is fedavg with `asynchronous`="),
    ({"strategy": "fedbuff", "staleness": "hinge:1"}, r"`staleness`='hinge:1' must be one of constant, "),
    ({"strategy": "fedbuff", "concurrency": 0}, r"`concurrency`"),
])
def test_asynchronous_settings_that_contradict_are_one_error_naming_them(settings, message):
    with pytest.raises(SettingError, match=message):
        RunConfig(**settings)


def test_an_asynchronous_run_is_named_by_its_server_and_its_method():
    assert RunConfig(strategy="fedbuff").label == "fedbuff"
    assert RunConfig(strategy="moon", asynchronous="fedbuff", server_momentum=0.9).label == "moon+fedbuff+fedavgm"
    assert math.isclose(RunConfig(strategy="fedasync").async_alpha, 0.6)


def test_a_comparison_hands_the_asynchronous_settings_to_the_asynchronous_strategies_alone():
    names = ["fedavg", "fedbuff", "fedasync"]
    configs = comparison_configs({"concurrency": 20, "buffer": 5, "client_speed": "uniform:1,2", "round_deadline": 3.0},
                                 names)
    assert [(config.label, config.concurrency, config.buffer, config.client_speed, config.round_deadline)
            for config in configs.values()] == [("fedavg", None, 10, "uniform:1,2", 3.0),
                                                ("fedbuff", 20, 5, "uniform:1,2", None),
                                                ("fedasync", 20, 10, "uniform:1,2", None)]  # the deadline: fedavg's
    assert comparison_configs(comparison_settings(configs), names) == configs  # what a comparison's config.json holds
    with pytest.raises(SettingError, match=r"`buffer`=5 is read by fedbuff alone, which `strategies` does not list"):
        comparison_configs({"buffer": 5}, ["fedavg", "fedasync"])
