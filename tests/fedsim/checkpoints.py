"""What the tests that interrupt a running `fedsim` command wait for: its checkpoint, never a fixed time."""

import signal
import subprocess
import time
from pathlib import Path

import torch

#: Far more rounds than any machine runs while a test waits for a checkpoint (one round of the
#: tests' runs takes a tenth of a second or more here): a run given these cannot finish first.
ENDLESS_ROUNDS = 100_000


def checkpoint_round(path: Path) -> int | None:
    """Return the round ``checkpoint.pt`` at ``path`` holds, ``None`` while the run has written none.

    The run writes the file atomically (a rename), so a file that exists is whole.
    """
    if not path.exists():
        return None
    return int(torch.load(path, weights_only=True)["progress"]["round"])


def wait_for_checkpoint(process: subprocess.Popen, path: Path, round_index: int, timeout_s: float = 300) -> int:
    """Wait until ``process``'s checkpoint holds round ``round_index`` or a later one, and return that round.

    Fails, with the run's output, if the run ends first or ``timeout_s`` passes (then the run is killed).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        held = checkpoint_round(path)
        if held is not None and held >= round_index:
            return held
        if process.poll() is not None:
            _, stderr = process.communicate()
            raise AssertionError(f"the run ended (exit {process.returncode}) before its checkpoint held round "
                                 f"{round_index}: {stderr}")
        time.sleep(0.05)
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no checkpoint of round {round_index} within {timeout_s} s: {stderr}")


def kill_resume_and_run_straight(launch, folder: Path, kill_at: int, rounds_at_least: int) -> int:
    """SIGKILL a run once its checkpoint holds round ``kill_at``, then resume it beside a straight run; return
    the rounds both ran.

    ``launch(out, *extra, rounds=...)`` starts ``fedsim run`` into ``out`` (``--resume`` among ``extra``). The
    killed run writes into ``folder / "killed"``, the straight one into ``folder / "straight"``; given more
    rounds than any machine runs while the test watches, the first is alive when its checkpoint first holds
    ``kill_at``; the resume then sets the rounds that the straight run runs too, at least
    ``rounds_at_least``. Both must finish.
    """
    checkpoint = folder / "killed" / "checkpoint.pt"
    killed = launch(folder / "killed", rounds=ENDLESS_ROUNDS)
    try:
        wait_for_checkpoint(killed, checkpoint, kill_at)
    finally:
        killed.send_signal(signal.SIGKILL)  # no handler runs, nothing is flushed
        killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    # a later round may have landed between the wait and the kill
    rounds = max(rounds_at_least, checkpoint_round(checkpoint) + 2)
    # what a kill in the middle of a checkpoint's write leaves (whether this one did is chance): gone on resume
    half_written = checkpoint.with_name(".checkpoint.pt.0123456789ab.tmp")
    half_written.write_bytes(b"half a checkpoint")
    processes = [launch(folder / "killed", "--resume", rounds=rounds), launch(folder / "straight", rounds=rounds)]
    try:
        for process in processes:
            _, stderr = process.communicate(timeout=600)
            assert process.returncode == 0, stderr
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert not half_written.exists()
    return rounds
