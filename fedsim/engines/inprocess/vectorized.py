"""A round's clients trained as a cohort: stacked parameters, one vmapped gradient per local step (torch.func).

The per-client loop (`fedsim.client.client_update`) trains clients one after another on one
model object. Here a cohort of up to ``vectorize_chunk`` clients trains at once: each parameter
is stacked along a first dimension, one row per client, and each local step is one call of
``vmap(grad(loss))`` over every client's batch (``torch.func.functional_call`` on the shared
model), followed by one optimizer step on the stacks (`fedsim.engines.inprocess.stacked_optim`).
A plain multilayer perceptron skips ``vmap``: one batched matrix product per layer
(`fedsim.engines.inprocess.stacked_mlp`).

Each client keeps what the loop gives it:

- its own parameters and optimizer state (SGD with momentum, weight decay and Nesterov; Adam, AdamW);
- its batches, in its own order, drawn from its own stream together with its augmentation and
  feature noise, outside ``vmap`` and in the loop's order;
- its own number of local steps (its shard's size, a straggler's partial work). The cohort is
  ordered by decreasing step count, so that the clients still training at step ``t`` are the
  first ``n_t`` rows: a step works on views of those rows, and a finished client's parameters
  and state stop changing without masks or wasted work;
- its batch's mean loss, a short last batch included: batches are padded to the step's longest
  with samples of weight zero;
- its dropout masks, drawn from its own stream before each step (`fedsim.engines.inprocess.cohort_dropout`);
- under AMP, the loop's autocast (bf16 on the CPU, fp16 on CUDA) and, in fp16, its own loss scale and
  skipped steps (`fedsim.engines.inprocess.stacked_scaler`).

An algorithm's client terms take part through their stacked form (`fedsim.algorithms.LocalTerms.stacked`:
FedProx's proximal term, SCAFFOLD's correction, MOON's contrast with each client's previous model
stacked); `after_client` and the round's sums see each
client's trained row as the loop's clients' models. The result equals the loop's up to the order of
floating-point sums (``vectorize=False`` runs the loop; the tests compare the two in float64).

Where it does not apply, the loop runs, decided before any client trains, and one reason says why: from the model
and the method, before the first round (`fedsim.engines.inprocess.cohort_refusal`: BatchNorm, whose running
statistics a forward updates in place; dropout other than ``nn.Dropout``'s elementwise masks; a random draw in the
forward outside ``nn.Dropout``, found by one forward, `fedsim.engines.inprocess.random_draws`; micro-batches; AMP
through ``vmap``), and from a cohort's client terms, before the cohort trains (`VectorizedClients.cohort_terms`:
terms without a common stacked form, a user's or MOON's with a model's own ``representation`` method, or a loss per
sample under AMP).
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.func import functional_call, grad, vmap

from ...algorithms.base import LocalTerms
from ...client.update import local_batches, local_step_count
from ...data import normalize
from ...results.progress import RoundStats
from ...support import cohorts_refused
from ...seeding import Stream, torch_generator
from ...client.training import as_index_tensor, autocast, training_batch
from .cohort_dropout import CohortDropout, dropout_layers
from .cohort_refusal import VMAP_UNDER_AMP
from .stacked_mlp import plain_layers, stacked_forward
from .stacked_optim import stacked_optimizer
from .stacked_scaler import StackedLossScaler

@dataclass
class CohortClient:
    """One client of a cohort: its weight in the round, step count, batches and random stream."""

    client: int
    weight: float
    steps: int
    generator: torch.Generator
    batches: Iterator[torch.Tensor]  # the client's `local_batches`
    noise: float
    dropout: torch.Generator | None = None  # draws its dropout masks, as the loop's global generator
    samples: int = 0
    loss_sum: float = 0.0


class VectorizedClients:
    """Train a round's clients in cohorts of ``chunk`` (see the module's text).

    Parameters
    ----------
    rounds : fedsim.rounds.fedavg.FedAvgRounds
        Whose model, data, task, config, algorithm and global state the clients use.
    chunk : int
        The most clients trained at once (``vectorize_chunk``): their stacked parameters, gradients
        and optimizer state take about three model copies each (the 2NN: 0.8 MB a copy in float32;
        the McMahan CNN: 6.7 MB).
    """

    def __init__(self, rounds, chunk: int):
        self.rounds, self.chunk = rounds, chunk
        model = rounds.model
        self.names = [name for name, _ in model.named_parameters()]
        self.trainable = [param.requires_grad for param in model.parameters()]
        self.buffers = dict(model.named_buffers())
        # plain inputs need no per-client draw: a step's batches are gathered and normalised at once
        self.plain_inputs = rounds.data.augmentation == "none" and not any(rounds.noise)
        self.dropout = CohortDropout(model, rounds.data) if dropout_layers(model) else None
        self.plain = plain_layers(model)  # a plain multilayer perceptron: batched products, no vmap
        self.peak_bytes = 0
        self._terms = None  # the cohort's stacked client terms, which the vmapped loss reads
        self.left_to_loop: str | None = None  # why a cohort was left to the loop, decided before it trained
        self._gradients = vmap(grad(self._client_loss, has_aux=True))

    def train(self, round_index: int, assignments: list[tuple[int, float]], weighted_sum: list[torch.Tensor],
              stats: RoundStats) -> list[tuple[int, float]]:
        """Train the (client, weight) pairs' clients; add their scaled trained models to ``weighted_sum``.

        Returns the pairs left to the loop: a lone client (a cohort of one gains nothing), and a cohort
        that `cohort_terms` leaves to it, decided before the cohort trains.
        """
        left = []
        for start in range(0, len(assignments), self.chunk):
            cohort = assignments[start : start + self.chunk]
            if len(cohort) == 1:
                left.extend(cohort)
                continue
            members = [self._member(client, weight, round_index) for client, weight in cohort]
            order = sorted(range(len(members)), key=lambda position: -members[position].steps)  # stable
            terms, reason = self.cohort_terms([members[position].client for position in order])
            if reason is None:
                self._train_cohort(members, order, terms, weighted_sum, stats)
            else:
                self.leave_to_loop(reason)
                left.extend(cohort)
        return left

    def leave_to_loop(self, reason: str) -> None:
        """Note that a cohort trains in the loop because of ``reason``; refuse it where ``vectorize`` asked for cohorts."""
        if self.rounds.config.vectorize:
            raise cohorts_refused(reason)
        self.left_to_loop = reason

    def cohort_terms(self, clients: list[int]) -> tuple[LocalTerms | None, str | None]:
        """Return the clients' terms in their stacked form (`fedsim.algorithms.LocalTerms.stacked`), and why the
        cohort cannot train stacked (``None`` where it can).

        The terms are ``None`` where no client has any. A cohort cannot train stacked where its clients'
        terms have no common stacked form, or where, under AMP, their loss per sample would take
        ``vmap`` (`VMAP_UNDER_AMP`).
        """
        algorithm, global_state = self.rounds.algorithm, self.rounds.global_state
        terms = [algorithm.local_terms(client, global_state) for client in clients]
        if all(term is None for term in terms):
            return None, None
        kind = type(next(term for term in terms if term is not None))
        stacked = kind.stacked(terms) if all(term is None or type(term) is kind for term in terms) else None
        if stacked is None:
            return None, (f"{algorithm.name}'s client terms have no stacked form for this cohort "
                          "(`LocalTerms.stacked`)")
        if self.rounds.training.amp and overrides(stacked, "client_sample_loss"):
            return None, VMAP_UNDER_AMP
        return stacked, None

    def _train_cohort(self, members: list[CohortClient], order: list[int], terms: LocalTerms | None,
                      weighted_sum: list[torch.Tensor], stats: RoundStats) -> None:
        """Train one cohort, its clients in ``order`` (by decreasing step count) with their stacked ``terms``; hand
        each client's trained model in, in the round's client order."""
        rounds = self.rounds
        cohort = [members[position] for position in order]
        self._terms = terms
        global_params = rounds.global_state[: len(self.names)]
        stacks = [start.expand(len(cohort), *start.shape).clone() for start in global_params]
        trainable = [stack for stack, wanted in zip(stacks, self.trainable) if wanted]
        optimizer = stacked_optimizer(rounds.training.optimizer, trainable)
        round_scale = rounds.loss_scale.scaler
        scaler = None if round_scale is None else StackedLossScaler(round_scale, len(cohort), stacks[0].device)
        step_counts = [-member.steps for member in cohort]  # ascending, for bisect
        with contextlib.nullcontext() if terms is None else terms.training(rounds.model):
            for step in range(cohort[0].steps):
                active = bisect.bisect_left(step_counts, -step)  # the clients with more than `step` steps
                views = [stack[:active] for stack in stacks]
                gradients, skipped = self._step(cohort[:active], views, terms, scaler)
                optimizer.step([view for view, wanted in zip(views, self.trainable) if wanted], gradients, skipped)
                if scaler is not None:
                    scaler.update(skipped)
                if terms is not None:
                    with torch.no_grad():
                        terms.after_step(views)
        self.peak_bytes = max(self.peak_bytes, sum(stack.numel() * stack.element_size() for stack in stacks) * 2
                              + optimizer.state_bytes())
        row_of = {position: row for row, position in enumerate(order)}
        for scale, growth_count in [] if scaler is None else scaler.final():
            rounds.loss_scale.keep(scale, growth_count)
        self._hand_in(members, [stacks_row(stacks, row_of[position]) for position in range(len(members))],
                      weighted_sum, stats)

    def _member(self, client: int, weight: float, round_index: int) -> CohortClient:
        rounds = self.rounds
        training = rounds.client_training(client, round_index)
        shard = as_index_tensor(rounds.partition.shard(client), rounds.data.train_images.shape[0])
        generator = torch_generator(rounds.config.seed, Stream.CLIENT_DATA, round_index, client)
        dropout = None if self.dropout is None else torch_generator(rounds.config.seed, Stream.CLIENT_DROPOUT,
                                                                    round_index, client)
        return CohortClient(client, weight, local_step_count(shard.numel(), training), generator,
                            local_batches(shard, training, generator), float(rounds.noise[client]), dropout)

    def _step(self, cohort: list[CohortClient], views: list[torch.Tensor], terms,
              scaler: StackedLossScaler | None) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """Return the active clients' gradients of one step (trainable parameters), counting their losses.

        And, under fp16 loss scaling, which clients skip the step (a non-finite gradient), else ``None``.
        """
        inputs, targets, counts = self._batches(cohort)
        longest = inputs.shape[1]
        valid = (torch.arange(longest, device=inputs.device) < counts[:, None]).to(inputs.dtype)
        scales = 1.0 / counts.to(inputs.dtype)
        if scaler is not None:  # the loop's scaled loss: a power of two times the batch mean, exact
            scales = scales * scaler.scales[: len(cohort)]
        if self.plain is not None and (terms is None or not overrides(terms, "client_sample_loss")):
            gradients, loss_sums = self._plain_gradients(views, inputs, targets, valid, scales)
        else:  # never under AMP: `vectorize_refusal` and `cohort_terms` leave such cohorts to the loop
            masks = [] if self.dropout is None else \
                self.dropout.masks([member.dropout for member in cohort], counts.tolist(), longest)
            gradients, loss_sums = self._vmapped_gradients(views, inputs, targets, valid, scales, masks, terms)
        skipped = None if scaler is None else scaler.unscale(gradients)
        if terms is not None:
            self._add_penalty_gradients(terms, views, gradients)
        for member, loss_sum in zip(cohort, loss_sums.to(torch.float64).tolist()):
            member.loss_sum += loss_sum
        return gradients, skipped

    def _vmapped_gradients(self, views, inputs, targets, valid, scales, masks, terms):
        """The loss gradients and raw loss sums of `_step` through ``vmap(grad)``."""
        trainable = {name: view for name, view, wanted in zip(self.names, views, self.trainable) if wanted}
        frozen = {name: view for name, view, wanted in zip(self.names, views, self.trainable) if not wanted}
        extras = [] if terms is None else terms.step_inputs(inputs)
        with contextlib.nullcontext() if self.dropout is None else self.dropout.applied():
            gradients, loss_sums = self._gradients(trainable, frozen, inputs, targets, valid, scales, masks, extras)
        return list(gradients.values()), loss_sums

    def _plain_gradients(self, views, inputs, targets, valid, scales):
        """The gradients and raw loss sums of `_step` for a plain multilayer perceptron (`stacked_mlp`)."""
        leaves = [view.detach().requires_grad_(wanted) for view, wanted in zip(views, self.trainable)]
        active, longest = inputs.shape[:2]
        with autocast(inputs.device, self.rounds.training.amp):
            outputs = stacked_forward(self.plain, dict(zip(self.names, leaves)), inputs)
            raw = self.rounds.task.loss(outputs.reshape(active * longest, *outputs.shape[2:]),
                                        targets.reshape(active * longest, *targets.shape[2:])).view(active, longest)
        raw_sums = (raw * valid).sum(1)
        total = (raw_sums * scales).sum()  # each client's batch-mean loss; its row's gradient is its own
        gradients = torch.autograd.grad(total, [leaf for leaf, wanted in zip(leaves, self.trainable) if wanted])
        return list(gradients), raw_sums.detach()

    def _client_loss(self, trainable, frozen, inputs, targets, valid, scale, masks, extras):
        """One client's batch-mean loss (the loop's ``sum * (1 / count)``, plus its terms' loss per sample) and its
        raw sum; vmapped over clients."""
        if masks:
            self.dropout.feed(masks)
        outputs = functional_call(self.rounds.model, ({**trainable, **frozen}, self.buffers), (inputs,))
        raw_sum = (self.rounds.task.loss(outputs, targets) * valid).sum()
        loss = raw_sum * scale
        extra = None if self._terms is None else self._terms.client_sample_loss(inputs, outputs, extras)
        if extra is not None:
            loss = loss + (extra * valid).sum() * scale
        return loss, raw_sum.detach()

    def _add_penalty_gradients(self, terms, views: list[torch.Tensor], gradients: list[torch.Tensor]) -> None:
        """Add the stacked terms' penalty gradient (each client's row its own, `LocalTerms.penalty_gradient`) to
        ``gradients``, those of the trainable parameters, as the loop adds it to ``.grad``."""
        extra = terms.penalty_gradient(views)
        if extra is None:
            return
        trainable = [gradient for gradient, wanted in zip(extra, self.trainable) if wanted]
        pairs = [(mine, added) for mine, added in zip(gradients, trainable) if added is not None]
        if pairs:
            torch._foreach_add_([mine for mine, _ in pairs], [added for _, added in pairs])

    def _batches(self, cohort: list[CohortClient]):
        """Return the step's inputs and targets (clients x longest batch) and each client's sample count.

        Each client draws its batch, augmentation and noise from its own generator in the loop's
        order; a shorter batch is padded with copies of its first sample, of weight zero.
        """
        param = next(self.rounds.model.parameters())
        indices = [next(member.batches) for member in cohort]
        counts = [index.numel() for index in indices]
        longest = max(counts)
        for member, count in zip(cohort, counts):
            member.samples += count
        if self.plain_inputs:
            padded = torch.stack([pad(index, longest) for index in indices])
            data = self.rounds.data
            flat = padded.reshape(-1)
            inputs = normalize(data.train_images[flat.to(data.train_images.device)], data, dtype=param.dtype)
            inputs = inputs.to(param.device).reshape(len(cohort), longest, *inputs.shape[1:])
            targets = data.train_labels[flat.to(data.train_labels.device)].to(param.device)
            targets = targets.reshape(len(cohort), longest, *targets.shape[1:])
        else:
            drawn = [training_batch(self.rounds.data, index, member.generator, member.noise, param.device,
                                    param.dtype) for member, index in zip(cohort, indices)]
            inputs = torch.stack([pad(batch_inputs, longest) for batch_inputs, _ in drawn])
            targets = torch.stack([pad(batch_targets, longest) for _, batch_targets in drawn])
        return inputs, targets, torch.tensor(counts, device=param.device)

    def _hand_in(self, members: list[CohortClient], rows: list[list[torch.Tensor]], weighted_sum: list[torch.Tensor],
                 stats: RoundStats) -> None:
        """Add each client's trained model to the round in the loop's client order, with its counts and hooks."""
        rounds = self.rounds
        buffers = rounds.global_state[len(self.names):]  # no BatchNorm: the floating buffers stay the global ones
        for member, row in zip(members, rows):
            rounds.hand_in(weighted_sum, stats, member.client, member.weight, [*row, *buffers], steps=member.steps,
                           samples=member.samples, loss_sum=member.loss_sum)


def overrides(terms: LocalTerms, method: str) -> bool:
    """Whether ``terms``' class overrides `LocalTerms`' ``method`` (a penalty, a loss per sample)."""
    return getattr(type(terms), method) is not getattr(LocalTerms, method)


def stacks_row(stacks: list[torch.Tensor], row: int) -> list[torch.Tensor]:
    """Return one client's tensors: row ``row`` of every stack (views)."""
    return [stack[row] for stack in stacks]


def pad(tensor: torch.Tensor, length: int) -> torch.Tensor:
    """Return ``tensor`` extended along its first dimension to ``length`` with copies of its first entry."""
    missing = length - tensor.shape[0]
    if missing == 0:
        return tensor
    return torch.cat([tensor, tensor[:1].expand(missing, *tensor.shape[1:])])
