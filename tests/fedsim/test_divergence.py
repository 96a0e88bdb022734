"""A run whose loss or model stops being finite stops at that round, keeps its last finite checkpoint and says so."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fedsim.build import RunSetup
from fedsim.config.run_config import RunConfig
from fedsim.rounds.result import build_rounds
from fedsim.interrupts import DIVERGED, RunDiverged
from fedsim.results.progress import RoundStats
from fedsim.results.divergence import all_finite
from fedsim.results.recorder import Recorder
from fedsim.results.folder import RunFolder, read_rows
from fedsim.schedule import sample_clients
from partitions import Partition

from .test_cli import fedsim

SMALL = ["--model", "mlp", "--batch-size", "20", "--num-partitions", "4", "--fraction", "0.5", "--quiet"]
# FedAvg whose loss stops being finite in round 4 on any CPU, its model finite until then
OVERFLOW = str(Path(__file__).with_name("overflow_method.py")) + ":OverflowInRound"
NOT_FINITE_LOSS = re.compile(r"the training loss is (nan|inf)")


def strict_json(path) -> dict:
    """Read ``path`` as a JSON reader other than Python's would: NaN and Infinity are not JSON."""

    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def first_nonfinite_round(config, mnist5k) -> tuple[int, str]:
    """Train ``config``'s rounds through the engine's rounds, without a recorder; return the first round
    (1-based) after which the training loss or the global model is not finite, and which of them."""
    setup = RunSetup.build(config, data=mnist5k)
    rounds = build_rounds(config, setup)
    for round_index in range(config.rounds):
        stats = rounds.train_round(round_index)
        if not math.isfinite(stats.loss_sum):
            return round_index + 1, "loss"
        if not all(torch.isfinite(t).all() for t in rounds.global_state if t.is_floating_point()):
            return round_index + 1, "model"
    raise AssertionError("the run did not diverge")


def assert_one_error_line(result) -> str:
    assert result.returncode == DIVERGED == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_divergence_stops_at_its_round_and_keeps_the_last_finite_checkpoint(tmp_path, mnist5k):
    """Rounds 1-3 end with a finite model (the third's 1e25 times too large); the reference finds round 4's loss."""
    out = tmp_path / "run"
    result = fedsim("run", "--strategy", OVERFLOW, *SMALL, "--server-lr", "2", "--rounds", "6",
                    "--checkpoint-every", "1", "--out", str(out))
    line = assert_one_error_line(result)
    config = RunConfig(strategy=OVERFLOW, model="mlp", batch_size=20, num_partitions=4, fraction=0.5, server_lr=2.0,
                       rounds=6, checkpoint_every=1)
    diverged, what = first_nonfinite_round(config, mnist5k)
    assert (diverged, what) == (4, "loss")  # the case this test is about: a finite model, then a non-finite loss
    sampled = {f"client {k}" for k in sample_clients(4, 0.5, config.seed, diverged - 1)}
    where = line.split(f"diverged in round {diverged} (")[1].split(")")[0]
    assert where in sampled, line
    assert f"checkpoint.pt holds round {diverged - 1}, the last finite model" in line, line
    assert "lower `--lr` (now 0.05) or `--server-lr` (now 2" in line, line
    rows = read_rows(out / "metrics.csv")
    assert [row["round"] for row in rows] == list(range(1, diverged))  # no row of the diverged round
    assert all(math.isfinite(row["train_loss"]) and math.isfinite(row["test_loss"]) for row in rows)
    checkpoint = RunFolder(out).load_checkpoint()
    assert checkpoint["progress"]["round"] == diverged - 1 and all_finite(checkpoint["global_state"])
    summary = strict_json(out / "summary.json")["overflow"]
    assert summary["diverged"] is True and summary["diverged_round"] == diverged
    assert summary["diverged_where"] == where and NOT_FINITE_LOSS.search(summary["diverged_reason"])
    assert summary["rounds"] == diverged - 1 and summary["final_test_accuracy"] == rows[-1]["test_accuracy"]


PARTITION = Partition([np.arange(0, 30), np.arange(30, 40)], num_samples=40, scheme="manual")


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_a_model_that_is_not_finite_while_its_loss_is_stops_in_that_round(tmp_path, bad):
    """Fed as an engine feeds it: round 2 has a finite loss and a non-finite model; nothing of round 2 is kept."""
    config = RunConfig(strategy="fedavg", rounds=4, num_partitions=2, checkpoint_every=1)
    recorder = Recorder(config, PARTITION, tmp_path)
    recorder.start()
    finite, broken = [torch.ones(3), torch.zeros(2)], [torch.ones(3), torch.tensor([0.0, bad])]
    for round_index, state in enumerate([finite, broken]):
        recorder.schedule_round(round_index)
        if state is broken:
            with pytest.raises(RunDiverged, match="diverged in round 2: the global model holds values that are not"):
                recorder.record_round(RoundStats(samples=40, loss_sum=20.0), {"accuracy": 0.5, "loss": 1.0},
                                      wall_s=0.1, global_state=state)
        else:
            recorder.record_round(RoundStats(samples=40, loss_sum=20.0), {"accuracy": 0.5, "loss": 1.0}, wall_s=0.1,
                                  global_state=state)
    assert [row["round"] for row in read_rows(tmp_path / "metrics.csv")] == [1]
    checkpoint = RunFolder(tmp_path).load_checkpoint()
    assert checkpoint["progress"]["round"] == 1 and all_finite(checkpoint["global_state"])
    summary = strict_json(tmp_path / "summary.json")["fedavg"]
    assert (summary["diverged"], summary["diverged_round"], summary["rounds"]) == (True, 2, 1)


@pytest.mark.parametrize("strategy", ["fedavg", "allreduce"])
def test_a_loss_that_is_not_finite_in_round_1_stops_there_naming_the_lr(tmp_path, strategy):
    """Rank (client) 1's images are NaN, so round 1's loss is not finite on any CPU; `--lr` 50 is what is named."""
    out = tmp_path / "run"
    line = assert_one_error_line(fedsim("run", "--strategy", strategy, *nan_shard_flags(tmp_path), "--lr", "50",
                                        "--rounds", "3", "--quiet", "--out", str(out)))
    assert line.startswith(f"fedsim run: error: diverged in round 1 ({WHO[strategy]} {NAN_RANK})"), line
    assert "lower `--lr` (now 50)" in line and "--server-lr" not in line, line
    assert not (out / "metrics.csv").exists() and not (out / "checkpoint.pt").exists()
    assert strict_json(out / "summary.json")[strategy]["diverged"] is True


def test_compare_goes_on_and_marks_the_diverged_strategy(tmp_path):
    """The method that overflows stops in round 4 with `--server-lr` named; allreduce runs its 5 rounds."""
    out = tmp_path / "cmp"
    result = fedsim("compare", *SMALL, "--strategies", f"{OVERFLOW},allreduce", "--server-lr", "2", "--rounds", "5",
                    "--out", str(out))
    assert result.returncode == 0, result.stderr
    warning = result.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("fedsim compare: warning: overflow diverged in round 4"), warning
    assert "the comparison goes on without it" in warning[0] and "`--server-lr`" in warning[0]
    table = (out / "comparison.txt").read_text().splitlines()
    overflow_line = next(line for line in table if line.startswith("overflow"))
    allreduce_line = next(line for line in table if line.startswith("allreduce"))
    assert "diverged in round 4" in overflow_line and overflow_line.split()[-1] == "3"
    assert "diverged" not in allreduce_line and allreduce_line.split()[-1] == "5"
    assert "diverged in round 4" in result.stdout
    summary = strict_json(out / "summary.json")
    assert summary["overflow"]["diverged"] is True and summary["overflow"]["diverged_round"] == 4
    assert summary["allreduce"]["diverged"] is False and summary["allreduce"]["diverged_round"] is None
    rows = read_rows(out / "metrics.csv")
    assert [row["round"] for row in rows if row["strategy"] == "overflow"] == [1, 2, 3]
    assert [row["round"] for row in rows if row["strategy"] == "allreduce"] == [1, 2, 3, 4, 5]
    assert all(math.isfinite(row["train_loss"]) for row in rows)


#: How a strategy names where a loss stopped being finite: FedAvg's clients, the gradient strategies' ranks.
WHO = {"fedavg": "client", "allreduce": "rank"}


@pytest.mark.slow
@pytest.mark.parametrize("strategy", sorted(WHO))
def test_a_flower_simulation_that_diverges_ends_with_the_same_line(tmp_path, strategy):
    """The server records in Flower's process; the command reads the divergence back from the summary."""
    import os

    out = tmp_path / "run"
    env = {**os.environ, "FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "fedsim", "flower", "simulate", "--strategy", strategy,
               *nan_shard_flags(tmp_path), "--rounds", "3", "--verbose", "--out", str(out)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == DIVERGED, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fedsim flower simulate: error: diverged in round 1 ({WHO[strategy]} {NAN_RANK})"), last
    assert strict_json(out / "summary.json")[strategy]["diverged_round"] == 1
    # --verbose shows Flower's log here rather than keep it in the run's folder
    assert "Starting Flower Simulation" in result.stdout and not (out / "flower.log").exists()


# Three ranks of 20 samples each, whose every training image on `NAN_RANK`'s shard is NaN: that rank's loss is
# not finite at the round's first step on any CPU, and every rank's at the steps after it (the combined gradient
# carries the NaN into the model), so only a rank named at its first non-finite step is the right one.
NAN_RANK, RANKS, PER_RANK = 1, 3, 20
SHARDS = Partition([np.arange(rank * PER_RANK, (rank + 1) * PER_RANK) for rank in range(RANKS)],
                   num_samples=RANKS * PER_RANK, scheme="manual")


def nan_shard_data():
    """Float images of 4 classes, those of rank `NAN_RANK`'s shard NaN; statistics given, as NaN has none."""
    from fedsim.data import Dataset

    generator = torch.Generator().manual_seed(0)
    images = torch.rand(RANKS * PER_RANK, 1, 8, 8, generator=generator)
    images[NAN_RANK * PER_RANK : (NAN_RANK + 1) * PER_RANK] = math.nan
    labels = torch.arange(RANKS * PER_RANK) % 4
    return Dataset("nan-shard", images, labels, images[:PER_RANK].clone(), labels[:PER_RANK].clone(), num_classes=4,
                   mean=(0.5,), std=(0.3,))


@pytest.mark.parametrize("settings", [
    {"strategy": "allreduce"},  # one forward of every rank's samples (fused)
    {"strategy": "allreduce", "fused": False},  # rank by rank
    {"strategy": "reweighted", "weights": "size"},
    {"strategy": "reweighted", "weights": "dynamic", "fused": False},  # each rank's gradient apart
], ids=["fused", "per-rank", "reweighted-size", "reweighted-dynamic"])
def test_a_gradient_strategy_names_the_first_rank_whose_loss_is_not_finite(tmp_path, settings):
    from fedsim.engines.inprocess import run

    config = RunConfig(model="mlp", num_partitions=RANKS, batch_size=5, rounds=2, **settings)
    with pytest.raises(RunDiverged) as diverged:
        run(config, tmp_path / "run", data=nan_shard_data(), partition=SHARDS)
    assert diverged.value.where == f"rank {NAN_RANK}" and diverged.value.round == 1
    assert str(diverged.value).startswith(f"diverged in round 1 (rank {NAN_RANK}): the training loss is nan")
    summary = strict_json(tmp_path / "run" / "summary.json")[config.label]
    assert summary["diverged_where"] == f"rank {NAN_RANK}"


NAN_DATA_FILE = f"""
import math

import torch

from fedsim.data import Dataset


def load():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand({RANKS * PER_RANK}, 1, 8, 8, generator=generator)
    images[{NAN_RANK * PER_RANK} : {(NAN_RANK + 1) * PER_RANK}] = math.nan
    labels = torch.arange({RANKS * PER_RANK}) % 4
    return Dataset("nan-shard", images, labels, images[:{PER_RANK}].clone(), labels[:{PER_RANK}].clone(),
                   num_classes=4, mean=(0.5,), std=(0.3,))
"""


def nan_shard_flags(tmp_path) -> list[str]:
    """Return the flags of a run on `NAN_DATA_FILE` (by reference) with one client or rank per shard of `SHARDS`."""
    (tmp_path / "nan_data.py").write_text(NAN_DATA_FILE)
    SHARDS.save(tmp_path / "shards.json")
    return ["--model", "mlp", "--dataset", f"{tmp_path / 'nan_data.py'}:load", "--partition-file",
            str(tmp_path / "shards.json"), "--batch-size", "5"]


@pytest.mark.slow
def test_ddp_names_the_first_rank_whose_loss_is_not_finite(tmp_path):
    """Each rank knows only its own losses: one all-reduce puts the ranks' first non-finite steps side by side."""
    from fedsim.engines.distributed.launch import rank_environment

    out = tmp_path / "run"
    command = [sys.executable, "-m", "fedsim", "ddp", "--nproc", str(RANKS), "--strategy", "allreduce",
               *nan_shard_flags(tmp_path), "--rounds", "2", "--quiet", "--out", str(out)]
    result = subprocess.run(command, env=rank_environment(RANKS), capture_output=True, text=True, timeout=300)
    assert result.returncode == DIVERGED, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fedsim ddp: error: diverged in round 1 (rank {NAN_RANK}): the training loss is nan"), last
    assert "lower `--lr` (now 0.05)" in last and "no checkpoint was written yet" in last  # every rank stopped
    summary = strict_json(out / "summary.json")["allreduce"]
    assert summary["diverged_where"] == f"rank {NAN_RANK}" and summary["diverged_round"] == 1
