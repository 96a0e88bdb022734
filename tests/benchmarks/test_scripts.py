"""The benchmark scripts run end to end on small settings, so they do not rot."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(name, *args):
    result = subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_partition_speed_prints_the_ratio():
    out = script("partition_speed.py", "--samples", "20000", "--classes", "10", "--partitions", "20", "--repeats", "1")
    assert "ratio fedsim dirichlet(self_balancing) / reference" in out


def test_partition_report_writes_table_and_figures(tmp_path):
    out = script("partition_report.py", "--out", str(tmp_path))
    assert "Dir(0.1)" in out
    assert {"summary.txt", "summary.json", "comparison.png", "iid.png", "dir-0.1.json"} <= {p.name for p in
                                                                                           tmp_path.iterdir()}


@pytest.mark.slow
def test_strategy_sweep_writes_table_and_figure(tmp_path):
    out = script("strategy_sweep.py", "--model", "mlp", "--rounds", "1", "--batch-size", "50", "--num-partitions",
                 "5", "--out", str(tmp_path))
    assert "shards" in out
    results = json.loads((tmp_path / "sweep.json").read_text())
    assert set(results) == {"IID", "Dir(0.5)", "Dir(0.1)", "#C=2", "shards"}
    assert set(results["IID"]) == {"allreduce", "reweighted", "fedavg"}
    assert (tmp_path / "sweep.png").stat().st_size > 0


def test_engine_speed_memory_child_runs_a_round():
    out = script("engine_speed.py", "--rss-child", "10")
    assert json.loads(out.strip().splitlines()[-1])["clients"] == 10


@pytest.mark.slow
def test_ddp_speed_prints_the_four_jobs_and_their_ratios():
    out = script("ddp_speed.py", "--model", "mlp", "--rounds", "3", "--repeats", "1", "--device", "cpu")
    results = json.loads(out.strip().splitlines()[-1])
    assert list(results) == ["(a) in-process, 2 ranks", "(b) DDP, 2 processes", "(c) (b) + fp16 compression",
                             "(d) (b) + PowerSGD rank 2"]
    assert results["(a) in-process, 2 ranks"]["ratio_to_a"] == 1.0
    assert all(job["samples_per_s"] > 0 for job in results.values())
    sent = [job["bytes_per_step_per_rank"] for job in results.values()]
    assert sent[2] * 2 == sent[1] and sent[3] < sent[2]
