import json
import os
import subprocess
import sys

import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.build import build_model
from fedsim.schedule import model_bytes
from fedsim.results.folder import METRIC_COLUMNS, read_rows
from fedsim.schedule import SampleGrid
from partitions import Partition

from .checkpoints import kill_resume_and_run_straight

QUICK = {"model": "mlp", "rounds": 2, "batch_size": 20, "lr": 0.05, "num_partitions": 5, "fraction": 0.4}
FEDAVG = RunConfig(strategy="fedavg", **QUICK)
GRID = SampleGrid.from_config(FEDAVG)  # FedAvg's rounds, as `compare` gives every strategy


def test_run_folder_contents(tmp_path, mnist5k):
    config = RunConfig(strategy="fedavg", **QUICK)
    result = run(config, tmp_path, data=mnist5k)
    assert RunConfig.from_mapping(json.loads((tmp_path / "config.json").read_text())) == config
    assert Partition.load(tmp_path / "partition.json").num_partitions == 5
    rows = read_rows(tmp_path / "metrics.csv")
    assert list(rows[0])[: len(METRIC_COLUMNS)] == list(METRIC_COLUMNS)
    assert [row["round"] for row in rows] == [1, 2]
    assert rows == result.rows
    summary = json.loads((tmp_path / "summary.json").read_text())["fedavg"]
    for key in ("final_test_accuracy", "final_test_loss", "best_test_accuracy", "bytes_communicated", "wall_s",
                "rounds"):
        assert key in summary
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert checkpoint["progress"]["round"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_bytes_are_counted_from_the_tensors_that_travel(mnist5k):
    model = build_model(RunConfig(**QUICK), mnist5k, torch.device("cpu"))
    params, buffers = model_bytes(model)
    assert params == sum(p.numel() for p in model.parameters()) * 4 and buffers == 0
    fedavg = run(RunConfig(strategy="fedavg", **{**QUICK, "rounds": 1}), data=mnist5k)
    assert fedavg.rows[0]["bytes_communicated"] == 2 * 2 * params  # 2 clients, state down and delta up
    assert fedavg.rows[0]["bytes_up"] == fedavg.rows[0]["bytes_down"] == 2 * params
    allreduce = run(FEDAVG.for_strategy("allreduce").replace(rounds=1), data=mnist5k, grid=GRID)
    steps = allreduce.rows[0]["samples_seen"] // (5 * 20)  # equal shards of 800: every rank is in every step
    assert allreduce.rows[0]["bytes_communicated"] == steps * 5 * 2 * params


def test_strategies_report_on_the_same_samples_seen_grid(mnist5k):
    seen = {s: [row["samples_seen"] for row in run(FEDAVG.for_strategy(s), data=mnist5k, grid=GRID).rows]
            for s in ("allreduce", "reweighted", "fedavg")}
    for rounds in zip(*seen.values()):
        assert max(rounds) - min(rounds) < 5 * 20  # within one allreduce step of K x B samples


def test_resume_extends_a_finished_run(tmp_path, mnist5k):
    config = RunConfig(strategy="reweighted", weights="class-balanced", **{**QUICK, "fraction": 1.0})
    run(config, tmp_path, data=mnist5k)
    longer = run(config.replace(rounds=3), tmp_path, resume=True, data=mnist5k)
    straight = run(config.replace(rounds=3), data=mnist5k)
    assert [row["round"] for row in longer.rows] == [1, 2, 3]
    for a, b in zip(longer.global_state, straight.global_state):
        assert torch.equal(a, b)


def test_resume_refuses_a_different_config_and_fresh_start_refuses_an_old_run(tmp_path, mnist5k):
    config = RunConfig(strategy="fedavg", **QUICK)
    run(config, tmp_path, data=mnist5k)
    with pytest.raises(ValueError, match=r"other settings \(`lr` 0.05 -> 0.1\)"):
        run(config.replace(lr=0.1), tmp_path, resume=True, data=mnist5k)
    with pytest.raises(ValueError, match="already holds a run"):
        run(config, tmp_path, data=mnist5k)


def _fedsim_run(out, *extra, rounds):
    args = ["run", "--strategy", "fedavg", "--model", "mlp", "--rounds", str(rounds), "--batch-size", "10",
            "--partition", "dirichlet", "--alpha", "0.3", "--num-partitions", "10", "--server-momentum", "0.5",
            "--quiet", "--out", str(out), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "fedsim", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.numerics
@pytest.mark.slow
def test_run_killed_with_sigkill_resumes_to_the_same_parameters(tmp_path):
    rounds = kill_resume_and_run_straight(_fedsim_run, tmp_path, kill_at=2, rounds_at_least=6)
    final = [torch.load(tmp_path / name / "model.pt", weights_only=True)["state"] for name in ("killed", "straight")]
    assert all(torch.equal(a, b) for a, b in zip(*final))
    assert [row["round"] for row in read_rows(tmp_path / "killed" / "metrics.csv")] == list(range(1, rounds + 1))
