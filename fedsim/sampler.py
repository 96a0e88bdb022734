"""`ShardSampler`: a drop-in for ``DistributedSampler`` that reads a rank's shard from a `Partition`."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from partitions import Partition

from .checks import SettingError, SettingTypeError
from .schedule import rank_order


class ShardSampler(Sampler[int]):
    """Yield the indices of one rank's partition, reshuffled every epoch.

    Use it where a DDP script uses ``DistributedSampler``: the rank reads its own (possibly
    Non-IID, possibly uneven) shard instead of an IID slice. It is rank ``rank``'s view of
    `fedsim.schedule.RankSchedule` (``uneven="join"``): with a ``DataLoader`` of the same batch
    size, a torchrun rank reads at each step exactly the batch that the in-process engine's
    rank ``rank`` reads, so the two engines can be compared number for number.

    Parameters
    ----------
    partition : partitions.Partition
        One partition per rank.
    rank : int
        This process's rank, ``0 <= rank < len(partition)``.
    shuffle : bool, default True
        Reshuffle the shard every epoch (seeded by seed, epoch and rank: `fedsim.schedule.rank_order`).
    seed : int, default 0
        Must be the same on every rank.
    drop_last : bool, default False
        Truncate every rank to the smallest shard's size, so that all ranks take the same number
        of steps and plain DDP needs no ``Join``. Without it, uneven shards give ranks different
        step counts: wrap the loop in ``torch.distributed.algorithms.join.Join``. A warning says
        when this discards more than half of the rank's shard (Dir(0.1) over 10 ranks can cut a
        shard of 706 samples to 60).
    dataset : Sized, optional
        The dataset the indices point into; given, indices beyond ``len(dataset)`` are refused
        (a partition made for another dataset).

    Raises
    ------
    ValueError
        When ``torch.distributed`` is initialised and its world size differs from the number
        of partitions, or an index lies beyond ``dataset``.

    Examples
    --------
    >>> p = Partition([[0, 2, 4], [1, 3]], num_samples=5, scheme="manual")
    >>> sorted(ShardSampler(p, rank=0))
    [0, 2, 4]
    >>> len(ShardSampler(p, rank=0, drop_last=True))
    2
    """

    def __init__(self, partition: Partition, rank: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 *, dataset=None):
        if not isinstance(partition, Partition):
            raise SettingTypeError("{partition:name} must be a partitions.Partition, got {kind:text}",
                                   kind=type(partition).__name__)
        _check_world_size(partition)
        if dataset is not None and partition.num_samples > len(dataset):
            shards = [shard for shard in partition if shard.size]
            largest = max((int(shard.max()) for shard in shards), default=-1)
            if largest >= len(dataset):
                raise SettingError("{partition:name} holds index {largest:text}, beyond the {samples:text} samples of "
                                   "{dataset:name}: it was made for another dataset", largest=largest,
                                   samples=len(dataset))
        self.indices = torch.from_numpy(partition.shard(rank))
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = self.cycle = 0
        self.num_samples = int(partition.sizes.min()) if drop_last else self.indices.numel()
        if drop_last and self.num_samples < self.indices.numel() / 2:
            warnings.warn(f"`drop_last` keeps {self.num_samples} of rank {rank}'s {self.indices.numel()} samples "
                          "(the smallest shard's size); use Join instead to keep them all", stacklevel=2)

    def __iter__(self) -> Iterator[int]:
        order = self.indices
        if self.shuffle:
            order = rank_order(order, self.seed, self.rank, self.epoch, self.cycle)
        return iter(order[: self.num_samples].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int, cycle: int = 0) -> None:
        """Set the epoch, so that each epoch's shuffle differs (call before each epoch, as with DDP).

        ``cycle`` numbers the passes over the shard within one epoch, for a rank that starts its
        shard over rather than sit out (``uneven="cycle"``); each pass has its own shuffle.
        """
        self.epoch, self.cycle = epoch, cycle


def _check_world_size(partition: Partition) -> None:
    """Refuse a partition whose number of parts is not the world size of an initialised process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() != partition.num_partitions:
        raise SettingError("{partition:name} has {parts:text} partitions but the world size is {world_size:text}: make "
                           "one partition per rank", parts=partition.num_partitions, world_size=dist.get_world_size())
