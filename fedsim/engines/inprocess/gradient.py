"""allreduce and reweighted in this process, with the fused form of a step: one forward of all ranks' samples."""

from __future__ import annotations

import math

import torch

from ...results.progress import RoundStats
from ...rounds.gradient import GradientRounds, note_ranks
from ...schedule import micro_batch_count
from ...seeding import Stream, derive_seed
from ...client.training import autocast, seeded_global_rng, training_batch


def forward_per_rank(model: torch.nn.Module) -> bool:
    """Whether one forward over all ranks' samples would differ from one forward per rank.

    BatchNorm statistics are per rank (DDP without SyncBatchNorm), and each DDP rank draws its
    own dropout and stochastic-depth masks.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            return True
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) or type(module).__name__ == "StochasticDepth":
            if module.p > 0:
                return True
        if isinstance(module, torch.nn.MultiheadAttention) and module.dropout > 0:
            return True
    return False


class InProcessGradientRounds(GradientRounds):
    """`fedsim.rounds.gradient.GradientRounds` that takes a step in one forward of every rank's samples where it can.

    Takes `GradientRounds`' parameters. The fused step weighs each sample's loss by its rank's
    weight over its batch size; it applies where one forward equals one per rank (no BatchNorm,
    no dropout: `forward_per_rank`), without compression, micro-batches or cosine weights. With
    ``sync_bn`` it is the step itself: BatchNorm over every rank's samples (dropout masks are then
    drawn for the whole K x B batch, not per rank as on DDP).
    """

    def __init__(self, config, model, data, task, partition):
        super().__init__(config, model, data, task, partition)
        self.fused = config.sync_bn or (config.fused and not forward_per_rank(model) and self.compression == "none"
                                        and config.micro_batches == 1
                                        and not (self.dynamic and config.dynamic_rule == "cosine"))

    def step(self, batches, active, stats: RoundStats | None = None) -> float:
        """Take the step fused where it applies, rank by rank otherwise (`GradientRounds.step`)."""
        if not self.fused:
            return super().step(batches, active, stats)
        self.server.zero_grad()
        # a layer's own random draws (sync_bn's dropout, a user's noise) from the step's stream, not the process's
        with seeded_global_rng(derive_seed(self.config.seed, Stream.STEP_DROPOUT, self.step_count), self.device):
            return self._fused_step(batches, active, stats)

    def _fused_step(self, batches, active, stats: RoundStats | None = None) -> float:
        """One forward of all ranks' samples, each weighted by its rank's weight over its batch size.

        With micro-batches (`sync_bn` only), part j of every rank's batch goes through together.
        Where the step's loss is not finite, ``stats`` keeps the first rank whose own loss is not
        (`fedsim.rounds.gradient.note_ranks`).
        """
        generators = [self.generator(rank) for rank in active]
        counts = torch.tensor([batches[rank].numel() for rank in active], device=self.device)
        parts = micro_batch_count(counts.tolist(), self.config.micro_batches)
        splits = [torch.tensor_split(batches[rank], parts) for rank in active]
        static = None if self.dynamic else self.weights(active)
        loss_sum, losses = 0.0, []
        for part in range(parts):
            inputs = [training_batch(self.data, split[part], generator, float(self.noise[rank]), self.device,
                                     self.dtype) for split, generator, rank in zip(splits, generators, active)]
            raw, slot = self._fused_part(inputs, active, counts, static)
            loss_sum += float(raw.sum())
            losses.append((raw, slot))
        if stats is not None and not math.isfinite(loss_sum):  # only then: which ranks' samples made it so
            rank_losses = torch.zeros(len(active), dtype=torch.float64, device=self.device)
            for raw, slot in losses:
                rank_losses.index_add_(0, slot, raw.to(torch.float64))
            note_ranks(stats, active, rank_losses.tolist())
        return loss_sum

    def _fused_part(self, inputs, active, counts, static) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward one part of every active rank's batch; ``counts`` are the whole batches' sizes.

        Returns the samples' raw losses (detached) and each sample's slot in ``active``.
        """
        images = torch.cat([x for x, _ in inputs])
        targets = torch.cat([y for _, y in inputs])
        slot = torch.repeat_interleave(torch.arange(len(active), device=self.device),
                                       torch.tensor([y.shape[0] for _, y in inputs], device=self.device))
        with autocast(self.device, self.config.amp):
            raw = self.task.loss(self.model(images), targets)
        per_sample = raw
        if self.class_weights is not None:
            rank_of_sample = torch.as_tensor(active, device=self.device)[slot]
            per_sample = raw * self.class_weights[rank_of_sample, targets]
        if static is None:  # dynamic: one part (RunConfig sees to it), so these are the batches' means
            rank_means = torch.zeros(len(active), dtype=per_sample.dtype, device=self.device)
            rank_means = rank_means.index_add_(0, slot, per_sample.detach()) / counts
            static = self.weights(active, rank_means.cpu().numpy())
        weights = torch.as_tensor(static, dtype=per_sample.dtype, device=self.device)
        loss = (per_sample * (weights / counts)[slot]).sum()
        (self.server.scaler.scale(loss) if self.server.scaler is not None else loss).backward()
        return raw.detach(), slot
