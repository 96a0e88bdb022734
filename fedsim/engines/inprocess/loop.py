"""The in-process round loop: train a round, evaluate, hand it to the recorder; resume where a run stopped."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...algorithms import declared
from ...build import RunSetup
from ...results.client_eval import Evaluation
from ...results.recorder import Recorder
from ...results.folder import RunFolder
from ...rounds.drive import drive
from ...results.outcome import RunResult
from ...rounds.result import build_rounds, evaluated_state, restore
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
    if out is not None:
        RunFolder(out).check(resume=resume)  # a bad `--out` is reported before any work
    setup = RunSetup.build(config, data=data, partition=partition)
    data, task, partition, model = setup.data, setup.task, setup.partition, setup.model
    if workers == 1:
        rounds = build_rounds(config, setup, fedavg=InProcessFedAvgRounds, gradient=InProcessGradientRounds)
    else:
        rounds = ParallelFedAvgRounds(config, model, data, task, partition, workers)
    spill_folder = tempfile.TemporaryDirectory(prefix="fedsim-client-states-") if out is None else None
    if rounds.algorithm is not None:  # clients' states beyond the budget go to disk, in the run folder
        folder = Path(out) / CLIENT_STATES if out is not None else spill_folder.name
        declared.spill_client_states(rounds.algorithm, folder, int(config.client_state_memory * 2**20))
    try:
        recorder = Recorder(config, partition, out, multilabel=task.multilabel, resume=resume, grid=grid,
                            quiet=quiet)
        restore(rounds, recorder.start())
        summary = drive(recorder, rounds, Evaluation(model, data, task, partition, lambda: evaluated_state(rounds),
                                                  config, rounds.algorithm))
    finally:
        if workers > 1:
            rounds.close()
        if spill_folder is not None:
            spill_folder.cleanup()
    return RunResult(recorder.rows, summary, [t.detach().clone() for t in rounds.global_state])
