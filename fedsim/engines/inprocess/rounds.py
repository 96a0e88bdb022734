"""What the round implementations share: their per-round statistics, sizes and client sampling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...seeding import derive_seed

_SAMPLING_STREAM = 0xC0407


@dataclass
class RoundStats:
    """What one round did: samples forwarded, summed training loss, bytes each way, steps or clients."""

    samples: int = 0
    loss_sum: float = 0.0
    bytes_up: int = 0
    bytes_down: int = 0
    steps: int = 0
    clients: int = 0

    @property
    def train_loss(self) -> float:
        """Mean training loss per sample forwarded this round."""
        return self.loss_sum / max(self.samples, 1)


def model_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """Return the bytes of the trainable parameters and of the floating-point buffers, as they travel."""
    params = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers() if b.is_floating_point())
    return params, buffers


def sample_clients(num_clients: int, fraction: float, seed: int, round_index: int) -> np.ndarray:
    """Return the sorted ids of the ``max(1, round(fraction * K))`` clients sampled in a round.

    Seeded by (seed, round) alone, so every engine samples the same clients for the same round.

    Examples
    --------
    >>> sample_clients(10, 0.3, seed=0, round_index=4).tolist() == sample_clients(10, 0.3, 0, 4).tolist()
    True
    >>> len(sample_clients(10, 0.3, seed=0, round_index=4))
    3
    """
    count = max(1, int(round(fraction * num_clients)))
    if count >= num_clients:
        return np.arange(num_clients)
    rng = np.random.default_rng(derive_seed(seed, _SAMPLING_STREAM, round_index))
    return np.sort(rng.choice(num_clients, size=count, replace=False))


def samples_per_round(config, partition, round_index: int) -> int:
    """Return FedAvg's local work in round ``round_index``, in samples: the unit every strategy reports in.

    ``local_epochs`` times the shard sizes of the clients FedAvg samples in that round, or with
    ``local_steps`` (tau) set, what tau steps read from each sampled shard: whole passes of
    ``n`` samples (their last batch short), then full batches. allreduce and reweighted take
    steps until they have seen as many samples, so all strategies report on one grid.
    """
    sizes = partition.sizes
    clients = [k for k in sample_clients(len(sizes), config.fraction, config.seed, round_index) if sizes[k] > 0]
    if config.local_steps is None:
        return config.local_epochs * int(sizes[clients].sum())
    batch = config.batch_size
    total = 0
    for n in sizes[clients]:
        passes, extra_steps = divmod(config.local_steps, -(-int(n) // batch))
        total += passes * int(n) + extra_steps * batch
    return total
