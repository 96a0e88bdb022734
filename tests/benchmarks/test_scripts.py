"""The benchmark scripts run end to end on small settings, so they do not rot."""

import csv
import json
import math
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


def test_client_eval_speed_prints_the_ratio():
    out = script("client_eval_speed.py", "--clients", "20", "--model", "mlp", "--repeats", "1")
    assert "20 clients" in out and "ratio a/b:" in out


def test_partition_speed_prints_the_ratio():
    out = script("partition_speed.py", "--samples", "20000", "--classes", "10", "--partitions", "20", "--repeats", "1")
    assert "ratio fedsim dirichlet(self_balancing) / reference" in out


def test_partition_report_writes_table_and_figures(tmp_path):
    out = script("partition_report.py", "--out", str(tmp_path))
    assert "Dir(0.1)" in out
    assert {"summary.txt", "summary.json", "comparison.png", "iid.png", "dir-0.1.json"} <= {p.name for p in
                                                                                           tmp_path.iterdir()}


@pytest.mark.slow
def test_compare_strategies_writes_every_output_and_a_second_invocation_reruns_nothing(tmp_path):
    out = tmp_path / "grid"
    # a user's algorithm, by the path of its file, beside the built-in arms
    feddyn = f"{BENCHMARKS.parent / 'examples' / 'algorithms' / 'feddyn.py'}:FedDyn"
    args = ["--preset", "quick", "--dataset", "digits", "--strategies", f"allreduce,reweighted-dynamic,fedavg,{feddyn}",
            "--partitions", "IID,#C=2", "--seeds", "2", "--rounds", "2", "--local-test-fraction", "0.2",
            "--personalize-steps", "1", "--out", str(out), "--quiet"]
    printed = script("compare_strategies.py", *args)
    assert "| #C=2 |" in printed
    names = {str(path.relative_to(out)) for path in out.rglob("*") if path.is_file() and "runs" not in path.parts}
    assert names == {"grid.json", "results.csv", "table.csv", "table.md", "heatmap.png", "curves/iid.png",
                     "curves/c2.png", "partitions/iid-stacked.png", "partitions/iid-bubbles.png",
                     "partitions/c2-stacked.png", "partitions/c2-bubbles.png", "clients/iid.png", "clients/c2.png"}
    assert all((out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in names if name.endswith(".png"))
    with open(out / "table.csv") as table:
        rows = list(csv.DictReader(table))
    assert [(row["partition"], row["strategy"], row["seeds"]) for row in rows] == [
        (scheme, arm, "2") for scheme in ("IID", "#C=2") for arm in ("allreduce", "reweighted-dynamic", "fedavg", "feddyn")]
    assert all(0.0 <= float(row["final_acc"]) <= 1.0 and float(row["mb_communicated"]) > 0 for row in rows)
    assert all(1 <= float(row["best_round"]) <= 2 and 0.0 <= float(row["last5_acc"]) <= 1.0 for row in rows)
    assert ("| final acc | best acc (round) | last-5 mean acc | clients' mean acc | worst 10% acc | personalized acc |"
            in (out / "table.md").read_text())
    assert all(0.0 <= float(row["worst10_acc"]) <= float(row["client_acc"]) <= 1.0 for row in rows)
    assert float(rows[4]["emd"]) > float(rows[0]["emd"])  # #C=2 is further from the global label mix than IID
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 16

    summaries = sorted(out.glob("runs/*/*/*/summary.json"))
    assert len(summaries) == 16
    stamps = [path.stat().st_mtime_ns for path in summaries]
    lost = out / "runs" / "c2" / "seed-1" / "fedavg"
    (lost / "summary.json").unlink()  # as if killed after its last checkpoint: it resumes from there
    assert "| #C=2 |" in script("compare_strategies.py", *args)
    assert [path.stat().st_mtime_ns for path in summaries if path.parent != lost] == [
        stamp for path, stamp in zip(summaries, stamps) if path.parent != lost]
    assert (lost / "summary.json").exists()


def test_a_grid_of_one_seed_prints_each_value_alone_and_two_seeds_their_spread(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from grid_report import markdown

    settings = {"dataset": "digits", "model": "mlp", "num_partitions": 4, "rounds": 9, "local_epochs": 1,
                "batch_size": 10, "lr": 0.05}
    row = {"partition": "IID", "emd": 0.1, "js": 0.01, "strategy": "fedavg", "seeds": 1, "final_acc": 0.6841,
           "final_acc_std": 0.0, "best_acc": 0.71, "best_acc_std": 0.0, "best_round": 7.0, "last5_acc": 0.69,
           "last5_acc_std": 0.0, "rounds_to_target": math.nan, "reached": 0, "mb_communicated": 3.0, "wall_s": 1.0}
    plan = {"seeds": 1, "strategies": ["fedavg"], "partitions": ["IID"], "target": 0.9, "settings": settings,
            "engine": "inprocess"}
    one = markdown(plan, [row])
    assert "±" not in one and "| IID | 0.10 | 0.684 |" in one and "| 0.684 | 0.710 (7) | 0.690 |" in one
    two = markdown({**plan, "seeds": 2}, [{**row, "seeds": 2, "final_acc_std": 0.01, "best_round": 6.5}])
    assert "0.684 ± 0.010" in two and "0.710 ± 0.000 (6.5)" in two


def test_compare_strategies_refuses_a_folder_it_did_not_write_and_an_unknown_partition(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "holds no grid; nothing in it is overwritten" in result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]
    result = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), "--out", str(tmp_path / "g"),
                             "--partitions", "Dir(7)"], capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "--partitions 'Dir(7)': unknown 'Dir(7)'" in result.stderr


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


@pytest.mark.parametrize("args, phrase", [(["--engines", "a,e"], "--engines: unknown engine 'e'"),
                                          (["--jobs", "J,Q"], "--jobs: unknown job 'Q'"),
                                          (["--rounds", "0"], "--rounds must be at least 1")])
def test_flower_speed_refuses_bad_input_before_running_anything(args, phrase):
    result = subprocess.run([sys.executable, str(BENCHMARKS / "flower_speed.py"), *args], capture_output=True,
                            text=True, check=False, timeout=60)
    assert result.returncode == 2 and phrase in result.stderr and not result.stdout


@pytest.mark.slow
def test_the_plain_flower_reference_app_runs_under_flwr_run_and_reports_its_rounds():
    """flower_speed.py's (d): the quickstart-style app, submitted with ``flwr run`` to a simulation SuperLink."""
    printed = json.loads(script("flower_reference.py", "2", "1", "2").strip().splitlines()[-1])
    assert 0.1 < printed["accuracy"] <= 1.0 and printed["wall_s"] > 0
    assert len(printed["round_s"]) == 2 and all(seconds > 0 for seconds in printed["round_s"])
