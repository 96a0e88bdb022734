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
def test_compare_strategies_writes_every_output_and_a_second_invocation_reruns_nothing(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from schemes import slug

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
    assert all(float(row["last5_rounds"]) == 2 for row in rows) and " (of 2) |" in (out / "table.md").read_text()
    # each run's worst 10%: the mean of its ceil(10 / 10) = 1 lowest clients' accuracies after the last round
    for run in csv.DictReader(open(out / "results.csv")):
        folder = out / "runs" / slug(run["partition"]) / f"seed-{run['seed']}" / run["strategy"]
        with open(folder / "clients.csv") as table:
            last = sorted(float(row["accuracy"]) for row in csv.DictReader(table) if row["round"] == "2")
        assert len(last) == 10
        assert float(run["worst10_acc"]) == pytest.approx(last[0], abs=1e-12), folder
        assert float(run["client_acc"]) == pytest.approx(sum(last) / 10, abs=1e-12), folder
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
    assert "| 0.710 (7) | 0.690 (of 3) |" in markdown(plan, [{**row, "last5_rounds": 3.0}])  # a 3-round grid
    assert "| 0.710 (7) | 0.690 |" in markdown(plan, [{**row, "last5_rounds": 5.0}])


def test_the_grid_reports_the_mean_of_the_worst_10_percent_not_the_10th_percentile(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from grid_report import measure

    summary = {"final_test_accuracy": 0.8, "best_test_accuracy": 0.9, "best_round": 3, "last_5_mean_test_accuracy": 0.7,
               "last_5_mean_rounds": 3, "bytes_communicated": 1e6, "wall_s": 1.0, "final_client_acc_mean": 0.75,
               "final_client_acc_worst10": 0.25, "final_client_acc_p10": 0.55}
    measured = measure({"summary": summary, "rows": []}, 0.9)
    assert (measured["client_acc"], measured["worst10_acc"], measured["last5_rounds"]) == (0.75, 0.25, 3)
    del summary["final_client_acc_worst10"]  # a run from before the statistic: not measured, not the percentile
    assert math.isnan(measure({"summary": summary, "rows": []}, 0.9)["worst10_acc"])


def test_compare_strategies_refuses_a_folder_it_did_not_write_and_an_unknown_partition(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "holds no grid; nothing in it is overwritten" in result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]
    result = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), "--out", str(tmp_path / "g"),
                             "--partitions", "Dir(7)"], capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "--partitions 'Dir(7)': unknown 'Dir(7)'" in result.stderr


@pytest.mark.slow
def test_a_diverged_run_is_done_marked_and_left_out_of_the_averages_on_every_invocation(tmp_path):
    """A method that overflows in round 4 on any CPU (tests/fedsim/overflow_method.py) beside FedAvg."""
    out = tmp_path / "grid"
    overflow = f"{BENCHMARKS.parent / 'tests' / 'fedsim' / 'overflow_method.py'}:OverflowInRound"
    args = ["--preset", "quick", "--dataset", "digits", "--strategies", f"fedavg,{overflow}", "--partitions", "IID",
            "--seeds", "1", "--rounds", "4", "--out", str(out), "--quiet"]
    first = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), *args], capture_output=True,
                           text=True, check=False)
    assert first.returncode == 0, first.stderr
    assert "grid: overflow on IID, seed 0, diverged in round 4 (client " in first.stderr
    assert "the grid goes on" in first.stderr
    folder = out / "runs" / "iid" / "seed-0" / "overflow"
    stamps = {path: path.stat().st_mtime_ns for path in folder.iterdir()}
    second = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), *args], capture_output=True,
                            text=True, check=False)
    assert second.returncode == 0 and "diverged in round" not in second.stderr, second.stderr  # not run again
    assert {path: path.stat().st_mtime_ns for path in folder.iterdir()} == stamps
    for printed in (first.stdout, second.stdout):
        assert "| IID |" in printed and "| diverged |" in printed
        assert ("1 run(s) diverged, done and left out of the averages:\n"
                "  overflow on IID, seed 0, diverged in round 4 (client") in printed
    with open(out / "results.csv") as table:
        runs = {row["strategy"]: row for row in csv.DictReader(table)}
    assert (runs["overflow"]["diverged"], runs["overflow"]["diverged_round"]) == ("True", "4")
    assert (runs["fedavg"]["diverged"], runs["fedavg"]["diverged_round"]) == ("False", "")
    with open(out / "table.csv") as table:
        cells = {row["strategy"]: row for row in csv.DictReader(table)}
    assert (cells["overflow"]["seeds"], cells["overflow"]["diverged"]) == ("0", "1")
    assert cells["overflow"]["final_acc"] == "nan"  # no seed finished: no accuracy to average
    assert (cells["fedavg"]["seeds"], cells["fedavg"]["diverged"]) == ("1", "0")
    assert 0.0 <= float(cells["fedavg"]["final_acc"]) <= 1.0


def test_the_grids_tables_average_the_seeds_that_finished_and_count_those_that_diverged(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from grid_report import markdown, table_rows

    def run(seed, strategy, accuracy, diverged=False):
        return {"partition": "IID", "seed": seed, "strategy": strategy, "diverged": diverged, "final_acc": accuracy,
                "best_acc": accuracy, "best_round": 3.0, "last5_acc": accuracy, "last5_rounds": 3.0,
                "client_acc": math.nan, "worst10_acc": math.nan, "personal_acc": math.nan,
                "rounds_to_target": math.nan, "mb_communicated": 1.0, "wall_s": 1.0,
                "heterogeneity": {"mean_emd": 0.1, "mean_jensen_shannon": 0.01}}

    settings = {"dataset": "digits", "model": "mlp", "num_partitions": 4, "rounds": 3, "local_epochs": 1,
                "batch_size": 10, "lr": 0.05}
    plan = {"seeds": 2, "strategies": ["fedavg", "fedadam", "overflow"], "partitions": ["IID"], "target": 0.9,
            "settings": settings, "engine": "inprocess"}
    # fedadam's second seed diverged after its numbers fell to 0.1: they stay out of its mean
    runs = [run(0, "fedavg", 0.8), run(1, "fedavg", 0.6), run(0, "fedadam", 0.7), run(1, "fedadam", 0.1, True),
            run(0, "overflow", 0.5, True), run(1, "overflow", 0.5, True)]
    rows = {row["strategy"]: row for row in table_rows(plan, runs)}
    assert (rows["fedavg"]["seeds"], rows["fedavg"]["diverged"], rows["fedavg"]["final_acc"]) == (2, 0, 0.7)
    assert (rows["fedadam"]["seeds"], rows["fedadam"]["diverged"], rows["fedadam"]["final_acc"]) == (1, 1, 0.7)
    assert (rows["overflow"]["seeds"], rows["overflow"]["diverged"]) == (0, 2)
    assert math.isnan(rows["overflow"]["final_acc"])
    table = markdown(plan, list(rows.values()))
    assert "| IID | 0.10 | 0.700 ± 0.100 | 0.700 (1 diverged) | diverged |" in table
    assert "| IID | 0.10 | 0.010 | overflow | diverged | — | — | — (0/0) | — | — |" in table


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


def test_the_grids_dp_axis_runs_each_strategy_at_each_noise_and_draws_accuracy_against_epsilon(tmp_path):
    out = tmp_path / "grid"
    args = ["--dataset", "digits", "--strategies", "fedavg,fedadam", "--partitions", "Dir(0.5)", "--seeds", "1",
            "--rounds", "2", "--num-partitions", "20", "--fraction", "0.2", "--client-sampling", "poisson",
            "--dp-noise", "0,1", "--dp-clip", "0.5", "--out", str(out), "--quiet"]
    printed = script("compare_strategies.py", *args)
    assert "| fedavg z=0 | fedavg z=1 | fedadam z=0 | fedadam z=1 |" in printed
    with open(out / "table.csv") as table:
        rows = {row["strategy"]: row for row in csv.DictReader(table)}
    assert list(rows) == ["fedavg z=0", "fedavg z=1", "fedadam z=0", "fedadam z=1"]
    assert rows["fedavg z=0"]["epsilon"] == "inf" and 0 < float(rows["fedavg z=1"]["epsilon"]) < math.inf
    assert rows["fedavg z=1"]["epsilon"] == rows["fedadam z=1"]["epsilon"]  # the same sampling, noise and rounds
    assert "| ∞ |" in (out / "table.md").read_text()
    assert (out / "privacy" / "dir-0.5.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "runs" / "dir-0.5" / "seed-0" / "fedavg z=1" / "summary.json").read_text())
    assert summary["fedavg"]["dp_noise_multiplier"] == 1.0 and summary["fedavg"]["dp_clip"] == 0.5
    allreduce = [*args[:3], "allreduce", *args[4:-3], "--out", str(tmp_path / "refused")]
    refused = subprocess.run([sys.executable, str(BENCHMARKS / "compare_strategies.py"), *allreduce],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "allreduce z=0: `dp_clip`=0.5 does nothing with" in refused.stderr
    assert not (tmp_path / "refused").exists()
