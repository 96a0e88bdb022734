"""What the tests that interrupt a running `fedsim` command wait for: its checkpoint, never a fixed time."""

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
