"""allreduce's and reweighted's step, engine-neutral: K ranks' gradients of their batches combined into one.

The model object's own parameters are the global model (as every DDP replica holds the same
weights), and the server optimizer steps them with the combined gradient, as the optimizer of a
DDP script does. The pieces of a step (`GradientRounds.begin_step`, `rank_gradient`, `combine`,
`end_step`) are what an engine drives: a loop over ranks here, Flower's clients for their
gradients; the in-process engine adds its fused form (one forward of all ranks' samples).
"""

from __future__ import annotations

import numpy as np
import torch

from partitions import feature_noise_levels

from ..checks import SettingError
from ..aggregate import (
    accumulate,
    aggregation_weights,
    cosine_to_mean,
    loss_class_weights,
)
from ..client.update import state_tensors
from ..comm.compression import check_in_process, simulate, wire_bytes
from ..results.progress import RoundStats
from ..schedule import RankSchedule, micro_batch_count, model_bytes
from ..seeding import Stream, derive_seed, torch_generator
from ..server import ServerOptimizer
from ..comm.sync_batchnorm import check_sync_bn, sync_bn_bytes
from ..client.training import (
    LocalGradient,
    local_gradient,
    seeded_global_rng,
)
from .drive import GradientCheckpoint


class GradientSetup(GradientCheckpoint):
    """What allreduce's and reweighted's steps start from on every engine, and checkpoint.

    The ranks' schedule, the server optimizer on the model's own parameters, each rank's feature
    noise and class weights, and the bytes a step sends besides the gradient. `GradientRounds`
    takes the steps in this process; ``fedsim ddp``'s rounds
    (`fedsim.engines.distributed.gradient.DistributedGradientRounds`) on each rank.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    model : torch.nn.Module
        Holds the global model; stepped in place.
    data : fedsim.data.Dataset
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    partition : partitions.Partition
        One shard per rank.
    """

    def __init__(self, config, model, data, task, partition):
        self.config, self.model, self.data, self.task, self.partition = config, model, data, task, partition
        self.schedule = RankSchedule(list(partition), config.batch_size, config.uneven, config.seed)
        self.sizes = partition.sizes
        self.num_ranks = partition.num_partitions
        self.sync_bytes = 0
        if config.sync_bn:
            check_sync_bn(model, self.schedule.sits_out)
            self.sync_bytes = sync_bn_bytes(model)
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.global_state = state_tensors(model)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.server = ServerOptimizer.for_config(config, self.params)
        self.noise = feature_noise_levels(self.num_ranks, config.feature_noise)
        self.class_weights = loss_class_weights(config.weights, partition, data.train_labels, task, self.dtype)
        if self.class_weights is not None:
            self.class_weights = self.class_weights.to(self.device)
        self.param_bytes, self.buffer_bytes = model_bytes(model)
        self.step_count = 0


class GradientRounds(GradientSetup):
    """Run allreduce or reweighted steps in this process until each round has seen its budget of samples.

    Takes `GradientSetup`'s parameters.
    """

    def __init__(self, config, model, data, task, partition):
        super().__init__(config, model, data, task, partition)
        self.buffers = [b for b in model.buffers() if b.is_floating_point()]
        self.dynamic = config.weights == "dynamic"
        self.compression = check_in_process(config.compression)
        # dynamic weights and compression act on each rank's gradient apart: no running sum in .grad then
        self.separate = self.dynamic or self.compression != "none"
        if config.sync_bn and self.compression != "none":
            raise SettingError("{sync_bn} with {compression} runs on `fedsim ddp` only: compression acts on each "
                               "rank's own gradient, which SyncBatchNorm ties to every rank's batch",
                               sync_bn=config.sync_bn, compression=config.compression)
        self._rank_buffers: dict[int, list[torch.Tensor]] = {}  # each rank's BatchNorm statistics after its last step

    def train_round(self, round_index: int, samples_before: int, target: int) -> RoundStats:
        """Take steps until the run has seen ``target`` samples in all (none if it already has).

        ``target`` is FedAvg's cumulative work up to this round (`RankSchedule.round_steps`).
        """
        stats = RoundStats()
        self.begin_round()
        for step in self.schedule.round_steps(self.step_count, samples_before, target):
            batches, active = self.begin_step(step)
            stats.loss_sum += self.step(batches, active, stats)
            self.end_step(step, stats)
        return stats

    def begin_round(self) -> None:
        """Forget the ranks' own BatchNorm statistics: DDP syncs every rank's model at a round's end (Join's exit)."""
        self._rank_buffers = {}

    def begin_step(self, step: int) -> tuple[list, list[int]]:
        """Return each rank's batch at ``step`` and the ranks that have one.

        At an epoch's start the ranks' own BatchNorm statistics are forgotten. The step's rank
        randomness (`generator`, `dropout_seed`) follows from ``step_count``,
        which must equal ``step``.
        """
        if step % self.schedule.steps_per_epoch == 0:
            self._rank_buffers = {}  # DDP syncs every rank's model at the end of an epoch too
        batches = self.schedule.batches(step)
        return batches, [rank for rank, batch in enumerate(batches) if batch is not None and batch.numel()]

    def end_step(self, step: int, stats: RoundStats, batch_sizes: list[int] | None = None) -> None:
        """Step the server with the combined gradient in ``.grad`` and count the step in ``stats``.

        ``batch_sizes`` are the ranks' batch sizes that took part (the schedule's by default).
        """
        self.server.step_gradient()
        sizes = self.schedule.batch_sizes(step) if batch_sizes is None else batch_sizes
        sent = wire_bytes(self.params, self.compression, step, self.config.powersgd_rank)
        sent += self.sync_bytes * micro_batch_count(sizes, self.config.micro_batches)
        stats.count_step(sizes, sent, self.buffer_bytes)
        self.step_count += 1

    def step(self, batches, active, stats: RoundStats | None = None) -> float:
        """Leave the combined gradient of the ranks' batches in ``.grad``; return the summed sample loss.

        Each rank's dropout masks are seeded by (seed, step, rank), as a DDP rank seeds its own.
        ``stats`` keeps the first rank whose loss is not finite (`note_ranks`).
        """
        self.server.zero_grad()
        return self._per_rank_step(batches, active, stats)

    def generator(self, rank: int) -> torch.Generator:
        """Return rank ``rank``'s data stream (augmentation, noise) at the current step."""
        return torch_generator(self.config.seed, Stream.STEP_DATA, self.step_count, rank)

    def dropout_seed(self, rank: int) -> int:
        """Return the seed of rank ``rank``'s dropout masks at the current step, as a DDP rank seeds them."""
        return derive_seed(self.config.seed, Stream.STEP_DROPOUT, self.step_count, rank)

    def weights(self, active, scores=None) -> np.ndarray:
        """Return the ``active`` ranks' weights at this step (``scores``: their losses or cosines, for dynamic ones)."""
        return aggregation_weights(self.config.weights, self.sizes, active, num_ranks=self.num_ranks, scores=scores,
                                   temperature=self.config.temperature)

    def _per_rank_step(self, batches, active, stats: RoundStats | None = None) -> float:
        """Forward and backward rank by rank, each rank's BatchNorm statistics its own."""
        start = self.start_buffers(active)
        updated = {}
        loss_sum, rank_losses, rank_means, gradients = 0.0, [], [], []
        static = None if self.separate else self.weights(active)
        parts = micro_batch_count([batches[rank].numel() for rank in active], self.config.micro_batches)
        for slot, rank in enumerate(active):
            if self.buffers:
                torch._foreach_copy_(self.buffers, start)
            result = self.rank_gradient(rank, batches[rank], 1.0 if self.separate else float(static[slot]), parts)
            rank_losses.append(float(result.loss_sum))
            loss_sum += rank_losses[-1]
            if self.separate:
                rank_means.append(result.weighted_mean_loss)
                gradients.append([p.grad.clone() for p in self.params])
                self.server.zero_grad()
            if self.buffers:
                updated[rank] = [b.clone() for b in self.buffers]
        self.keep_buffers(active, updated)
        if self.separate:
            self.combine(gradients, active, rank_means)
        if stats is not None:
            note_ranks(stats, active, rank_losses)
        return loss_sum

    def authority(self, active) -> int:
        """Return the rank whose BatchNorm statistics every rank starts a step from, and the model keeps.

        The running statistics follow DDP's: before each forward the authoritative rank's are
        broadcast to all, and each rank then updates its own copy. The authority is the highest
        rank still active when some rank sits out (DDP's rule under ``Join``, since rank 0 may
        have joined), rank 0 otherwise. At the end of a round or an epoch, where a DDP rank
        leaves ``Join``, every rank takes the last authority's model.
        """
        return max(active) if self.schedule.sits_out else 0

    def start_buffers(self, active) -> list[torch.Tensor]:
        """Return the floating-point buffers every active rank starts this step from: the authority's."""
        start = self._rank_buffers.get(self.authority(active))
        return [b.clone() for b in self.buffers] if start is None else start

    def keep_buffers(self, active, updated: dict[int, list[torch.Tensor]]) -> None:
        """Keep each rank's buffers after the step (``updated``) and give the model the authority's.

        A missing authority (a Flower client lost at this step) leaves the model's buffers as they are.
        """
        if not self.buffers:
            return
        authority = updated.get(self.authority(active))
        if authority is not None:
            torch._foreach_copy_(self.buffers, authority)
        self._rank_buffers = updated

    def rank_gradient(self, rank: int, batch: torch.Tensor, weight: float, parts: int) -> LocalGradient:
        """Add rank ``rank``'s gradient of its ``batch`` times ``weight`` to ``.grad``, from the model as it is.

        The batch goes through in ``parts`` micro-batches, each one's summed loss over the whole
        batch's size, so that ``.grad`` gets the batch mean.
        """
        generator = self.generator(rank)
        with seeded_global_rng(self.dropout_seed(rank), self.device):
            return sum((local_gradient(
                self.model, self.data, part, task=self.task, generator=generator, weight=weight / batch.numel(),
                class_weights=None if self.class_weights is None else self.class_weights[rank],
                noise_sigma=float(self.noise[rank]), amp=self.config.amp, scaler=self.server.scaler,
            ) for part in torch.tensor_split(batch, parts)), start=LocalGradient.zero())

    def client_gradient(self, rank: int, step: int) -> LocalGradient:
        """Leave in ``.grad`` rank ``rank``'s unweighted gradient at global ``step``, from the model as it is.

        What one rank computes at a step, where its gradient travels to be weighed elsewhere (a
        Flower client, whose model holds the global parameters and the statistics the step
        starts from).
        """
        self.step_count = step  # the rank's randomness at this step follows from it
        batch = self.schedule.batch(rank, step)
        if batch is None or not batch.numel():
            raise ValueError(f"partition {rank} has no batch at step {step}: it sits that step out")
        self.server.zero_grad()
        parts = micro_batch_count(self.schedule.batch_sizes(step), self.config.micro_batches)
        return self.rank_gradient(rank, batch, 1.0, parts)

    def combine(self, gradients, active, rank_means) -> None:
        """Leave in ``.grad`` the weighted sum of the ranks' separate gradients, compressed as DDP's hook would."""
        scores = None
        if self.dynamic:
            scores = cosine_to_mean(gradients) if self.config.dynamic_rule == "cosine" else np.asarray(rank_means)
        weights = self.weights(active, scores)
        grads = [p.grad for p in self.params]
        if self.compression == "none":
            for gradient, weight in zip(gradients, weights):
                accumulate(grads, gradient, weight)
            return
        # allreduce uses PyTorch's averaging hooks as they are; reweighted scales each rank by w_r * K first
        scales = None if self.config.strategy == "allreduce" else [float(w) * self.num_ranks for w in weights]
        with torch.no_grad():
            torch._foreach_copy_(grads, simulate(gradients, self.compression, self.num_ranks, scales))


def note_ranks(stats: RoundStats, active, rank_losses) -> None:
    """Keep in ``stats`` the first of the ``active`` ranks whose summed loss at a step (``rank_losses``) is not finite.

    Called step after step, it names the rank where a round's loss first stopped being finite
    ("rank 1"), as that rank of a DDP job would see it: after that step every rank's model holds
    the combined non-finite gradient, and every later loss is non-finite too.
    """
    for rank, loss in zip(active, rank_losses):
        stats.note_nonfinite(float(loss), f"rank {rank}")
