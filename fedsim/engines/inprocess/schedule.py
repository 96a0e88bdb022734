"""Which batch each rank reads at each global step of allreduce/reweighted, as a stateless function."""

from __future__ import annotations

import math

import torch

from ...seeding import torch_generator

# Stream keys, so that the ranks' shuffles never share a random stream with the clients' ones.
_SHUFFLE_STREAM = 0x5EED


class RankSchedule:
    """Give every rank its batch at global step ``t``, as per-rank samplers with ``set_epoch`` would.

    An epoch lasts as long as the largest shard takes: ``max_k ceil(n_k / B)`` steps. Each rank
    shuffles its shard at the start of every epoch (seeded by seed, epoch and rank). A rank whose
    shard is used up before the epoch ends either sits out (``"join"``, as DDP under ``Join``)
    or starts its shard over with a fresh shuffle (``"cycle"``). Because the batch at step ``t``
    is a function of ``t`` alone, a resumed run reads exactly the batches it would have read.

    Parameters
    ----------
    shards : list of array_like
        Each rank's sample indices.
    batch_size : int
    uneven : {"join", "cycle"}
    seed : int
    """

    def __init__(self, shards, batch_size: int, uneven: str, seed: int):
        self.shards = [torch.as_tensor(shard, dtype=torch.int64) for shard in shards]
        self.batch_size = batch_size
        self.uneven = uneven
        self.seed = seed
        self.rank_steps = [math.ceil(shard.numel() / batch_size) for shard in self.shards]
        self.steps_per_epoch = max(self.rank_steps)
        self._orders: dict[tuple[int, int, int], torch.Tensor] = {}

    def batches(self, step: int) -> list[torch.Tensor | None]:
        """Return each rank's sample indices at global ``step`` (``None`` for a rank sitting out)."""
        epoch, position = divmod(step, self.steps_per_epoch)
        return [self._batch(rank, epoch, position) for rank in range(len(self.shards))]

    def _batch(self, rank: int, epoch: int, position: int) -> torch.Tensor | None:
        steps = self.rank_steps[rank]
        if steps == 0:
            return None
        cycle, position = divmod(position, steps)
        if cycle > 0 and self.uneven == "join":
            return None
        order = self._order(rank, epoch, cycle)
        return order[position * self.batch_size : (position + 1) * self.batch_size]

    def _order(self, rank: int, epoch: int, cycle: int) -> torch.Tensor:
        key = (rank, epoch, cycle)
        if key not in self._orders:
            if len(self._orders) > 4 * len(self.shards):
                self._orders.clear()  # older epochs are never read again
            shard = self.shards[rank]
            generator = torch_generator(self.seed, _SHUFFLE_STREAM, epoch, rank, cycle)
            self._orders[key] = shard[torch.randperm(shard.numel(), generator=generator)]
        return self._orders[key]
