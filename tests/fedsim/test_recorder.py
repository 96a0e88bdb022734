"""The recorder works when fed round by round from outside any fedsim loop (as Flower's strategy does)."""

import json
import math
import warnings

import numpy as np
import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.results.progress import RoundStats
from fedsim.results.recorder import CHECKPOINT_FORMAT, Recorder
from fedsim.results.folder import read_rows
from fedsim.schedule import SampleGrid
from partitions import Partition

PARTITION = Partition([np.arange(0, 30), np.arange(30, 40)], num_samples=40, scheme="manual")


def feed(recorder, rounds, state):
    for round_index in rounds:
        recorder.schedule_round(round_index)
        metrics = {"accuracy": 0.5 + round_index / 10, "loss": 1.0} if recorder.evaluation_due(round_index) else None
        recorder.record_round(RoundStats(samples=40, loss_sum=20.0, bytes_up=8, bytes_down=8), metrics, wall_s=0.1,
                              global_state=state, engine_state=lambda: {"momentum": torch.ones(2)})


def test_feed_checkpoint_resume_finish(tmp_path):
    config = RunConfig(strategy="fedavg", rounds=3, eval_every=2, num_partitions=2)
    state = [torch.zeros(2), torch.full((3,), 2.0)]
    first = Recorder(config.replace(rounds=2), PARTITION, tmp_path)
    assert first.start() is None
    feed(first, first.pending_rounds(), state)
    accuracy = [row["test_accuracy"] for row in first.rows]
    assert math.isnan(accuracy[0]) and accuracy[1] == pytest.approx(0.6)  # every second round, and the last
    first.finish(state)

    again = Recorder(config, PARTITION, tmp_path, resume=True)
    restored = again.start()
    assert again.progress.round == 2 and again.progress.scheduled_samples == 80
    torch.testing.assert_close(restored.global_state, state)
    assert torch.equal(restored.engine_state["momentum"], torch.ones(2))
    assert list(again.pending_rounds()) == [2]
    feed(again, again.pending_rounds(), state)
    summary = again.finish(state)
    assert summary["rounds"] == 3 and summary["samples_seen"] == 120 and summary["bytes_communicated"] == 48
    assert summary["final_test_accuracy"] == pytest.approx(0.7)
    assert [row["round"] for row in read_rows(tmp_path / "metrics.csv")] == [1, 2, 3]
    assert json.loads((tmp_path / "summary.json").read_text())["fedavg"]["rounds"] == 3


def test_a_round_without_evaluation_records_nan_and_the_train_loss(tmp_path):
    recorder = Recorder(RunConfig(rounds=2, eval_every=2, num_partitions=2), PARTITION)
    recorder.start()
    row = recorder.record_round(RoundStats(samples=10, loss_sum=5.0), None, wall_s=0.0)
    assert math.isnan(row["test_accuracy"]) and row["train_loss"] == 0.5


def test_a_grid_from_elsewhere_is_recorded_and_checked_on_resume(tmp_path):
    config = RunConfig(strategy="allreduce", rounds=1, num_partitions=2)
    grid = SampleGrid(local_epochs=2)
    recorder = Recorder(config, PARTITION, tmp_path, grid=grid)
    recorder.start()
    assert recorder.schedule_round(0) == 80  # two passes over 40 samples
    recorder.record_round(RoundStats(samples=80), None, wall_s=0.0, global_state=[torch.zeros(1)])
    assert json.loads((tmp_path / "config.json").read_text())["sample_grid"]["local_epochs"] == 2
    with pytest.raises(ValueError, match="sample_grid"):
        Recorder(config, PARTITION, tmp_path, resume=True).start()


def test_a_checkpoint_of_another_format_is_refused(tmp_path):
    config = RunConfig(rounds=1, num_partitions=2)
    recorder = Recorder(config, PARTITION, tmp_path)
    recorder.start()
    feed(recorder, [0], [torch.zeros(1)])
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    torch.save({**checkpoint, "format": CHECKPOINT_FORMAT - 1}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="format"):
        Recorder(config, PARTITION, tmp_path, resume=True).start()


def test_the_summary_names_the_final_the_best_with_its_round_and_the_mean_of_the_last_five(tmp_path):
    """Eight rounds evaluated every other round: accuracies 0.6, 0.9, 0.7, 0.8 (rounds 2, 4, 6, 8)."""
    from fedsim.comparison import comparison_table
    from fedsim.results.outcome import RunResult

    config = RunConfig(strategy="fedavg", rounds=8, eval_every=2, num_partitions=2)
    recorder = Recorder(config, PARTITION, tmp_path)
    recorder.start()
    accuracies = {1: 0.6, 3: 0.9, 5: 0.7, 7: 0.8}
    for round_index in range(8):
        recorder.schedule_round(round_index)
        metrics = {"accuracy": accuracies[round_index], "loss": 1.0} if round_index in accuracies else None
        recorder.record_round(RoundStats(samples=40, loss_sum=20.0, bytes_up=8, bytes_down=8), metrics, wall_s=0.1,
                              global_state=[torch.ones(2)])
    recorder.finish([torch.ones(2)])
    summary = json.loads((tmp_path / "summary.json").read_text())["fedavg"]
    assert (summary["final_test_accuracy"], summary["best_test_accuracy"], summary["best_round"]) == (0.8, 0.9, 4)
    assert summary["last_5_mean_test_accuracy"] == pytest.approx((0.6 + 0.9 + 0.7 + 0.8) / 4)  # four evaluated
    assert summary["last_5_mean_rounds"] == 4
    table = comparison_table({"fedavg": RunResult(rows=[], summary=summary, global_state=[])}).splitlines()
    assert table[0].split("  ")[:4] == ["strategy", "final acc", "best acc (round)", "last-5 mean acc"]
    assert table[2].split()[:7] == ["fedavg", "0.8000", "0.9000", "(4)", "0.7500", "(of", "4)"]


@pytest.mark.parametrize("accuracies, mean, note", [
    ([0.5, 0.6, 0.9], (0.5 + 0.6 + 0.9) / 3, " (of 3)"),  # a 3-round run: the mean of 3, and the table says so
    ([0.5, 0.6, 0.9, 0.7, 0.8, 0.4], (0.6 + 0.9 + 0.7 + 0.8 + 0.4) / 5, ""),  # the last five of six
])
def test_the_last_5_mean_of_a_shorter_run_says_how_many_rounds_it_averages(accuracies, mean, note):
    from fedsim.comparison import comparison_table
    from fedsim.results.outcome import RunResult

    recorder = Recorder(RunConfig(strategy="fedavg", rounds=len(accuracies), num_partitions=2), PARTITION)
    recorder.start()
    for round_index, accuracy in enumerate(accuracies):
        recorder.record_round(RoundStats(samples=40, loss_sum=20.0), {"accuracy": accuracy, "loss": 1.0}, wall_s=0.1)
    summary = recorder.summary()
    assert summary["last_5_mean_test_accuracy"] == pytest.approx(mean, abs=1e-12)
    assert summary["last_5_mean_rounds"] == min(len(accuracies), 5)
    row = comparison_table({"fedavg": RunResult(rows=[], summary=summary, global_state=[])}).splitlines()[2]
    assert f" {mean:.4f}{note}  " in row


def test_clients_with_fewer_than_10_local_test_samples_are_warned_of_at_the_start(tmp_path):
    from fedsim.results.client_eval import SMALL_TEST_SET

    sizes = [1, 9, 10, 30]
    ends = np.cumsum([0, *sizes])
    local_test = [np.arange(start, end) + 100 for start, end in zip(ends, ends[1:])]
    partition = Partition(np.split(np.arange(100), 4), num_samples=150, scheme="manual",
                          params={"local_test_fraction": 0.3}, local_test=local_test)
    assert SMALL_TEST_SET == 10
    with pytest.warns(UserWarning, match=r"^2 of 4 clients have fewer than 10 local test samples \(the fewest has 1\)"
                      r".*`client_acc_min`.*raise `local_test_fraction` \(now 0\.3\)") as caught:
        Recorder(RunConfig(rounds=1, num_partitions=4), partition, tmp_path / "r").start()
    assert len(caught) == 1
    large = Partition(list(partition), num_samples=150, scheme="manual",
                      local_test=np.split(np.arange(100, 140), 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Recorder(RunConfig(rounds=1, num_partitions=4), large).start()  # 10 samples each: nothing to say
