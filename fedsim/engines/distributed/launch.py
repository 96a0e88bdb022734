"""Process-group set-up for a torchrun rank, and ``fedsim ddp --nproc N``'s own torchrun launch."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from ...build import resolve_device
from ...checks import SettingError
from ...interrupts import exit_status, ignore_stop_signals, raise_terminated, stop_signal
from ...processes import LOOPBACK, free_port
from ...references import child_environment

#: The variables torchrun (and any torch.distributed launcher) gives each rank.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
#: Seconds a collective may wait for a peer before the rank gives up (``fedsim ddp --timeout``).
DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: Seconds torchrun gets to stop its ranks after SIGTERM before it is killed.
STOP_GRACE_S = 30


@dataclass(frozen=True)
class Ranks:
    """This process's place in the process group."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def leader(self) -> bool:
        """Rank 0, which alone logs, evaluates, checkpoints and writes the results folder."""
        return self.rank == 0


def under_torchrun() -> bool:
    """Whether this process was started by torchrun (or another launcher that sets its variables)."""
    return all(name in os.environ for name in LAUNCHER_VARIABLES)


def start_process_group(device: str, timeout_s: float) -> Ranks:
    """Join the process group torchrun set up: gloo on the CPU, nccl on CUDA (one GPU per local rank).

    ``timeout_s`` bounds every collective: a rank whose peer has died or stalled fails with an
    error instead of waiting for ever.
    """
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    cuda = resolve_device(device).type == "cuda"
    if cuda and local_rank >= torch.cuda.device_count():
        raise SettingError("local rank {rank:text} has no GPU of its own: this machine has {gpus:text}; start at "
                           "most that many processes per machine (`--nproc`), or use {device}", rank=local_rank,
                           gpus=torch.cuda.device_count(), device="cpu")
    where = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(where)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s),
                                device_id=where if cuda else None)
    return Ranks(rank, world_size, local_rank, where)


def torchrun_command(nproc: int, args: list[str], port: int) -> list[str]:
    """Return the torchrun command line that runs ``fedsim ddp args`` in ``nproc`` processes on 127.0.0.1."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--nnodes=1",
            f"--master-addr={LOOPBACK}", f"--master-port={port}", "--max-restarts=0",
            "-m", "fedsim", "ddp", *args]


def rank_environment(nproc: int) -> dict:
    """Return the environment for ``nproc`` local ranks: loopback only, and the CPUs shared among them.

    Each rank gets ``cpus // nproc`` intra-op threads (at least one): OpenMP threads of several
    processes that outnumber the cores spin against each other and slow every rank down. The
    folder the run started in stays importable for a user's code named by module reference.
    """
    env = child_environment(os.environ)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    env.setdefault("OMP_NUM_THREADS", str(max(1, cpus // nproc)))
    if "lo" in {name for _, name in socket.if_nameindex()}:
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo would otherwise pick the hostname's interface
    return env


def launch(nproc: int, args: list[str]) -> int:
    """Run ``fedsim ddp args`` in ``nproc`` processes under torchrun on 127.0.0.1; return its exit status.

    When a rank fails, torchrun stops the others and its report names the failed rank. After
    Ctrl-C (which torchrun receives too, from the terminal) or SIGTERM (passed on to torchrun) the
    status is the signal's, 130 or 143 (`fedsim.interrupts.exit_status`), once every rank has
    stopped as Ctrl-C stops a run. torchrun starts its ranks in sessions of their own, so however
    this function ends, torchrun is asked to stop them (SIGTERM, which it passes on) rather than
    killed, which would leave them running.
    """
    process = subprocess.Popen(torchrun_command(nproc, args, free_port()), env=rank_environment(nproc))
    previous = signal.signal(signal.SIGTERM, raise_terminated)  # as `fedsim` itself handles SIGTERM
    try:
        return process.wait()
    except KeyboardInterrupt as interrupt:  # the ranks save what they can and stop, as after Ctrl-C
        signum = stop_signal(interrupt)
        ignore_stop_signals()
        if signum != signal.SIGINT:  # Ctrl-C reached torchrun from the terminal; another signal is passed on
            process.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
        return exit_status(signum)
    finally:
        stop(process)
        signal.signal(signal.SIGTERM, previous)


def stop(process: subprocess.Popen) -> None:
    """Stop a torchrun process and its ranks: SIGTERM, which torchrun passes on, then SIGKILL after a grace period."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def check_world_size(config, world_size: int, *, in_rank: bool = False) -> None:
    """Refuse a number of processes below 1, or what fedsim ddp does not run (`fedsim.support`'s ``ddp`` column).

    allreduce and reweighted need one shard per rank; a method whose clients keep a state, or
    whose combination is not a weighted sum, cannot have its clients shared out among ranks.
    ``in_rank``: asked by a rank (`fedsim.support.refusal`).
    """
    from ...support import check_runs_on

    if world_size < 1:
        raise ValueError(f"`--nproc` must be at least 1, got {world_size}")
    check_runs_on(config, "ddp", nproc=world_size, in_rank=in_rank)
