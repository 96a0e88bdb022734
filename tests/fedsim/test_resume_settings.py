"""Resuming takes the run's settings from its folder: only `--out`, and `--rounds` to extend; config.json stays true."""

import json
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import torch

import fedsim
from fedsim.provenance import environment, source_commit
from fedsim.results.folder import read_rows, saved_settings

from .test_cli import fedsim as fedsim_command
from .test_cli_settings import error_line

# Settings away from their defaults, so that a resume that fell back on a default would be refused or seen.
SETTINGS = ["--dataset", "digits", "--model", "mlp", "--batch-size", "20", "--num-partitions", "4", "--lr", "0.1",
            "--fraction", "0.5", "--seed", "3", "--quiet"]


def recorded(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory) -> Path:
    """A finished two-round run, copied by each test that changes it."""
    out = tmp_path_factory.mktemp("runs") / "r"
    result = fedsim_command("run", *SETTINGS, "--rounds", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def copy_of(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / run.name))


def test_resume_needs_only_out_and_rounds_extends_the_run_and_its_config(two_rounds, tmp_path):
    out = copy_of(two_rounds, tmp_path)
    before = recorded(out)
    result = fedsim_command("run", "--resume", "--out", str(out), "--rounds", "3")
    assert result.returncode == 0, result.stderr
    assert "lr=0.1" in result.stdout and "C=0.5" in result.stdout  # the run's own settings, not the defaults
    assert [row["round"] for row in read_rows(out / "metrics.csv")] == [1, 2, 3]
    after = recorded(out)
    assert saved_settings(after) == {**saved_settings(before), "rounds": 3}  # the file says what the run now is
    assert [entry["from_round"] for entry in after["environment"]] == [0, 2]


def test_resume_without_rounds_continues_an_interrupted_run_to_its_recorded_end(two_rounds, tmp_path):
    out = copy_of(two_rounds, tmp_path)
    # what a run of 3 rounds stopped after round 2 leaves: its config says 3, its checkpoint 2
    config = recorded(out)
    (out / "config.json").write_text(json.dumps({**config, "rounds": 3}))
    result = fedsim_command("run", "--resume", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert [row["round"] for row in read_rows(out / "metrics.csv")] == [1, 2, 3]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lr", "0.2"], "it holds a run of other settings (`--lr` 0.1 -> 0.2)"),
        (["--dataset", "mnist-5k"], "(`--dataset` 'digits' -> 'mnist-5k')"),
        (["--rounds", "1"], "cannot resume {out} with `--rounds`=1: its checkpoint is already at round 2, and a run "
                            "cannot be shortened; `--rounds` must be >= 2 (leave it out to keep the run's 2)"),
    ],
)
def test_a_resume_that_changes_a_setting_is_refused_and_leaves_the_folder_as_it_was(two_rounds, tmp_path, flags,
                                                                                      message):
    out = copy_of(two_rounds, tmp_path)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    line = error_line(fedsim_command("run", "--resume", "--out", str(out), *flags))
    assert message.format(out=out) in line
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


def test_a_config_json_is_a_settings_file(two_rounds, tmp_path):
    result = fedsim_command("run", "--config", str(two_rounds / "config.json"), "--out", str(tmp_path / "again"))
    assert result.returncode == 0, result.stderr
    assert saved_settings(recorded(tmp_path / "again")) == saved_settings(recorded(two_rounds))
    assert read_rows(tmp_path / "again" / "metrics.csv")[-1]["samples_seen"] == \
        read_rows(two_rounds / "metrics.csv")[-1]["samples_seen"]


def test_resume_on_another_machine_or_version_is_allowed_and_recorded(two_rounds, tmp_path):
    out = copy_of(two_rounds, tmp_path)
    config = recorded(out)
    elsewhere = {**config["environment"][0], "torch": "0.0.1", "cpu_capability": "DEFAULT", "threads": 64}
    (out / "config.json").write_text(json.dumps({**config, "environment": [elsewhere]}))
    result = fedsim_command("run", "--resume", "--out", str(out), "--rounds", "3")
    assert result.returncode == 0, result.stderr
    here, there = recorded(out)["environment"][1], recorded(out)["environment"][0]
    assert there == elsewhere and here["torch"] == torch.__version__


def test_config_json_records_what_produced_the_result(two_rounds):
    entry = recorded(two_rounds)["environment"][0]
    assert entry["from_round"] == 0
    assert entry["fedsim"] == fedsim.__version__ and entry["torch"] == torch.__version__
    assert entry["flwr"] == metadata.version("flwr")
    assert entry["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(entry["threads"], int) and entry["threads"] >= 1
    source = Path(fedsim.__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
    if (source / ".git").exists() and head.returncode == 0:
        assert entry["git_commit"] == head.stdout.strip()
    else:
        assert entry["git_commit"] is None


def test_the_commit_is_none_without_git(monkeypatch):
    monkeypatch.setenv("PATH", "")  # no git to run: no commit, and no failure
    assert source_commit() is None
    assert environment(4)["git_commit"] is None and environment(4)["from_round"] == 4


def test_compare_resumes_from_out_alone_and_its_config_says_the_new_total(tmp_path):
    out = tmp_path / "c"
    first = fedsim_command("compare", *SETTINGS, "--strategies", "fedavg,allreduce", "--uneven", "cycle",
                           "--rounds", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert recorded(out)["strategies"] == ["fedavg", "allreduce"] and recorded(out)["uneven"] == "cycle"
    result = fedsim_command("compare", "--resume", "--out", str(out), "--rounds", "2")
    assert result.returncode == 0, result.stderr
    assert [recorded(folder)["rounds"] for folder in (out, out / "fedavg", out / "allreduce")] == [2, 2, 2]
    assert recorded(out / "allreduce")["uneven"] == "cycle" and recorded(out / "fedavg")["fraction"] == 0.5
    assert [entry["from_round"] for entry in recorded(out)["environment"]] == [0, 1]
    for flags, message in [
        (["--strategies", "fedavg"], "it compares fedavg,allreduce, not fedavg; resume with `--strategies`="
                                     "'fedavg,allreduce' (or leave it out)"),
        (["--fraction", "1"], "(`--fraction` 0.5 -> 1.0)"),
        (["--rounds", "1"], "`--rounds` must be >= 2"),
    ]:
        assert message in error_line(fedsim_command("compare", "--resume", "--out", str(out), *flags))


@pytest.mark.slow
def test_ddp_resumes_from_out_alone(tmp_path):
    out = tmp_path / "d"
    ddp = ["ddp", "--nproc", "2", "--strategy", "allreduce", "--dataset", "digits", "--model", "mlp",
           "--batch-size", "20", "--num-partitions", "2", "--lr", "0.1", "--quiet"]
    first = fedsim_command(*ddp, "--rounds", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    result = fedsim_command("ddp", "--nproc", "2", "--resume", "--out", str(out), "--rounds", "2")
    assert result.returncode == 0, result.stderr
    assert [row["round"] for row in read_rows(out / "metrics.csv")] == [1, 2]
    assert recorded(out)["rounds"] == 2 and recorded(out)["lr"] == 0.1
    line = error_line(fedsim_command("ddp", "--nproc", "2", "--resume", "--out", str(out), "--lr", "0.3"))
    assert "(`--lr` 0.1 -> 0.3)" in line
