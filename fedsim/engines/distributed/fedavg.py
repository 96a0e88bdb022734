"""FedAvg over ranks: each rank trains its share of the sampled clients, then the ranks sum.

PyTorch's ``PeriodicModelAverager`` is the model: local steps, then one all-reduce of the
parameters. Here each rank serves the sampled clients ``rank, rank + N, ...`` in turn through
the shared client core, so 2 processes simulate 10 or 1,000 clients with the in-process
engine's client sampling, and one all-reduce per round sums the ranks' weighted models.
"""

from __future__ import annotations

import torch

from ...results.progress import RoundStats
from ...rounds.fedavg import FedAvgRounds
from .collectives import all_gather_object, all_reduce_sum


class DistributedFedAvgRounds(FedAvgRounds):
    """`fedsim.rounds.fedavg.FedAvgRounds` with the clients shared out among the ranks.

    Parameters
    ----------
    config, model, data, task, partition
        As for `FedAvgRounds`; the partition has one shard per client, any number of them.
    ranks : fedsim.engines.distributed.launch.Ranks
    """

    def __init__(self, config, model, data, task, partition, ranks):
        super().__init__(config, model, data, task, partition)
        self.ranks = ranks

    def served(self, round_index: int, assignments: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Return this rank's share of the round's (client, weight) pairs: every N-th from its rank."""
        return assignments[self.ranks.rank :: self.ranks.world_size]

    def combine(self, mean_delta: list[torch.Tensor], stats: RoundStats) -> None:
        """Sum the ranks' weighted models, the algorithm's sums and the counts (one all-reduce per dtype)."""
        counts = torch.tensor([stats.samples, stats.loss_sum, stats.steps], dtype=torch.float64,
                              device=self.ranks.device)
        all_reduce_sum([*mean_delta, *self.round_sums(), counts])
        stats.samples, stats.loss_sum, stats.steps = int(counts[0]), float(counts[1]), int(counts[2])
        if self.loss_scale.scaler is not None:  # fp16 AMP: every rank's next round starts from the smallest of all
            ends = all_gather_object(self.loss_scale.ends)
            self.loss_scale.ends = [end for rank_ends in ends for end in rank_ends]
