"""No command loses a user's work: refused resumes, foreign folders, interrupts, replayed log lines."""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.interrupts import deferred_interrupt
from fedsim.results.folder import MARKER, read_rows

from .checkpoints import ENDLESS_ROUNDS, checkpoint_round, wait_for_checkpoint
from .test_cli import fedsim

QUICK = ["--strategy", "fedavg", "--model", "mlp", "--rounds", "1", "--batch-size", "20", "--num-partitions", "4",
         "--fraction", "0.5", "--quiet"]


def assert_refused(result, *phrases):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "", "nothing may be printed before the error"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_resume_of_a_folder_that_does_not_exist_is_refused(tmp_path):
    result = fedsim("run", *QUICK, "--out", str(tmp_path / "typo"), "--resume")
    assert_refused(result, "does not exist", "--resume")
    assert not (tmp_path / "typo").exists()


def test_resume_of_a_folder_without_a_run_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert_refused(fedsim("run", *QUICK, "--out", str(tmp_path), "--resume"), "holds no fedsim run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_resume_without_a_checkpoint_is_refused_and_keeps_the_metrics(tmp_path):
    out = tmp_path / "run"
    assert fedsim("run", *QUICK, "--out", str(out)).returncode == 0
    (out / "checkpoint.pt").unlink()
    metrics = (out / "metrics.csv").read_text()
    assert_refused(fedsim("run", *QUICK, "--out", str(out), "--resume"), "no checkpoint.pt", "--out")
    assert (out / "metrics.csv").read_text() == metrics


def test_a_folder_of_the_users_own_files_is_never_written_into(tmp_path):
    (tmp_path / "config.json").write_text('{"mine": true}')
    assert_refused(fedsim("run", *QUICK, "--out", str(tmp_path)), "not empty", "holds no fedsim run")
    assert (tmp_path / "config.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_out_that_is_a_file_or_cannot_be_made_is_named_as_such(tmp_path):
    (tmp_path / "a_file").write_text("x")
    assert_refused(fedsim("run", *QUICK, "--out", str(tmp_path / "a_file")), "is a file, not a folder")
    assert_refused(fedsim("run", *QUICK, "--out", str(tmp_path / "a_file" / "run")), "cannot write to",
                   "Not a directory")
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))


def test_a_run_folder_carries_the_marker_and_an_empty_folder_is_fine(tmp_path):
    assert fedsim("run", *QUICK, "--out", str(tmp_path)).returncode == 0
    assert (tmp_path / MARKER).exists() and (tmp_path / "learning_curves.png").exists()


def test_resume_drops_the_log_lines_of_replayed_rounds(tmp_path, mnist5k):
    config = RunConfig(strategy="fedavg", model="mlp", rounds=2, batch_size=20, num_partitions=4, fraction=0.5)
    run(config, tmp_path, data=mnist5k)
    shutil.copy(tmp_path / "checkpoint.pt", tmp_path / "round2.pt")
    run(config.replace(rounds=4), tmp_path, resume=True, data=mnist5k)  # logs rounds 3 and 4
    os.replace(tmp_path / "round2.pt", tmp_path / "checkpoint.pt")  # as if killed after round 2's checkpoint
    run(config.replace(rounds=4), tmp_path, resume=True, data=mnist5k)
    lines = (tmp_path / "log.txt").read_text().splitlines()
    assert [line.split()[1] for line in lines if line.startswith("round ")] == ["1", "2", "3", "4"]
    assert lines[2] == "resumed from the checkpoint of round 2"


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_inside_a_write_is_delivered_after_it():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            finished.append(True)  # not interrupted half-way
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _start(out, *extra):
    args = ["run", "--strategy", "fedavg", "--model", "mlp", "--rounds", str(ENDLESS_ROUNDS), "--batch-size", "10",
            "--num-partitions", "10", "--quiet", "--out", str(out), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "fedsim", *args], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    return process, args


@pytest.mark.slow
@pytest.mark.usefixtures("ctrl_c")
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_prints_one_line_with_the_resume_command_and_exits_130(tmp_path, presses):
    out = tmp_path / "run"
    process, args = _start(out)  # more rounds than run before the signal on any machine: it cannot end first
    checkpoint = out / "checkpoint.pt"
    try:
        wait_for_checkpoint(process, checkpoint, 1)
        for _ in range(presses):  # a second press, as an impatient user gives, changes nothing
            process.send_signal(signal.SIGINT)
            time.sleep(0.02)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "interrupted after round" in lines[0] and "checkpoint.pt holds round" in lines[0]
    command = shlex.split(lines[0].split("continue with: ")[1])
    assert command[0] == "fedsim" and command[1:] == [*args, "--resume"]
    held = checkpoint_round(checkpoint)
    assert f"holds round {held}" in lines[0]
    assert [row["round"] for row in read_rows(out / "metrics.csv")] == list(range(1, held + 1))


def test_a_run_that_stopped_before_its_first_round_can_be_started_again_in_its_folder(tmp_path):
    out = tmp_path / "run"
    assert fedsim("run", *QUICK, "--out", str(out)).returncode == 0
    for name in ("metrics.csv", "checkpoint.pt", "model.pt", "summary.json", "log.txt", "learning_curves.png"):
        (out / name).unlink()  # what a crash inside round 1 leaves: the marker, config.json and partition.json
    assert_refused(fedsim("run", *QUICK, "--out", str(out), "--resume"), "before finishing its first round",
                   "drop `--resume`")
    assert fedsim("run", *QUICK, "--out", str(out)).returncode == 0


@pytest.mark.parametrize("damage, phrase", [(b"garbage", "checkpoint is damaged"), (None, "other settings (`--lr`")])
def test_a_resume_that_cannot_go_on_is_refused_before_any_output(tmp_path, damage, phrase):
    out = tmp_path / "run"
    assert fedsim("run", *QUICK, "--out", str(out)).returncode == 0
    if damage is not None:
        (out / "checkpoint.pt").write_bytes(damage)
    assert_refused(fedsim("run", *QUICK, "--lr", "0.05" if damage else "0.1", "--out", str(out), "--resume"), phrase)


def test_resume_names_a_file_or_a_folder_of_the_other_kind_for_what_it_is(tmp_path):
    (tmp_path / "a_file").write_text("x")
    assert_refused(fedsim("run", *QUICK, "--out", str(tmp_path / "a_file"), "--resume"), "is a file, not a folder")
    assert fedsim("run", *QUICK, "--out", str(tmp_path / "run")).returncode == 0
    compare = fedsim("compare", "--strategies", "fedavg", *QUICK[2:], "--out", str(tmp_path / "run"), "--resume")
    assert_refused(compare, "holds a single fedsim run", "fedsim run")


@pytest.mark.slow
def test_a_comparison_resumes_only_with_the_strategies_it_compares(tmp_path):
    out = tmp_path / "c"
    args = [*QUICK[2:], "--out", str(out)]
    assert fedsim("compare", "--strategies", "allreduce,fedavg", *args).returncode == 0
    summary = (out / "summary.json").read_text()
    assert_refused(fedsim("compare", "--strategies", "fedavg", *args, "--resume"), "it compares allreduce,fedavg")
    assert (out / "summary.json").read_text() == summary
    assert fedsim("compare", "--strategies", "allreduce,fedavg", *args, "--resume").returncode == 0
