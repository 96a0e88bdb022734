"""The schedules every engine follows: which clients a round samples, how many samples a round is
worth, which batch each rank reads at each step, and how many bytes a model is on the wire.

Each is a pure function of the seed and its indices, so an in-process loop, a torchrun rank and a
Flower SuperNode that ask the same question get the same answer, and a resumed run reads exactly
the batches it would have read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .seeding import Stream, derive_seed, torch_generator


def sample_clients(num_clients: int, fraction: float, seed: int, round_index: int, *,
                   poisson: bool = False) -> np.ndarray:
    """Return the sorted ids of the clients a round samples: ``max(1, round(fraction * K))`` of them, or each with
    probability ``fraction`` (``poisson``).

    Seeded by (seed, round) alone, so every engine samples the same clients for the same round.
    A Poisson round's size varies, and it may sample no client: that is the sampling the
    accountant of client-level DP assumes (`fedsim.privacy.accountant`).

    Examples
    --------
    >>> sample_clients(10, 0.3, seed=0, round_index=4).tolist() == sample_clients(10, 0.3, 0, 4).tolist()
    True
    >>> len(sample_clients(10, 0.3, seed=0, round_index=4))
    3
    >>> [len(sample_clients(10, 0.3, seed=0, round_index=r, poisson=True)) for r in range(5)]
    [2, 1, 1, 2, 4]
    """
    rng = np.random.default_rng(derive_seed(seed, Stream.SAMPLING, round_index))
    if poisson:
        return np.flatnonzero(rng.random(num_clients) < fraction)
    count = max(1, int(round(fraction * num_clients)))
    if count >= num_clients:
        return np.arange(num_clients)
    return np.sort(rng.choice(num_clients, size=count, replace=False))


def sample_participants(num_clients: int, fraction: float, seed: int, round_index: int, holdout=(), *,
                        poisson: bool = False) -> list[int]:
    """Return the clients a round samples when ``holdout`` clients never train: `sample_clients` over the others.

    The fraction is of the participating clients; without a holdout this is `sample_clients`.

    Examples
    --------
    >>> sample_participants(4, 0.5, 0, 0, holdout=[1]) == [[0, 2, 3][k] for k in sample_clients(3, 0.5, 0, 0)]
    True
    """
    if not len(holdout):
        return sample_clients(num_clients, fraction, seed, round_index, poisson=poisson).tolist()
    held = set(int(k) for k in holdout)
    participants = [k for k in range(num_clients) if k not in held]
    return [participants[k] for k in sample_clients(len(participants), fraction, seed, round_index, poisson=poisson)]


def holdout_of(partition) -> list[int]:
    """Return the clients ``partition`` holds out of training (unseen clients, ``holdout_clients``), if any."""
    return list(partition.params.get("holdout_clients", ()))


@dataclass(frozen=True)
class SampleGrid:
    """How many samples each round is worth: FedAvg's local work, the unit every strategy reports in.

    A FedAvg round trains ``local_epochs`` passes over the shards of the clients it samples (or
    ``local_steps`` batches from each). allreduce and reweighted take steps until they have
    seen as many samples, so that all strategies of a comparison report on one grid. A run of
    allreduce alone uses the default grid: one pass over every shard per round.

    Parameters
    ----------
    fraction : float
        Fraction C of the clients sampled per round.
    local_epochs : int
    local_steps : int, optional
        tau, which replaces ``local_epochs`` when set.
    batch_size : int
    seed : int
        The run's seed (it decides which clients a round samples).
    client_sampling : {"fixed", "poisson"}
        How a round samples its clients (`sample_clients`).
    """

    fraction: float = 1.0
    local_epochs: int = 1
    local_steps: int | None = None
    batch_size: int = 10
    seed: int = 0
    client_sampling: str = "fixed"

    @classmethod
    def from_config(cls, config) -> SampleGrid:
        """Return the grid of a `fedsim.config.RunConfig` (its FedAvg settings, or their defaults)."""
        return cls(config.fraction, config.local_epochs, config.local_steps, config.batch_size, config.seed,
                   config.client_sampling)

    def samples(self, sizes, round_index: int, holdout=()) -> int:
        """Return the samples round ``round_index`` is worth for shards of ``sizes`` (``holdout`` clients never train).

        ``local_epochs`` times the sampled shards' sizes, or what tau steps read from each
        sampled shard: whole passes of ``n`` samples (their last batch short), then full batches.

        Examples
        --------
        >>> SampleGrid(local_steps=2, batch_size=10).samples([15, 25], round_index=0)  # 10 + 5, then 10 + 10
        35
        """
        sizes = np.asarray(sizes)
        drawn = sample_participants(len(sizes), self.fraction, self.seed, round_index, holdout,
                                    poisson=self.client_sampling == "poisson")
        clients = [k for k in drawn if sizes[k] > 0]
        if self.local_steps is None:
            return self.local_epochs * int(sizes[clients].sum())
        total = 0
        for n in sizes[clients]:
            passes, extra_steps = divmod(self.local_steps, -(-int(n) // self.batch_size))
            total += passes * int(n) + extra_steps * self.batch_size
        return total


class RankSchedule:
    """Give every rank its batch at global step ``t``, as per-rank samplers with ``set_epoch`` would.

    An epoch lasts as long as the largest shard takes: ``max_k ceil(n_k / B)`` steps. Each rank
    shuffles its shard at the start of every epoch (`rank_order`). A rank whose shard is used up
    before the epoch ends either sits out (``"join"``, as DDP under ``Join``) or starts its
    shard over with a fresh shuffle (``"cycle"``). Because the batch at step ``t`` is a function
    of ``t`` alone, a resumed run reads exactly the batches it would have read.
    `fedsim.sampler.ShardSampler` is one rank's view of the same schedule (under ``"join"``).

    Parameters
    ----------
    shards : list of array_like
        Each rank's sample indices.
    batch_size : int
    uneven : {"join", "cycle"}
    seed : int
    """

    def __init__(self, shards, batch_size: int, uneven: str, seed: int):
        self.shards = [torch.as_tensor(np.asarray(shard), dtype=torch.int64) for shard in shards]
        self.batch_size = batch_size
        self.uneven = uneven
        self.seed = seed
        self.rank_steps = [math.ceil(shard.numel() / batch_size) for shard in self.shards]
        self.steps_per_epoch = max(self.rank_steps)
        self._orders: dict[tuple[int, int, int], torch.Tensor] = {}

    @property
    def sits_out(self) -> bool:
        """Whether some rank has no batch at some step: a DDP rank then needs ``Join``."""
        uneven_epochs = self.uneven == "join" and len(set(self.rank_steps)) > 1
        return uneven_epochs or 0 in self.rank_steps

    def batches(self, step: int) -> list[torch.Tensor | None]:
        """Return each rank's sample indices at global ``step`` (``None`` for a rank sitting out)."""
        return [self.batch(rank, step) for rank in range(len(self.shards))]

    def batch(self, rank: int, step: int) -> torch.Tensor | None:
        """Return rank ``rank``'s sample indices at global ``step`` (``None`` when it sits out)."""
        place = self.locate(rank, step)
        if place is None:
            return None
        epoch, cycle, position = place
        order = self._order(rank, epoch, cycle)
        return order[position * self.batch_size : (position + 1) * self.batch_size]

    def locate(self, rank: int, step: int) -> tuple[int, int, int] | None:
        """Return where rank ``rank``'s batch at ``step`` lies: (epoch, pass over its shard, batch in the pass).

        ``None`` when the rank sits out that step (an empty shard, or a shard used up under ``"join"``).
        """
        epoch, position = divmod(step, self.steps_per_epoch)
        steps = self.rank_steps[rank]
        if steps == 0:
            return None
        cycle, position = divmod(position, steps)
        if cycle > 0 and self.uneven == "join":
            return None
        return epoch, cycle, position

    def batch_sizes(self, step: int) -> list[int]:
        """Return each rank's batch size at ``step`` (0 for a rank sitting out), without drawing a shuffle."""
        sizes = []
        for rank, shard in enumerate(self.shards):
            place = self.locate(rank, step)
            sizes.append(0 if place is None else min(self.batch_size, shard.numel() - place[2] * self.batch_size))
        return sizes

    def round_steps(self, first_step: int, samples_before: int, target: int) -> range:
        """Return the steps from ``first_step`` on that bring the samples seen from ``samples_before`` to ``target``.

        ``target`` is FedAvg's cumulative work up to the round (`SampleGrid`): counting against
        the total rather than per round keeps every report within one step of FedAvg's, without
        drift. A step may overshoot; the next round then starts that much ahead.
        """
        step, seen = first_step, samples_before
        while seen < target:
            seen += sum(self.batch_sizes(step))
            step += 1
        return range(first_step, step)

    def _order(self, rank: int, epoch: int, cycle: int) -> torch.Tensor:
        key = (rank, epoch, cycle)
        if key not in self._orders:
            if len(self._orders) > 4 * len(self.shards):
                self._orders.clear()  # older epochs are never read again
            self._orders[key] = rank_order(self.shards[rank], self.seed, rank, epoch, cycle)
        return self._orders[key]


def micro_batch_count(batch_sizes, micro_batches: int) -> int:
    """Return into how many parts every active rank splits its batch at a step.

    ``micro_batches``, or fewer when some rank's batch is smaller: DDP ranks must run the same
    number of forward passes per step, since each may hold a collective.

    Examples
    --------
    >>> micro_batch_count([10, 3, 0], micro_batches=4)
    3
    """
    return max(1, min([micro_batches, *(size for size in batch_sizes if size)]))


def rank_order(shard: torch.Tensor, seed: int, rank: int, epoch: int, cycle: int = 0) -> torch.Tensor:
    """Return rank ``rank``'s shard in the order it reads it in ``epoch`` (its ``cycle``-th pass in it)."""
    generator = torch_generator(seed, Stream.SHUFFLE, epoch, rank, cycle)
    return shard[torch.randperm(shard.numel(), generator=generator)]


def model_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """Return the bytes of the trainable parameters and of the floating-point buffers, as they travel."""
    params = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers() if b.is_floating_point())
    return params, buffers
