"""The round loop every engine that owns its rounds runs: train, evaluate when due, record."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import torch

from ..results.client_eval import evaluate_round
from ..results.progress import RoundStats


@runtime_checkable
class Rounds(Protocol):
    """What an engine's rounds are to the round loop (`drive`), the checkpoint and the evaluation.

    FedAvg's round (`fedsim.rounds.fedavg.FedAvgRounds` and each engine's subclass) and the
    gradient strategies' steps (`fedsim.rounds.gradient.GradientSetup`'s subclasses: in this
    process, on DDP's ranks) implement it; `fedsim.rounds.result.EngineRun` refuses an object
    that does not.

    Attributes
    ----------
    global_state : list of torch.Tensor
        The global model's parameters, then its floating-point buffers.
    algorithm : fedsim.algorithms.base.RoundAlgorithm or None
        The method that changes FedAvg's round; ``None`` for the gradient strategies.
    """

    global_state: list[torch.Tensor]
    algorithm: object | None

    def train_round(self, round_index: int, samples_before: int, target: int) -> RoundStats:
        """Train round ``round_index``, from ``samples_before`` samples seen to ``target``; return its statistics."""

    def state_dict(self) -> dict:
        """Return what a checkpoint keeps beyond the global tensors (server and method state)."""

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""

    def run_notes(self) -> dict:
        """Return how the engine ran, as entries of the run's summary (empty where nothing is worth saying)."""


def drive(recorder, rounds: Rounds, evaluation) -> dict:
    """Run the recorder's pending rounds and return the run's summary.

    Parameters
    ----------
    recorder : fedsim.results.recorder.Recorder
        Started (and restored, when resuming).
    rounds : Rounds
        The engine's rounds.
    evaluation : fedsim.results.client_eval.Evaluation or None
        Evaluates the global model after a round; ``None`` where this process does not evaluate
        (a DDP rank other than 0).
    """
    with recorder.interruptible():
        for round_index in recorder.pending_rounds():
            started = time.perf_counter()
            target = recorder.schedule_round(round_index)
            stats = rounds.train_round(round_index, recorder.progress.samples_seen, target)
            metrics, clients, eval_s = evaluate_round(recorder, round_index, evaluation)
            recorder.record_round(stats, metrics, wall_s=time.perf_counter() - started, eval_s=eval_s,
                                  global_state=rounds.global_state, engine_state=rounds.state_dict, clients=clients)
        return recorder.finish(rounds.global_state, extra=rounds.run_notes())


class GradientCheckpoint:
    """What the gradient strategies' rounds checkpoint beyond the global tensors: step count and server state.

    A mixin for classes with ``step_count`` and ``server`` (`fedsim.server.ServerOptimizer`), with
    the rest of `Rounds` that the gradient strategies share: no method, nothing to note.
    """

    algorithm = None

    def run_notes(self) -> dict:
        """Nothing: the gradient strategies run one way on each engine."""
        return {}

    def state_dict(self) -> dict:
        """Return the step count and the optimizer's state (momentum, loss scale) for a checkpoint."""
        return {"step_count": self.step_count, "server": self.server.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.step_count = int(state["step_count"])
        self.server.load_state_dict(state["server"])
