"""allreduce and reweighted on real DDP: each rank a process with its shard, one step at a time.

``allreduce`` is ``DistributedDataParallel`` as a user's script has it; ``reweighted`` adds
`fedsim.comm.hooks.weighted_allreduce_hook`. Every rank reads, at global step t, the batch the
in-process engine's rank reads (`fedsim.schedule.RankSchedule`), so the two engines agree
number for number (in float64 to ~1e-10).
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from ...comm.compression import wire_bytes
from ...comm.hooks import RankWeights, averaging_hook, weighted, weighted_allreduce_hook
from ...results.progress import RoundStats
from ...sampler import ShardSampler
from ...schedule import RankSchedule, micro_batch_count
from ...seeding import Stream, derive_seed, torch_generator
from ...comm.sync_batchnorm import convert_sync_batchnorm
from ...client.training import LocalGradient, batch_loss, seeded_global_rng
from ...rounds.gradient import GradientSetup
from .collectives import broadcast_object, broadcast_tensors


class RankBatches:
    """One rank's batch at each global step, read by a ``DataLoader`` through its `ShardSampler`.

    The loader yields sample indices; `fedsim.client.training.batch_loss` turns them into the
    augmented batch, seeded by (seed, step, rank) as in the in-process engine.
    """

    def __init__(self, schedule: RankSchedule, rank: int, sampler: ShardSampler, num_samples: int):
        self.schedule, self.rank, self.sampler = schedule, rank, sampler
        self.loader = DataLoader(range(num_samples), batch_size=schedule.batch_size, sampler=sampler)
        self._pass, self._next, self._iterator = None, 0, None

    def batch(self, step: int) -> torch.Tensor | None:
        """Return the indices of this rank's batch at ``step``, or ``None`` when it sits out."""
        place = self.schedule.locate(self.rank, step)
        if place is None:
            return None
        epoch, cycle, position = place
        if (epoch, cycle) != self._pass or position < self._next:
            self.sampler.set_epoch(epoch, cycle)
            self._iterator, self._pass, self._next = iter(self.loader), (epoch, cycle), 0
        for _ in range(position - self._next):  # a resumed run starts in the middle of a pass
            next(self._iterator)
        self._next = position + 1
        return next(self._iterator)


def epoch_segments(steps: range, steps_per_epoch: int) -> list[range]:
    """Cut a round's steps where an epoch ends: a rank that sat out rejoins at an epoch's start.

    Examples
    --------
    >>> epoch_segments(range(8, 13), 10)
    [range(8, 10), range(10, 13)]
    """
    cuts = [step for step in steps if step % steps_per_epoch == 0 and step != steps.start]
    bounds = [steps.start, *cuts, steps.stop]
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class DistributedGradientRounds(GradientSetup):
    """Run allreduce or reweighted steps on this rank until each round has seen its budget of samples.

    Parameters
    ----------
    config, model, data, task, partition
        As `fedsim.rounds.gradient.GradientSetup` takes them: ``model`` is this rank's replica, on
        its device, wrapped in ``DistributedDataParallel`` here.
    ranks : fedsim.engines.distributed.launch.Ranks
    """

    def __init__(self, config, model, data, task, partition, ranks):
        super().__init__(config, model, data, task, partition)
        if config.sync_bn:
            convert_sync_batchnorm(model)  # in place (the same tensors), before DDP wraps the model
        self.rank = ranks.rank
        # gradients as views of DDP's buckets: one copy of the gradient less per step
        self.ddp = DistributedDataParallel(model, device_ids=[ranks.device.index] if ranks.device.type == "cuda"
                                           else None, gradient_as_bucket_view=True)
        sampler = ShardSampler(partition, ranks.rank, seed=config.seed, dataset=data.train_labels)
        self.batches = RankBatches(self.schedule, ranks.rank, sampler, len(data.train_labels))
        self.rank_weights = register_gradient_hook(self.ddp, config, partition.sizes)
        # PowerSGD's state (error feedback, its first vanilla steps) lives in this process: a resumed
        # run starts it afresh at the step it resumes from
        self.compression_start = 0

    def train_round(self, round_index: int, samples_before: int, target: int) -> RoundStats:
        """Take this rank's steps until the run has seen ``target`` samples in all.

        Where some rank sits out a step (uneven shards under ``"join"``, or an empty shard),
        the steps run under ``Join``, one context per round and epoch: a rank that has run out
        shadows the others' all-reduces, and on leaving every rank takes the model of the last
        rank to run out. The server optimizer's momentum is taken from that rank too, since a
        rank that sat out did not step it.
        """
        config = self.config
        stats = RoundStats()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        steps = self.schedule.round_steps(self.step_count, samples_before, target)
        # each step's loss where the rank takes it, kept on the device: no synchronisation per step
        step_losses = torch.zeros(len(steps), dtype=torch.float64, device=self.device)
        for segment in epoch_segments(steps, self.schedule.steps_per_epoch):
            with Join([self.ddp], enable=self.schedule.sits_out):
                for step in segment:
                    batch = self.batches.batch(step)
                    if batch is None:  # out of data until the epoch ends
                        break
                    parts = micro_batch_count(self.schedule.batch_sizes(step), config.micro_batches)
                    loss = self.step(step, batch, parts)
                    loss_sum += loss
                    step_losses[step - steps.start] = loss
            if self.schedule.sits_out:
                self._sync_server(src=last_authority(self.schedule.batch_sizes(segment[-1])))
        for step in steps:
            sent = wire_bytes(self.params, config.compression, step - self.compression_start, config.powersgd_rank)
            sent += self.sync_bytes * micro_batch_count(self.schedule.batch_sizes(step), config.micro_batches)
            stats.count_step(self.schedule.batch_sizes(step), sent, self.buffer_bytes)
        self.step_count = steps.stop
        stats.loss_sum, stats.nonfinite = self._round_loss(loss_sum, step_losses)
        return stats

    def _round_loss(self, loss_sum: torch.Tensor, step_losses: torch.Tensor) -> tuple[float, str]:
        """Return the round's loss summed over every rank, and the first rank whose loss was not finite ("rank 1").

        One all-reduce carries both: the ranks' loss sums, and the first step at which each rank's
        own loss was not finite (a rank names its own; the sum puts them side by side). The rank
        named is the one at the earliest such step, the lowest at that step, as the in-process
        engine names it (`fedsim.rounds.gradient.note_ranks`): after that step every rank's model
        holds the combined non-finite gradient.
        """
        never = len(step_losses)  # a round may take no step (the one before overshot its samples)
        finite = torch.isfinite(step_losses)
        # the first non-finite step's index (argmax gives the first of equal maxima), `never` where all are finite
        first = torch.where(finite.all(), never, (~finite).to(torch.uint8).argmax()) if never else never
        reduced = torch.zeros(1 + dist.get_world_size(), dtype=torch.float64, device=self.device)
        reduced[0] = loss_sum
        reduced[1 + self.rank] = first
        dist.all_reduce(reduced)
        total, *firsts = reduced.tolist()
        bad = [(step, rank) for rank, step in enumerate(firsts) if step < never]
        return total, f"rank {min(bad)[1]}" if bad else ""

    def step(self, step: int, batch: torch.Tensor, parts: int = 1) -> torch.Tensor:
        """One DDP step on this rank's batch; return the batch's summed loss.

        With ``parts`` > 1 the batch goes through in parts whose gradients accumulate under
        ``no_sync()``; only the last part's backward all-reduces.
        """
        config = self.config
        self.server.zero_grad()
        generator = torch_generator(config.seed, Stream.STEP_DATA, step, self.rank)
        parts = torch.tensor_split(batch, parts)
        class_weights = None if self.class_weights is None else self.class_weights[self.rank]
        total = LocalGradient.zero()
        with seeded_global_rng(derive_seed(config.seed, Stream.STEP_DROPOUT, step, self.rank), self.device):
            for index, part in enumerate(parts):
                last = index == len(parts) - 1
                with contextlib.nullcontext() if last else self.ddp.no_sync():
                    # each part's summed loss over the whole batch's size: the batch mean
                    loss, result = batch_loss(self.ddp, self.data, part, task=self.task, generator=generator,
                                              weight=1.0 / batch.numel(), class_weights=class_weights,
                                              noise_sigma=float(self.noise[self.rank]), amp=config.amp)
                    total = total + result
                    if config.sync_bn and self.rank_weights is not None:
                        loss = loss * self._loss_scale(total.weighted_mean_loss)
                    elif last and self.rank_weights is not None and self.rank_weights.rule == "dynamic":
                        self.rank_weights.contribute(total.weighted_mean_loss)
                    scaler = self.server.scaler
                    (scaler.scale(loss) if scaler is not None else loss).backward()
        self.server.step_gradient()
        return total.loss_sum.double()

    def _loss_scale(self, score) -> float:
        """Return K w_r, this rank's loss factor under `sync_bn`: DDP's mean then gives the weighted loss's gradient.

        With SyncBatchNorm a rank's gradient carries every rank's loss through the shared
        statistics, so weighing gradients (the hook) would not weigh the losses; weighing the
        loss does. ``score`` is the batch's mean loss, which the ``dynamic`` rule exchanges.
        """
        weights = self.rank_weights
        if weights.rule == "dynamic":
            weights.contribute(score)
        weights.begin_step(self.device)
        weights.end_step()
        return weights.weight * weights.world_size

    def _sync_server(self, src: int) -> None:
        """Give every rank rank ``src``'s momentum and loss scale, which a rank that sat out has not kept up."""
        scaler = self.server.scaler
        if scaler is not None:  # fp16 AMP on CUDA: a rank that sat out has not updated its scale
            scaler.load_state_dict(broadcast_object(scaler.state_dict(), src))
        if not self.config.momentum:
            return
        state = self.server.optimizer.state
        buffers = []
        for param in self.params:
            if state[param].get("momentum_buffer") is None:  # a rank that has never stepped
                state[param]["momentum_buffer"] = torch.zeros_like(param)
            buffers.append(state[param]["momentum_buffer"])
        broadcast_tensors(buffers, src)

    def load_state_dict(self, state: dict) -> None:
        """Restore `fedsim.rounds.drive.GradientCheckpoint.state_dict` output; PowerSGD starts afresh from here."""
        super().load_state_dict(state)
        self.compression_start = self.step_count


def register_gradient_hook(ddp: DistributedDataParallel, config, sizes) -> RankWeights | None:
    """Register the communication hook of ``config``'s strategy and compression; return reweighted's weights.

    allreduce keeps DDP's own averaging, or PyTorch's compression hook in its place;
    reweighted weighs each rank's gradient (`fedsim.comm.hooks`) before the sum, compressed or not.
    """
    averaging = averaging_hook(config.compression, powersgd_rank=config.powersgd_rank, seed=config.seed)
    weights = None
    if config.strategy == "reweighted":
        weights = RankWeights(config.weights, sizes, temperature=config.temperature)
    if config.strategy == "allreduce" or config.sync_bn:  # under sync_bn the weights scale the loss instead
        if averaging is not None:
            hook, state = averaging
            ddp.register_comm_hook(state, hook)
        return weights
    ddp.register_comm_hook(weights, weighted_allreduce_hook if averaging is None else weighted(*averaging))
    return weights


def last_authority(batch_sizes) -> int:
    """Return the rank whose model DDP keeps when ``Join`` ends: the highest rank active at the last step."""
    return max(rank for rank, size in enumerate(batch_sizes) if size)

