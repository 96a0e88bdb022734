"""FedAvg rounds in this process: one-step clients in one fused forward (`OneStepClients`), the others as cohorts
(`VectorizedClients`) where that applies, else in turn."""

from __future__ import annotations

import torch

from ...checks import SettingError
from ...results.progress import RoundStats
from ...rounds.fedavg import FedAvgRounds
from ...support import check_runs_on, cohorts_refused
from .one_step import OneStepClients
from .cohort_refusal import automatic_refusal, vectorize_refusal
from .vectorized import VectorizedClients


class InProcessFedAvgRounds(FedAvgRounds):
    """`fedsim.rounds.fedavg.FedAvgRounds` whose clients train together where the arithmetic allows.

    Takes `FedAvgRounds`' parameters. The clients whose round is one SGD step train in one fused
    forward and backward; the others train as cohorts (``vectorize``), or in turn on the one
    model object.

    Attributes
    ----------
    loop_reason : str or fedsim.checks.SettingError or None
        Why the clients do not train as cohorts (``None`` when they do).

    Raises
    ------
    ValueError
        ``vectorize`` is True where it does not apply, with the reason.
    """

    def __init__(self, config, model, data, task, partition):
        super().__init__(config, model, data, task, partition)
        self.one_step = OneStepClients(self) if OneStepClients.applies(self) else None
        if config.vectorize:  # what the method declares, before what its model decides
            check_runs_on(config, "cohorts")
        self.loop_reason = SettingError("{vectorize}", vectorize=False) if config.vectorize is False else \
            vectorize_refusal(self)
        if config.vectorize and self.loop_reason:
            raise cohorts_refused(self.loop_reason)
        if config.vectorize is None and self.loop_reason is None:
            self.loop_reason = automatic_refusal(self)
        self.vectorized = None if self.loop_reason else VectorizedClients(self, config.vectorize_chunk)

    def train_clients(self, round_index: int, assignments: list[tuple[int, float]], weighted_sum: list[torch.Tensor],
                      stats: RoundStats) -> None:
        """Train the one-step clients together, then the others as cohorts or in turn (`FedAvgRounds.train_clients`)."""
        if self.one_step is not None:
            fused, assignments = self.one_step.split(round_index, assignments)
            if fused:
                self.one_step.train(round_index, fused, weighted_sum, stats)
        if self.vectorized is not None and assignments:
            assignments = self.vectorized.train(round_index, assignments, weighted_sum, stats)
        super().train_clients(round_index, assignments, weighted_sum, stats)

    def run_notes(self) -> dict:
        """What the run's summary records of how its clients trained: as cohorts (and their memory), or the loop."""
        if self.vectorized is None or self.vectorized.left_to_loop:
            return {**super().run_notes(),
                    "client_training": f"loop: {self.loop_reason or self.vectorized.left_to_loop}"}
        return {**super().run_notes(), "client_training": f"vectorized, cohorts of up to {self.vectorized.chunk} clients",
                "vectorized_peak_mb": round(self.vectorized.peak_bytes / 2**20, 1)}
