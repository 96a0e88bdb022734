"""The in-process round loop: train a round, evaluate, hand it to the recorder; resume where a run stopped."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...build import RunSetup
from ...client import evaluate
from ...recorder import Recorder
from ...results import RunFolder
from ...strategies import get_strategy
from ..rounds import drive
from .fedavg import FedAvgRounds
from .gradient import GradientRounds
from .parallel import ParallelFedAvgRounds, check_workers


@dataclass
class RunResult:
    """What `run` returns: the per-round rows, the summary and the final global tensors."""

    rows: list[dict]
    summary: dict
    global_state: list[torch.Tensor]


def run(config, out=None, *, resume: bool = False, quiet: bool = True, data=None, partition=None,
        grid=None, workers: int = 1) -> RunResult:
    """Run one strategy in this process and return its rows, summary and final model.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder (see `fedsim.results`); nothing is written without it.
    resume : bool, default False
        Continue from ``out``'s checkpoint (the config must match the folder's).
    quiet : bool, default True
        No progress bar.
    data : fedsim.data.Dataset, optional
        Already-loaded data (else ``config.dataset`` is loaded).
    partition : partitions.Partition, optional
        Already-made partition (else made from the config's partition flags).
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth (the config's own by default); `fedsim.compare.compare`
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
        rounds = build_rounds(config, setup)
    else:
        rounds = ParallelFedAvgRounds(config, model, data, task, partition, workers)
    try:
        recorder = Recorder(config, partition, out, multilabel=task.multilabel, resume=resume, grid=grid,
                            quiet=quiet)
        restore(rounds, recorder.start())
        summary = drive(recorder, rounds, lambda: evaluate(model, evaluated_state(rounds), data, task=task))
    finally:
        if workers > 1:
            rounds.close()
    return RunResult(recorder.rows, summary, [t.detach().clone() for t in rounds.global_state])


def build_rounds(config, setup: RunSetup) -> FedAvgRounds | GradientRounds:
    """Return the rounds of ``config.strategy`` over ``setup``: local training (fedavg) or gradient steps."""
    rounds_class = FedAvgRounds if get_strategy(config.strategy).local_training else GradientRounds
    return rounds_class(config, setup.model, setup.data, setup.task, setup.partition)


def restore(rounds, restored) -> None:
    """Give ``rounds`` the global tensors and engine state of a checkpoint (`Recorder.start`'s; ``None``: nothing)."""
    if restored is None:
        return
    with torch.no_grad():
        torch._foreach_copy_(rounds.global_state, restored.global_state)
    rounds.load_state_dict(restored.engine_state)


def evaluated_state(rounds) -> list[torch.Tensor] | None:
    """Return what `fedsim.client.evaluate` loads into the model: FedAvg's global tensors, or nothing.

    The gradient strategies' global state is the model's own, so nothing needs loading.
    """
    return None if isinstance(rounds, GradientRounds) else rounds.global_state
