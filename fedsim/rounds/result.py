"""How every engine sets a run up and resumes it: `EngineRun`, over the rounds of a strategy (`build_rounds`).

`RunResult` (`fedsim.results.outcome`) is what each engine's run returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..build import RunSetup
from ..config.strategies import get_strategy
from ..results.client_eval import Evaluation
from ..results.folder import RunFolder
from ..results.outcome import RunResult
from ..results.recorder import Recorder
from .drive import Rounds, drive
from .fedavg import FedAvgRounds
from .gradient import GradientRounds, GradientSetup


def build_rounds(config, setup: RunSetup, *, fedavg=FedAvgRounds, gradient=GradientRounds):
    """Return the rounds of ``config.strategy`` over ``setup``: local training (fedavg) or gradient steps.

    ``fedavg`` and ``gradient`` are the classes to build, an engine's own subclasses where it has them.
    """
    rounds_class = fedavg if get_strategy(config.strategy).local_training else gradient
    return rounds_class(config, setup.model, setup.data, setup.task, setup.partition)


@dataclass
class EngineRun:
    """One run as every engine sets it up, resumes and drives it, whichever process trains its clients.

    1. `build`: refuse a bad results folder before any work, then build the data, partition,
       seeded model and the engine's `fedsim.rounds.drive.Rounds`.
    2. `start`: open the recorder (a new folder, or the checkpoint of one to resume), give the
       rounds the global tensors and engine state it restored, and make the evaluation.
    3. `drive` runs the pending rounds (Flower's strategy runs them itself, through the same recorder).

    Attributes
    ----------
    config : fedsim.config.RunConfig
    out : str or Path or None
        The results folder; nothing is written without it.
    resume : bool
        Continue from ``out``'s checkpoint.
    setup : fedsim.build.RunSetup
    rounds : fedsim.rounds.drive.Rounds
    leader : bool
        Whether this process writes the folder and evaluates (a DDP rank other than 0 does neither).
    recorder, evaluation
        Made by `start` (the evaluation ``None`` outside the leader).
    """

    config: object
    out: object
    resume: bool
    setup: RunSetup
    rounds: Rounds
    leader: bool = True
    recorder: Recorder | None = None
    evaluation: Evaluation | None = None

    @classmethod
    def build(cls, config, out=None, *, resume: bool = False, rounds: Callable[[RunSetup], Rounds] | None = None,
              leader: bool = True, data=None, partition=None, device: torch.device | None = None) -> EngineRun:
        """Check ``out``, then build the run's pieces and ``rounds(setup)`` (`build_rounds`'s by default).

        ``data`` and ``partition`` are used where given (`fedsim.build.RunSetup.build`), and
        ``device`` overrides the config's (a torchrun rank's own GPU).
        """
        if leader and out is not None:
            RunFolder(out).check(resume=resume)  # a bad `--out` is reported before any work
        setup = RunSetup.build(config, data=data, partition=partition, device=device)
        built = build_rounds(config, setup) if rounds is None else rounds(setup)
        if not isinstance(built, Rounds):
            raise TypeError(f"{type(built).__name__} does not implement fedsim.rounds.drive.Rounds")
        return cls(config, out, resume, setup, built, leader)

    def start(self, *, quiet: bool = True, grid=None, share: Callable | None = None) -> Recorder:
        """Open the recorder and restore the rounds from the checkpoint it read (when resuming); return it.

        Parameters
        ----------
        quiet : bool, default True
            No progress bar (only the leader draws one).
        grid : fedsim.schedule.SampleGrid, optional
            The samples each round is worth (the config's own by default).
        share : callable, optional
            Hands the leader's (restored, progress) pair to every process and returns it there
            (DDP's ``broadcast_object``), so that every rank resumes from the leader's checkpoint.
        """
        config, setup, leader = self.config, self.setup, self.leader
        self.recorder = Recorder(config, setup.partition, self.out if leader else None, multilabel=setup.task.multilabel,
                                 resume=self.resume and leader, quiet=quiet or not leader, grid=grid)
        restored = self.recorder.start()
        if share is not None:
            restored, self.recorder.progress = share((restored, self.recorder.progress))
        if restored is not None:
            with torch.no_grad():
                torch._foreach_copy_(self.rounds.global_state, restored.global_state)
            self.rounds.load_state_dict(restored.engine_state)
        if leader:
            self.evaluation = Evaluation(setup.model, setup.data, setup.task, setup.partition, self.evaluated_state,
                                         config, self.rounds.algorithm)
        return self.recorder

    def evaluated_state(self) -> list[torch.Tensor] | None:
        """Return what `fedsim.client.evaluate` loads into the model: FedAvg's global tensors, or nothing.

        The gradient strategies' global state is the model's own, so nothing needs loading.
        """
        return None if isinstance(self.rounds, GradientSetup) else self.rounds.global_state

    def drive(self) -> RunResult:
        """Run the pending rounds (`fedsim.rounds.drive.drive`) and return the rows, summary and final model."""
        summary = drive(self.recorder, self.rounds, self.evaluation)
        return RunResult(self.recorder.rows, summary, [t.detach().clone() for t in self.rounds.global_state])
