"""Processes started together (DDP ranks, a federation) on the loopback interface, stopped with all they started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

#: The only address fedsim's processes listen on.
LOOPBACK = "127.0.0.1"
#: Seconds a process has to stop after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that is free now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Return the PIDs of every process below ``pid`` (from ``/proc``; none where there is no ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            # the command name, in parentheses, may hold spaces: the parent PID is the 2nd field after it
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while being read
        children.setdefault(parent, []).append(int(entry.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def stop_all(processes: list[subprocess.Popen]) -> None:
    """Stop ``processes`` and every process they started: SIGTERM, then SIGKILL to what is left.

    Each process is asked first, so that it stops its own helpers (Flower's SuperLink and
    SuperNodes start ``flower-superexec`` and the app processes, some in sessions of their own);
    any helper still running after the grace period is signalled by PID.
    """
    running = [process for process in processes if process.poll() is None]
    helpers = [pid for process in running for pid in descendants(process.pid)]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _signal([pid for pid in helpers if _alive(pid)], signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
        time.sleep(0.1)
    _signal([pid for pid in helpers if _alive(pid)], signal.SIGKILL)


def _signal(pids: list[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
