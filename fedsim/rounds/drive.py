"""The round loop every engine that owns its rounds runs: train, evaluate when due, record."""

from __future__ import annotations

import time

from ..results.client_eval import evaluate_round


def drive(recorder, rounds, evaluation) -> dict:
    """Run the recorder's pending rounds and return the run's summary.

    Parameters
    ----------
    recorder : fedsim.results.recorder.Recorder
        Started (and restored, when resuming).
    rounds : object
        The engine's rounds: ``train_round(round, samples_before, target)``, ``global_state``
        and ``state_dict()``; optionally ``run_notes()``, entries the summary records.
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
        notes = getattr(rounds, "run_notes", None)  # how the engine ran, for the summary
        return recorder.finish(rounds.global_state, extra=notes() if notes else None)


class GradientCheckpoint:
    """What the gradient strategies' rounds checkpoint beyond the global tensors: step count and server state.

    A mixin for classes with ``step_count`` and ``server`` (`fedsim.server.ServerOptimizer`).
    """

    def state_dict(self) -> dict:
        """Return the step count and the optimizer's state (momentum, loss scale) for a checkpoint."""
        return {"step_count": self.step_count, "server": self.server.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.step_count = int(state["step_count"])
        self.server.load_state_dict(state["server"])
