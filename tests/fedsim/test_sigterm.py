"""SIGTERM (a batch scheduler's, ``timeout``'s, Docker's, systemd's stop) ends a run as Ctrl-C does, with status 143."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fedsim.engines.distributed.launch import rank_environment, stop
from fedsim.interrupts import Terminated, deferred_interrupt, stop_on_sigterm
from fedsim.processes import descendants
from fedsim.results.folder import read_rows

TERMINATED = 143  # 128 + SIGTERM, as a shell reports a command that SIGTERM stopped
DEADLINE_S = 300


@pytest.fixture
def sigterm_raises():
    """This process's SIGTERM handler as `fedsim` sets it, for the test's duration."""
    previous = signal.getsignal(signal.SIGTERM)
    stop_on_sigterm()
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("sigterm_raises")
def test_sigterm_inside_a_write_is_delivered_after_it():
    finished = []
    with pytest.raises(Terminated) as stopped:
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            finished.append(True)  # not interrupted half-way
    assert finished == [True]
    assert stopped.value.signum == signal.SIGTERM


def start(args, **options):
    """Start ``fedsim args`` with one torch thread (the machine's cores are shared), output captured."""
    env = options.pop("env", {**os.environ, "OMP_NUM_THREADS": "1"})
    return subprocess.Popen([sys.executable, "-m", "fedsim", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **options)


def wait_for(path: Path, process: subprocess.Popen) -> None:
    """Wait until ``path`` exists, while ``process`` runs; fail after `DEADLINE_S`."""
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {path} after {DEADLINE_S} s"
        time.sleep(0.05)


def wait_gone(pids: list[int]) -> list[int]:
    """Wait (bounded) until none of ``pids`` runs; return those still running."""
    deadline = time.monotonic() + 60
    while (alive := [pid for pid in pids if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_stopped_line(line: str, folder: Path, args: list[str], command: str | None = None) -> None:
    """The one line of ``fedsim command``: SIGTERM named, the checkpoint's round, and the command that continues."""
    assert line.startswith(f"fedsim {command or args[0]}: terminated (SIGTERM)"), line
    held = torch.load(folder / "checkpoint.pt", weights_only=True)["progress"]["round"]
    assert f"{folder / 'checkpoint.pt'} holds round {held}" in line, line
    assert shlex.split(line.split("continue with: ")[1]) == ["fedsim", *args, "--resume"]
    assert [row["round"] for row in read_rows(folder / "metrics.csv")][:held] == list(range(1, held + 1))


def assert_no_partial_file(folder: Path) -> None:
    assert not [path for path in folder.rglob("*") if path.name.endswith(".tmp")]


def terminate_at(path: Path, args: list[str], *, group: bool = False, env=None) -> tuple[int, list[int], str]:
    """Start ``fedsim args``, send it SIGTERM once ``path`` exists (to its whole process group with ``group``).

    Returns its exit status, the processes it had started by then, and its standard error.
    """
    process = start(args, start_new_session=True, **({} if env is None else {"env": env}))
    try:
        wait_for(path, process)
        children = descendants(process.pid)
        (os.killpg if group else os.kill)(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=DEADLINE_S)
    finally:
        stop(process)
    return process.returncode, children, stderr


def only_line(status: int, stderr: str) -> str:
    """The one line a command stopped by SIGTERM prints, after checking its status and that nothing else came."""
    assert status == TERMINATED, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


RUN = ["--strategy", "fedavg", "--model", "mlp", "--rounds", "50", "--batch-size", "10", "--num-partitions", "10",
       "--fraction", "0.5", "--quiet"]


@pytest.mark.slow
@pytest.mark.parametrize("workers, group", [(1, False), (2, False), (2, True)],
                         ids=["run", "workers", "workers-whole-group"])
def test_sigterm_stops_run_with_one_line_status_143_and_its_workers(tmp_path, workers, group):
    """SIGTERM to the run's process alone (``kill``, ``timeout``) or to its whole group (systemd, Docker)."""
    out = tmp_path / "run"
    args = ["run", *RUN, "--workers", str(workers), "--out", str(out)]
    status, children, stderr = terminate_at(out / "checkpoint.pt", args, group=group)
    assert_stopped_line(only_line(status, stderr), out, args)
    assert len(children) >= workers - 1  # the forked workers start with round 1
    assert not wait_gone(children), "a worker outlived the run"
    assert_no_partial_file(out)


@pytest.mark.slow
def test_workers_of_a_run_killed_outright_exit_on_their_own(tmp_path):
    """SIGKILL leaves the run no cleanup; its forked workers notice and exit rather than wait for ever."""
    out = tmp_path / "run"
    process = start(["run", *RUN, "--workers", "3", "--out", str(out)])
    try:
        wait_for(out / "checkpoint.pt", process)
        children = descendants(process.pid)
        process.kill()
        process.wait()
    finally:
        stop(process)
    assert len(children) >= 2
    assert not wait_gone(children), "a worker outlived the run"


@pytest.mark.slow
def test_sigterm_stops_compare_with_one_line_status_143(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", *[a for a in RUN if a not in ("--strategy", "fedavg")], "--strategies", "fedavg,allreduce",
            "--out", str(out)]
    status, _, stderr = terminate_at(out / "fedavg" / "checkpoint.pt", args)
    assert_stopped_line(only_line(status, stderr), out / "fedavg", args)
    assert_no_partial_file(out)


@pytest.mark.slow
def test_sigterm_to_the_ddp_launcher_stops_every_rank_and_says_how_to_resume(tmp_path):
    """SIGTERM to ``fedsim ddp --nproc 2`` alone: it is passed on to torchrun and the ranks, which stop as on Ctrl-C."""
    out = tmp_path / "run"
    args = ["ddp", "--nproc", "2", "--strategy", "allreduce", "--model", "mlp", "--num-partitions", "2",
            "--rounds", "200", "--quiet", "--out", str(out)]
    status, children, stderr = terminate_at(out / "checkpoint.pt", args, env=rank_environment(2))
    assert status == TERMINATED, stderr[-3000:]
    assert_stopped_line(stderr.strip().splitlines()[-1], out, args)
    assert len(children) >= 3  # torchrun and its two ranks
    assert not wait_gone(children), "a rank outlived the launcher"
    assert_no_partial_file(out)


@pytest.mark.slow
def test_sigterm_stops_a_flower_simulation_and_every_process_and_says_how_to_resume(tmp_path):
    """The SuperLink, the simulation runtime and its Ray processes stop; the checkpoint says where to go on."""
    out = tmp_path / "run"
    args = ["flower", "simulate", "--strategy", "fedavg", "--model", "mlp", "--num-partitions", "2", "--rounds", "100",
            "--batch-size", "50", "--quiet", "--out", str(out)]
    env = {**os.environ, "FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    status, children, stderr = terminate_at(out / "checkpoint.pt", args, env=env)
    assert status == TERMINATED, stderr[-3000:]
    assert_stopped_line(stderr.strip().splitlines()[-1], out, args, "flower simulate")
    assert not wait_gone(children), "a Ray process outlived the run"
    assert_no_partial_file(out)


@pytest.mark.slow
def test_sigterm_stops_a_deployed_federation_and_every_flower_process(tmp_path):
    """SIGTERM to ``fedsim flower deploy`` stops the SuperLink, the SuperNodes and what they started."""
    out = tmp_path / "run"
    args = ["flower", "deploy", "--strategy", "fedavg", "--model", "mlp", "--dataset", "digits", "--num-partitions",
            "2", "--rounds", "100", "--batch-size", "20", "--quiet", "--out", str(out)]
    env = {**os.environ, "FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    status, children, stderr = terminate_at(out / "checkpoint.pt", args, env=env)
    assert_stopped_line(only_line(status, stderr), out, args, "flower deploy")
    assert len(children) >= 3  # the SuperLink, two SuperNodes, flwr run
    assert not wait_gone(children), "a Flower process outlived the run"
    # `--resume` from the command line starts a new federation from the checkpoint: its rounds follow the
    # kept ones, which stay as they were (a round past the checkpoint, kept or not, is run again)
    held = torch.load(out / "checkpoint.pt", weights_only=True)["progress"]["round"]
    kept = (out / "metrics.csv").read_text().splitlines()[:held + 1]
    resumed = subprocess.run([sys.executable, "-m", "fedsim", "flower", "deploy", "--resume", "--out", str(out),
                              "--rounds", str(held + 2), "--quiet"], env=env, capture_output=True, text=True,
                             timeout=DEADLINE_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (out / "metrics.csv").read_text().splitlines()[:held + 1] == kept
    assert [row["round"] for row in read_rows(out / "metrics.csv")] == list(range(1, held + 3))
    assert torch.load(out / "checkpoint.pt", weights_only=True)["progress"]["round"] == held + 2
