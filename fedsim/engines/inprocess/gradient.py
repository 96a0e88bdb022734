"""allreduce and reweighted in one process: every step, K ranks' gradients are combined into one.

The model object's own parameters are the global model (as every DDP replica holds the same
weights), and one ``torch.optim.SGD`` steps them with the combined gradient, as the optimizer of
a DDP script does.
"""

from __future__ import annotations

import numpy as np
import torch

from partitions import feature_noise_levels

from ...aggregate import accumulate, class_balance_weights, cosine_to_mean, size_weights, softmax_weights
from ...client import autocast, seeded_global_rng, state_tensors, training_batch
from ...seeding import derive_seed, torch_generator
from .rounds import RoundStats, model_bytes
from .schedule import RankSchedule

_STEP_STREAM = 0x57E9


def has_batchnorm(model: torch.nn.Module) -> bool:
    """Whether the model keeps batch statistics, which must stay per rank (no fused forward then)."""
    return any(isinstance(module, torch.nn.modules.batchnorm._BatchNorm) for module in model.modules())


class GradientRounds:
    """Run allreduce or reweighted steps until each round has seen its budget of samples.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    model : torch.nn.Module
        Holds the global model; stepped in place.
    data : fedsim.data.Dataset
    task : fedsim.tasks.SingleLabel or fedsim.tasks.MultiLabel
    partition : partitions.Partition
        One shard per rank.
    """

    def __init__(self, config, model, data, task, partition):
        self.config, self.model, self.data, self.task = config, model, data, task
        self.device = next(model.parameters()).device
        self.global_state = state_tensors(model)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [b for b in model.buffers() if b.is_floating_point()]
        self.optimizer = torch.optim.SGD(
            self.params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
        self.schedule = RankSchedule(list(partition), config.batch_size, config.uneven, config.seed)
        self.num_ranks = partition.num_partitions
        self.noise = feature_noise_levels(self.num_ranks, config.feature_noise)
        self.step_count = 0
        # Static rank weights. Under Join a rank that sits out adds nothing and the rest are not
        # rescaled: the sum is still divided by K, as DDP divides by the initial world size.
        sizes = partition.sizes
        self.rank_weights = size_weights(sizes) if config.weights == "size" else np.full(self.num_ranks, 1 / self.num_ranks)
        self.class_weights = None
        if config.weights == "class-balanced":
            if task.multilabel:
                raise ValueError("`weights`='class-balanced' needs single-label data; use 'size' or 'dynamic'")
            self.class_weights = class_balance_weights(partition.counts(data.train_labels.numpy(), task.num_classes))
            self.class_weights = self.class_weights.to(self.device)
        self.dynamic = config.weights == "dynamic"
        self.fused = config.fused and not has_batchnorm(model) and not (self.dynamic and config.dynamic_rule == "cosine")
        self.param_bytes, self.buffer_bytes = model_bytes(model)
        # fp16 autocast on CUDA needs loss scaling; bf16 on the CPU does not
        self.scaler = torch.amp.GradScaler("cuda") if config.amp and self.device.type == "cuda" else None

    def train_round(self, round_index: int, samples_before: int, target: int) -> RoundStats:
        """Take steps until the run has seen ``target`` samples in all (none if it already has).

        ``target`` is FedAvg's cumulative work up to this round: counting against the total
        rather than per round keeps every report within one step of FedAvg's, without drift.
        """
        stats = RoundStats()
        # a step may overshoot the target; the next round then starts that much ahead
        while samples_before + stats.samples < target:
            batches = self.schedule.batches(self.step_count)
            active = [rank for rank, batch in enumerate(batches) if batch is not None and batch.numel()]
            if not active:  # the schedule's epoch is as long as the largest shard, so this cannot happen
                raise AssertionError(f"no rank has a batch at step {self.step_count}")
            with seeded_global_rng(derive_seed(self.config.seed, _STEP_STREAM, self.step_count), self.device):
                loss_sum = self.step(batches, active)
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            stats.samples += sum(batches[rank].numel() for rank in active)
            stats.loss_sum += loss_sum
            stats.bytes_up += len(active) * self.param_bytes
            stats.bytes_down += len(active) * (self.param_bytes + self.buffer_bytes)
            stats.steps += 1
            self.step_count += 1
        return stats

    def step(self, batches, active) -> float:
        """Leave the combined gradient of the ranks' batches in ``.grad``; return the summed sample loss."""
        self.optimizer.zero_grad(set_to_none=False)
        inputs = [self._inputs(batches[rank], rank) for rank in active]
        if self.fused:
            return self._fused_step(inputs, active)
        return self._per_rank_step(inputs, active)

    def _inputs(self, batch, rank):
        generator = torch_generator(self.config.seed, _STEP_STREAM, self.step_count, rank)
        return training_batch(self.data, batch, generator, float(self.noise[rank]), self.device)

    def _sample_losses(self, images, targets, rank_of_sample):
        """Return the per-sample losses as the optimizer sees them (class-balanced) and their raw sum."""
        with autocast(self.device, self.config.amp):
            raw = self.task.loss(self.model(images), targets)
        weighted = raw if self.class_weights is None else raw * self.class_weights[rank_of_sample, targets]
        return weighted, float(raw.detach().sum())

    def _fused_step(self, inputs, active) -> float:
        """One forward of all ranks' samples, each weighted by its rank's weight over its batch size."""
        images = torch.cat([x for x, _ in inputs])
        targets = torch.cat([y for _, y in inputs])
        counts = torch.tensor([y.shape[0] for _, y in inputs], device=self.device)
        rank_of_sample = torch.repeat_interleave(torch.tensor(active, device=self.device), counts)
        per_sample, loss_sum = self._sample_losses(images, targets, rank_of_sample)
        slot = torch.repeat_interleave(torch.arange(len(active), device=self.device), counts)
        rank_means = torch.zeros(len(active), device=self.device).index_add_(0, slot, per_sample.detach()) / counts
        weights = torch.as_tensor(self._weights(active, rank_means.cpu().numpy()), dtype=torch.float32,
                                  device=self.device)
        self._backward((per_sample * (weights / counts)[slot]).sum())
        return loss_sum

    def _per_rank_step(self, inputs, active) -> float:
        """Forward and backward rank by rank, each rank's BatchNorm statistics its own.

        Every rank starts from the same running statistics, as DDP broadcasts them before each
        forward, and the authoritative rank's update is the one that survives: the highest rank
        still active under Join (DDP's rule when ``Join`` is on, since rank 0 may have joined),
        rank 0 when no rank ever sits out (``uneven="cycle"``).
        """
        authority = max(active) if self.config.uneven == "join" else 0
        start = [b.clone() for b in self.buffers]
        kept = None
        loss_sum, rank_means, gradients = 0.0, [], []
        static = None if self.dynamic else self._weights(active, None)
        for slot, ((images, targets), rank) in enumerate(zip(inputs, active)):
            if slot and self.buffers:
                torch._foreach_copy_(self.buffers, start)
            rank_index = torch.full((targets.shape[0],), rank, device=self.device)
            per_sample, raw_sum = self._sample_losses(images, targets, rank_index)
            loss_sum += raw_sum
            rank_means.append(float(per_sample.detach().mean()))
            scale = 1.0 if self.dynamic else static[slot]
            self._backward(per_sample.mean() * scale)
            if self.dynamic:
                gradients.append([p.grad.clone() for p in self.params])
                self.optimizer.zero_grad(set_to_none=False)
            if rank == authority:
                kept = [b.clone() for b in self.buffers]
        if self.buffers:
            torch._foreach_copy_(self.buffers, kept if kept is not None else start)
        if self.dynamic:
            scores = cosine_to_mean(gradients) if self.config.dynamic_rule == "cosine" else rank_means
            grads = [p.grad for p in self.params]
            for gradient, weight in zip(gradients, self._weights(active, np.asarray(scores))):
                accumulate(grads, gradient, weight)
        return loss_sum

    def _backward(self, loss) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _weights(self, active, scores) -> np.ndarray:
        """Return the weight of each active rank: static, or ``softmax(score / T)`` over the active ranks.

        Dynamic weights are scaled by (active ranks / K), so that under Join, as with the static
        rules, a rank that sits out takes its share with it and the sum is still divided by K.
        """
        if self.dynamic:
            return softmax_weights(scores, self.config.temperature) * len(active) / self.num_ranks
        return self.rank_weights[active]

    def state_dict(self) -> dict:
        """Return what a checkpoint needs beyond the global tensors: step count, optimizer and loss scale."""
        state = {"step_count": self.step_count, "optimizer": self.optimizer.state_dict()}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self.step_count = int(state["step_count"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
