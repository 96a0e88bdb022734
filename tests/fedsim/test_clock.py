"""The simulated clock and a synchronous round ruled by it: each client's seconds, the deadline, over-selection.

Each rule is worked by hand in float64 and fails when broken: a client past the deadline kept, the
round's time not the deadline's, over-selection keeping other than the fastest, a client's work
counted other than by the batches it trains on.
"""

import numpy as np
import pytest
import torch

from fedsim.build import RunSetup
from fedsim.checks import SettingError
from fedsim.client import get_state
from fedsim.client.training import LocalTraining
from fedsim.client.update import client_update, local_sample_count
from fedsim.clock import ClientClock, Distribution
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.rounds.fedavg import FedAvgRounds
from fedsim.schedule import sample_clients
from fedsim.seeding import Stream, derive_seed

from .numerics import EXACT
from .test_algorithms import FULL_BATCH, STEPS
from .test_user_algorithms import trained_models


def speeds_file(tmp_path, speeds, name="speeds.txt"):
    """Write one speed per client, exactly (``repr`` round-trips a float), and return the file's path."""
    path = tmp_path / name
    path.write_text("\n".join(repr(float(speed)) for speed in speeds))
    return str(path)


def work(config):
    """Each client's samples a round: STEPS full-shard steps."""
    return [STEPS * int(size) for size in RunSetup.build(config).partition.sizes]


def timed(tmp_path, seconds, **settings):
    """FULL_BATCH with speeds that make client k's round take exactly ``seconds[k]`` (a power of two each).

    With ``sample_seconds`` = 1, a client of speed w / t takes w / (w / t) = t seconds for its w samples, exactly.
    """
    config = RunConfig(**{**FULL_BATCH, **settings})
    speeds = [samples / time for samples, time in zip(work(config), seconds)]
    return config.replace(client_speed=speeds_file(tmp_path, speeds), sample_seconds=1.0)


@pytest.mark.parametrize("text, message", [
    ("lognormal:0", r"must be written lognormal:MU,SIGMA"),
    ("uniform:3,1", r"must have 0 < A <= B"),
    ("constant:0", r"must have V > 0"),
    ("gamma:1,2", r"is neither a distribution .* nor a file"),
    ("10", r"is neither a distribution .* nor a file"),
])
def test_a_malformed_speed_is_one_error_naming_the_setting_as_given_and_the_forms(text, message):
    with pytest.raises(SettingError, match=rf"`client_speed`='{text}' " + message):
        RunConfig(client_speed=text)


def test_a_draw_that_gives_a_client_no_speed_is_refused_naming_the_setting():
    with pytest.raises(SettingError, match=r"`bandwidth`='lognormal:-800,1' gives a client a speed or link of 0"):
        ClientClock(RunConfig(bandwidth="lognormal:-800,1"), 3)


def test_speeds_are_drawn_once_per_client_from_the_runs_seed_and_a_file_is_read_in_client_order(tmp_path):
    clock = ClientClock(RunConfig(client_speed="lognormal:0.5,0.25", seed=3), 5)
    rng = np.random.default_rng(derive_seed(3, Stream.CLOCK, 0))
    np.testing.assert_array_equal(clock.speeds, rng.lognormal(0.5, 0.25, size=5))
    path = speeds_file(tmp_path, [1.0, 2.5, 4.0])
    np.testing.assert_array_equal(ClientClock(RunConfig(client_speed=path), 3).speeds, [1.0, 2.5, 4.0])
    with pytest.raises(SettingError, match=r"`client_speed`=.* holds 3 values, one per client; the run has 4"):
        ClientClock(RunConfig(client_speed=path), 4)
    assert Distribution.parse("client_speed", "constant").params == (1.0,)


def test_a_clients_seconds_are_its_download_its_samples_at_its_speed_and_its_upload():
    # 2 Mbit/s is 250,000 bytes a second: 10**6 bytes each way take 4 s; 300 samples at 0.01 s / speed 3, 1 s
    clock = ClientClock(RunConfig(client_speed="constant:3", bandwidth="constant:2", sample_seconds=0.01), 2)
    assert clock.seconds(1, samples=300, bytes_down=10**6, bytes_up=10**6) == pytest.approx(9.0, rel=1e-12)
    assert ClientClock(RunConfig(client_speed="constant:3", sample_seconds=0.01), 2).seconds(
        1, samples=300, bytes_down=10**6, bytes_up=10**6) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("size, training", [
    (25, LocalTraining(batch_size=10, epochs=2)),
    (25, LocalTraining(batch_size=10, epochs=1, drop_last=True)),
    (25, LocalTraining(batch_size=10, epochs=None, local_steps=7)),
    (7, LocalTraining(batch_size=10, epochs=None, local_steps=3)),
    (30, LocalTraining(batch_size=10, epochs=None, local_steps=4, drop_last=True)),
])
def test_the_clock_counts_the_samples_a_client_trains_on_before_it_trains(size, training):
    config = RunConfig(dataset="digits", model="mlp")
    setup = RunSetup.build(config)
    shard = np.arange(size)
    update = client_update(setup.model, get_state(setup.model), setup.data, shard, task=setup.task,
                           training=training, seed=0, round=0, client=0)
    assert local_sample_count(size, training) == update.samples_processed


@pytest.mark.numerics
def test_a_deadline_only_the_fastest_client_meets_keeps_exactly_that_client_and_the_round_takes_the_deadline(
        tmp_path):
    # clients take 4, 2 and 1 seconds; the deadline 1.5 keeps client 2 alone, and the round waits until 1.5
    config = timed(tmp_path, [4.0, 2.0, 1.0], rounds=1, round_deadline=1.5, server_lr=0.7)
    result = run(config)
    (row,) = result.rows
    assert row["sim_time_s"] == 1.5 and row["dropped_clients"] == 2
    setup = RunSetup.build(config)
    x = get_state(setup.model)
    (trained,) = trained_models(setup, x, [2])  # the one client kept, weight 1
    expected = [xi + 0.7 * (yi - xi) for xi, yi in zip(x, trained)]
    for got, want in zip(result.global_state, expected, strict=True):
        torch.testing.assert_close(got, want, **EXACT)
    # without a deadline the round keeps all three and waits for the slowest
    assert run(config.replace(round_deadline=None)).rows[0]["sim_time_s"] == 4.0


@pytest.mark.numerics
def test_over_selection_keeps_the_m_fastest_of_the_drawn_and_ends_when_the_last_of_them_returns(tmp_path):
    # 10 clients, 2 a round, over-selected by 1.0: 4 drawn, the 2 with the shortest rounds kept
    base = {"num_partitions": 10, "fraction": 0.2, "rounds": 3}
    config = RunConfig(**{**FULL_BATCH, **base})
    rng = np.random.default_rng(7)
    speeds = rng.uniform(0.5, 4.0, size=10)
    config = config.replace(client_speed=speeds_file(tmp_path, speeds), sample_seconds=1e-3, over_select=1.0)
    setup = RunSetup.build(config)
    rounds = FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    samples = work(config)
    total = 0.0
    for round_index in range(3):
        drawn = sample_clients(10, 0.4, config.seed, round_index).tolist()
        seconds = {k: samples[k] * 1e-3 / speeds[k] for k in drawn}
        fastest = sorted(drawn, key=lambda k: (seconds[k], k))[:2]
        timing = rounds.round_timing(round_index)
        assert timing.kept == sorted(fastest) and sorted(timing.unselected) == sorted(set(drawn) - set(fastest))
        assert timing.seconds == pytest.approx(max(seconds[k] for k in fastest), rel=1e-12)
        total += timing.seconds
    rows = run(config).rows
    assert [row["dropped_clients"] for row in rows] == [2, 2, 2]
    assert rows[-1]["sim_time_s"] == pytest.approx(total, rel=1e-12)


def test_a_rounds_time_is_its_slowest_client_with_its_transfers(tmp_path):
    config = RunConfig(**{**FULL_BATCH, "num_partitions": 4, "fraction": 0.5, "rounds": 3},
                       client_speed="uniform:1,3", bandwidth="lognormal:1,0.5", sample_seconds=1e-3)
    setup = RunSetup.build(config)
    rounds = FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    clock, samples = ClientClock(config, 4), work(config)
    rows = run(config).rows
    elapsed = 0.0
    for round_index, row in enumerate(rows):
        drawn = sample_clients(4, 0.5, config.seed, round_index).tolist()
        elapsed += max(samples[k] * 1e-3 / clock.speeds[k] + 2 * rounds.state_bytes / clock.bytes_per_second[k]
                       for k in drawn)  # the model down and the update up, each over the client's link
        assert row["sim_time_s"] == pytest.approx(elapsed, rel=1e-12)


def test_the_summary_gives_the_first_round_and_the_simulated_time_that_reach_the_target(tmp_path):
    config = timed(tmp_path, [4.0, 2.0, 1.0], rounds=3, target_accuracy=0.3, lr=0.5)
    result = run(config, tmp_path / "out")
    reached = next(row for row in result.rows if row["test_accuracy"] >= 0.3)
    assert result.summary["target_round"] == reached["round"]
    assert result.summary["time_to_target_s"] == 4.0 * reached["round"]
    assert result.summary["sim_time_s"] == 12.0


def test_over_selection_is_refused_with_client_level_dp_whose_accountant_it_would_mislead():
    # a fast client kept from (1 + f) m drawn takes part more often than the sampling rate the accountant is told
    with pytest.raises(SettingError, match=r"`over_select`=0.5 keeps the fastest of more clients than a round's, so a "
                                           r"fast client takes part more often than the sampling `dp_clip`'s"):
        RunConfig(over_select=0.5, dp_clip=1.0, dp_noise=1.0)


def test_a_speeds_file_changed_since_the_run_started_refuses_the_resume_naming_it(tmp_path):
    path = speeds_file(tmp_path, [1.0, 2.0, 4.0])
    config = RunConfig(**{**FULL_BATCH, "rounds": 1}, client_speed=path)
    run(config, tmp_path / "out")
    speeds_file(tmp_path, [1.0, 2.0, 8.0])  # the same path, other speeds
    with pytest.raises(SettingError, match=r"cannot resume .*: '.*speeds.txt', its `client_speed`, changed since the "
                                           r"run started"):
        run(config.replace(rounds=2), tmp_path / "out", resume=True)
