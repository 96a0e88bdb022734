"""The in-process round loop: train a round, evaluate, hand it to the recorder; resume where a run stopped."""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

from ...algorithms import declared
from ...results.outcome import RunResult
from ...rounds.asynchronous import AsynchronousRounds
from ...rounds.result import EngineRun, build_rounds
from .fedavg import InProcessFedAvgRounds
from .gradient import InProcessGradientRounds
from .parallel import ParallelFedAvgRounds, check_workers

#: The run folder's sub-folder where clients' states beyond ``--client-state-memory`` spill.
CLIENT_STATES = "client-states"


def run(config, out=None, *, resume: bool = False, quiet: bool = True, data=None, partition=None,
        grid=None, workers: int = 1) -> RunResult:
    """Run one strategy in this process and return its rows, summary and final model.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder (see `fedsim.results.folder`); nothing is written without it.
    resume : bool, default False
        Continue from ``out``'s checkpoint (the config must match the folder's).
    quiet : bool, default True
        No progress bar.
    data : fedsim.data.Dataset, optional
        Already-loaded data (else ``config.dataset`` is loaded).
    partition : partitions.Partition, optional
        Already-made partition (else made from the config's partition flags).
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth (the config's own by default); `fedsim.comparison.compare`
        puts every strategy on FedAvg's.
    workers : int, default 1
        Processes that train a round's clients in parallel, this one included
        (`fedsim.engines.inprocess.parallel`); the result is the same up to the order of a sum.
    """
    check_workers(workers, config)
    fedavg = InProcessFedAvgRounds if workers == 1 else partial(ParallelFedAvgRounds, workers=workers)
    if config.asynchronous:
        fedavg = AsynchronousRounds  # each client trains alone, when the clock sends it the model
    rounds = partial(build_rounds, config, fedavg=fedavg, gradient=InProcessGradientRounds)
    engine_run = EngineRun.build(config, out, resume=resume, rounds=rounds, data=data, partition=partition)
    algorithm = engine_run.rounds.algorithm
    spill_folder = tempfile.TemporaryDirectory(prefix="fedsim-client-states-") if out is None else None
    if algorithm is not None:  # clients' states beyond the budget go to disk, in the run folder
        folder = Path(out) / CLIENT_STATES if out is not None else spill_folder.name
        declared.spill_client_states(algorithm, folder, int(config.client_state_memory * 2**20))
    try:
        engine_run.start(quiet=quiet, grid=grid)
        return engine_run.drive()
    finally:
        if workers > 1:
            engine_run.rounds.close()
        if spill_folder is not None:
            spill_folder.cleanup()

