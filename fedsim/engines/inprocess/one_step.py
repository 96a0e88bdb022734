"""Clients whose round is one SGD step on one batch, trained together: one forward and backward for all.

A client that takes one step of SGD from the global model ``g`` on its batch ends at
``y_k = g - lr * c * (grad_k + wd * g)``: a fresh optimizer's first step, with ``c = 1 + momentum``
under Nesterov and 1 otherwise, and FedProx's term zero at ``g``. The round's weighted sum of
trained models is then linear in the clients' gradients,

    sum_k s_k y_k = S g - lr c (sum_k s_k grad_k + wd S g),    S = sum_k s_k,

and ``sum_k s_k grad_k`` is the gradient of one loss over all those clients' batches, each
sample weighted ``s_k / |b_k|``. So 100 clients of 4 samples cost one forward and backward of
400 samples instead of 100 of 4 (job X of ``benchmarks/flower_speed.py``). Each client's batch
and inputs come from its own random stream exactly as `fedsim.client.client_update` draws them.

It applies where one forward over many clients' samples computes what each client's own
forward would: plain SGD, no BatchNorm or dropout (`fedsim.engines.inprocess.gradient.forward_per_rank`),
no AMP, one micro-batch, and an algorithm without client terms or client states (FedAvg,
FedProx, FedNova, FedOpt; not SCAFFOLD or MOON). The result equals the per-client loop up to the
order of floating-point sums (``fused=False`` runs the loop; the tests compare the two in float64).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ...client.update import local_batches, set_state, state_tensors
from ...results.progress import RoundStats
from ...seeding import Stream, derive_seed, torch_generator
from ...client.training import as_index_tensor, seeded_global_rng, training_batch
from .gradient import forward_per_rank

#: The most samples one fused forward takes (its activations stay a few hundred MB for the CNN); more go in several.
MAX_SAMPLES = 1024


@dataclass
class OneStepClient:
    """A client of the round whose local training is a single step: its weight, batch and random stream."""

    client: int
    weight: float
    batch: torch.Tensor
    generator: torch.Generator


class OneStepClients:
    """Train a round's one-step clients together (see the module's text); `applies` says where it may.

    Parameters
    ----------
    rounds : fedsim.engines.inprocess.fedavg.InProcessFedAvgRounds
        Whose model, data, config, algorithm and global state the clients use.
    """

    def __init__(self, rounds):
        self.rounds = rounds

    @staticmethod
    def applies(rounds) -> bool:
        """Whether some of ``rounds``' clients may take a single step, and one forward computes what theirs would.

        That needs plain SGD, no BatchNorm or dropout, no AMP, one micro-batch, no client-level DP, and
        an algorithm that is linear and trains its clients without hooks (`fedsim.algorithms.Algorithm`'s capabilities).
        """
        training, algorithm = rounds.training, rounds.algorithm
        # more than one step for every client: two epochs, two steps, or a full second batch in the one epoch
        one_step_possible = training.local_steps == 1 or (
            training.local_steps is None and training.epochs == 1 and int(min(rounds.sizes)) < 2 * training.batch_size)
        return (one_step_possible and rounds.config.fused and training.optimizer.name == "sgd" and not training.amp
                and training.micro_batches == 1 and not forward_per_rank(rounds.model)
                and algorithm.linear and not algorithm.needs_client_loop
                and rounds.privacy is None)  # client-level DP clips each client's update: it needs each one

    def split(self, round_index: int, assignments: list[tuple[int, float]]) -> tuple[list[OneStepClient], list]:
        """Return the (client, weight) pairs that take one step, with their batches, and the others."""
        rounds = self.rounds
        fused, looped = [], []
        for client, weight in assignments:
            generator = torch_generator(rounds.config.seed, Stream.CLIENT_DATA, round_index, client)
            shard = as_index_tensor(rounds.partition.shard(client), rounds.data.train_images.shape[0])
            batches = list(itertools.islice(local_batches(shard, rounds.training, generator), 2))
            if len(batches) == 1:
                fused.append(OneStepClient(client, weight, batches[0], generator))
            else:
                looped.append((client, weight))
        return fused, looped

    def train(self, round_index: int, clients: list[OneStepClient], weighted_sum: list[torch.Tensor],
              stats: RoundStats) -> None:
        """Add round ``round_index``'s one-step clients' scaled trained models to ``weighted_sum``, their counts
        to ``stats``."""
        rounds = self.rounds
        model, global_state = rounds.model, rounds.global_state
        set_state(model, global_state)
        model.train()
        model.zero_grad(set_to_none=True)
        scales = [rounds.client_weight(one.weight, 1) for one in clients]
        # a user's random layer draws from the round's stream, not the process's (which a resume would change)
        seed = derive_seed(rounds.config.seed, Stream.CLIENT_DROPOUT, round_index)
        with seeded_global_rng(seed, global_state[0].device):
            for start, stop in _groups([one.batch.numel() for one in clients], MAX_SAMPLES):
                self._backward(clients[start:stop], scales[start:stop], stats)
        total = sum(scales)
        optimizer = rounds.training.optimizer
        step = optimizer.lr * (1.0 + optimizer.momentum if optimizer.nesterov else 1.0)
        with torch.no_grad():
            for summed, tensor, start in zip(weighted_sum, state_tensors(model), global_state):
                summed.add_(start, alpha=total)
                if tensor.grad is not None:  # S g - lr c (G + wd S g); a frozen tensor stays at S g
                    summed.add_(tensor.grad, alpha=-step)
                    summed.add_(start, alpha=-step * optimizer.weight_decay * total)
        model.zero_grad(set_to_none=True)

    def _backward(self, clients: list[OneStepClient], scales: list[float], stats: RoundStats) -> None:
        """Add to ``.grad`` the gradient of the clients' batch means, client k's weighted ``scales[k]``."""
        rounds = self.rounds
        param = next(rounds.model.parameters())
        batches = [training_batch(rounds.data, one.batch, one.generator, float(rounds.noise[one.client]),
                                  param.device, param.dtype) for one in clients]
        counts = torch.tensor([targets.shape[0] for _, targets in batches], device=param.device)
        slot = torch.repeat_interleave(torch.arange(len(clients), device=param.device), counts)
        raw = rounds.task.loss(rounds.model(torch.cat([inputs for inputs, _ in batches])),
                               torch.cat([targets for _, targets in batches]))
        weights = torch.tensor(scales, dtype=raw.dtype, device=param.device) / counts
        (raw * weights[slot]).sum().backward()
        loss_sums = torch.zeros(len(clients), dtype=torch.float64, device=param.device)
        loss_sums.index_add_(0, slot, raw.detach().to(torch.float64))
        for count, loss_sum in zip(counts.tolist(), loss_sums.tolist()):
            stats.add_client(count, loss_sum, 1)


def _groups(sizes: list[int], limit: int):
    """Yield (start, stop) runs of ``sizes`` whose sum stays within ``limit`` (a longer item alone)."""
    start, total = 0, 0
    for index, size in enumerate(sizes):
        if total and total + size > limit:
            yield start, index
            start, total = index, 0
        total += size
    if start < len(sizes):
        yield start, len(sizes)
