"""``fedsim flower simulate``: the Flower app on Flower's simulation engine (Ray), a virtual SuperNode per partition."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import warnings

from ...config import RunConfig
from ...interrupts import STOP_SIGNALS, as_interrupt, stop_signal
from ..inprocess.loop import RunResult
from .client_app import client_app
from .server_app import DEFAULT_TIMEOUT_S, FederatedServer, interruption


def simulate(config: RunConfig, out=None, *, resume: bool = False, quiet: bool = True,
             timeout_s: float = DEFAULT_TIMEOUT_S, num_cpus: int | None = None, grid=None) -> RunResult:
    """Run ``config`` on Flower's simulation engine and return its rows, summary and final model.

    Each client runs in a Ray actor with one CPU and one torch thread, ``num_cpus`` actors at
    once (all the machine's cores by default). Ray's temporary folder is a new short folder
    (its socket paths must fit in 107 bytes), removed at the end with Ray's processes.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder, in the format of `fedsim run`.
    resume : bool, default False
        Continue from ``out``'s checkpoint.
    quiet : bool, default True
        No progress bar, and Flower's log at warnings only.
    timeout_s : float, default 600
        Seconds the server waits for a round's replies.
    num_cpus : int, optional
        CPUs Ray may use (default: all).
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth (the config's own by default), as for `fedsim.engines.inprocess.run`.
    """
    from flwr.simulation import run_simulation

    server = FederatedServer(config, out, resume=resume, quiet=quiet, timeout_s=timeout_s, grid=grid)
    num_cpus = num_cpus or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="fedsim-ray-", dir="/tmp", ignore_cleanup_errors=True) as ray_folder:
        backend = {
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": num_cpus, "_temp_dir": ray_folder, "logging_level": logging.ERROR,
                          "log_to_driver": not quiet},
        }
        log_level = logging.WARNING if quiet else logging.INFO
        with warnings.catch_warnings(), _one_thread_per_actor(), _flower_log(log_level):
            warnings.simplefilter("ignore", DeprecationWarning)  # run_simulation's, and Ray's notices
            warnings.simplefilter("ignore", FutureWarning)
            previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
            try:
                _start_ray(backend)
                # Ctrl-C and SIGTERM do not reach the server, which runs in Flower's thread: they ask the server
                # to stop before its next round, which ends the run with RunInterrupted (a second one stops at once)
                for number in STOP_SIGNALS:
                    signal.signal(number, lambda signum, _: _request_stop(server, signum))
                run_simulation(server_app=server.app, client_app=client_app(), num_supernodes=config.num_partitions,
                               backend_config=backend, verbose_logging=False)
            except KeyboardInterrupt as stop:
                raise interruption(server, config, stop_signal(stop)) from None
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)
                _stop_ray()
    if server.result is None:
        raise RuntimeError("the Flower simulation ended without running the server; see its log above")
    return server.result


def _start_ray(backend: dict) -> None:
    """Start Ray as ``run_simulation`` would (which then finds it started), so that SIGTERM can be taken back.

    ``ray.init`` gives SIGTERM handlers of its own (Python's ``sys.exit``, then its core worker's,
    which aborts the process): started inside ``run_simulation`` they would end a run without
    saying what is saved. Flower's own backend class starts it, so Ray gets the same settings.
    """
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

    RayBackend(backend)


def _stop_ray() -> None:
    """Stop Ray if ``run_simulation`` did not (it does when it ends normally)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _request_stop(server: FederatedServer, signum: int) -> None:
    if server.stop_requested.is_set():
        raise as_interrupt(signum)
    server.stop_requested.set(signum)


@contextlib.contextmanager
def _one_thread_per_actor():
    """Set ``OMP_NUM_THREADS=1`` while Ray starts its actors (they inherit it), then restore it.

    Several processes each running torch with every core's threads slow each other many times over.
    """
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved


@contextlib.contextmanager
def _flower_log(level: int):
    """Set the level of Flower's logger for the block, then restore it."""
    logger = logging.getLogger("flwr")
    saved = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(saved)
