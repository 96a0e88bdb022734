"""FedAvg rounds in this process: the clients whose round is one SGD step train together (`OneStepClients`)."""

from __future__ import annotations

import torch

from ...results.recorder import RoundStats
from ...rounds.fedavg import FedAvgRounds
from .one_step import OneStepClients


class InProcessFedAvgRounds(FedAvgRounds):
    """`fedsim.rounds.fedavg.FedAvgRounds` whose one-step clients train in one fused forward and backward.

    Takes `FedAvgRounds`' parameters. The others train in turn on the one model object.
    """

    def __init__(self, config, model, data, task, partition):
        super().__init__(config, model, data, task, partition)
        self.one_step = OneStepClients(self) if OneStepClients.applies(self) else None

    def train_clients(self, round_index: int, assignments: list[tuple[int, float]], weighted_sum: list[torch.Tensor],
                      stats: RoundStats) -> None:
        """Train the one-step clients together, then the others in turn (`FedAvgRounds.train_clients`)."""
        if self.one_step is not None:
            fused, assignments = self.one_step.split(round_index, assignments)
            if fused:
                self.one_step.train(fused, weighted_sum, stats)
        super().train_clients(round_index, assignments, weighted_sum, stats)
