"""``fedsim flower simulate``: the Flower app on Flower's simulation runtime, a virtual SuperNode per partition.

The run goes the way Flower 1.42 supports (``flwr.simulation.run_simulation`` is deprecated
there): ``flwr run`` of fedsim's app folder on a SuperLink that runs the simulation runtime, the
one ``flwr run`` starts for a local federation, here on a free port of 127.0.0.1 with a Flower
home of its own and stopped, with everything it started, when the run ends.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ...config.run_config import RunConfig
from .federation import LocalFederation
from .launch import run_app
from .server_app import DEFAULT_TIMEOUT_S


def simulate(config: RunConfig, out=None, *, resume: bool = False, quiet: bool = True, verbose: bool = False,
             timeout_s: float = DEFAULT_TIMEOUT_S, num_cpus: int | None = None, grid=None):
    """Run ``config`` on Flower's simulation runtime and return its rows, summary and final model.

    Each client runs in a Ray actor with one CPU and one torch thread, ``num_cpus`` actors at
    once (all the machine's cores by default). The ServerApp runs in Flower's
    ``flwr-simulation`` process and writes ``out`` as `fedsim run` does; Ray's temporary folder
    is in the SuperLink's short temporary home (its socket paths must fit in 107 bytes),
    removed at the end with every process.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder, in the format of `fedsim run`; without one the run writes a temporary
        folder, removed once its result is read.
    resume : bool, default False
        Continue from ``out``'s checkpoint.
    quiet : bool, default True
        No progress bar.
    verbose : bool, default False
        Show Flower's and Ray's log rather than keep it in ``out/flower.log``.
    timeout_s : float, default 600
        Seconds the server waits for a round's replies.
    num_cpus : int, optional
        CPUs Ray may use (default: all).
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth (the config's own by default), as for `fedsim.engines.inprocess.run`.

    Returns
    -------
    fedsim.results.outcome.RunResult
    """
    federation = LocalFederation(config.num_partitions, simulation=True, num_cpus=num_cpus or os.cpu_count() or 1)
    settings = {"resume": resume, "timeout_s": timeout_s, "grid": grid, "quiet": quiet, "verbose": verbose}
    if out is not None:
        return run_app(federation, config, Path(out).resolve(), **settings)
    with tempfile.TemporaryDirectory(prefix="fedsim-run-") as folder:
        return run_app(federation, config, Path(folder) / "run", named_folder=False, **settings)
