"""DDP communication hooks that weight each rank's gradient before the sum: re-weighted aggregation.

Drop them into any DDP script::

    weights = RankWeights("size", partition.sizes)
    model.register_comm_hook(weights, weighted_allreduce_hook)

With a hook registered, DDP hands the hook each bucket of this rank's raw gradient and does no
division itself: the hook multiplies by the rank's weight and all-reduces the sum, so the
parameters receive ``sum_r w_r g_r``. The weights are the ranks' shares of the whole group, as
`fedsim.aggregate.aggregation_weights` gives them to the in-process engine: under
``torch.distributed.algorithms.join.Join`` a rank that has run out contributes a zero-filled
bucket and its share goes with it, as DDP's default divides by the initial world size.

The ``dynamic`` rule weighs ranks by ``softmax(score / temperature)`` of their batch losses:
call ``weights.contribute(score)`` between the forward and the backward, and the hook spends
one small all-reduce per step to learn every rank's score. A rank that has joined does not
call it, and the exchange leaves it out.
"""

# No ``from __future__ import annotations``: DDP checks that the hook's annotations are the real
# ``dist.GradBucket`` and ``torch.futures.Future[torch.Tensor]``, not strings.
import torch
import torch.distributed as dist

from ..aggregate import aggregation_weights
from ..checks import SettingError, check_choice
from .compression import (
    POWERSGD_MIN_COMPRESSION_RATE,
    POWERSGD_START_STEP,
    dequantize_mean,
    int8_scale,
    quantize_int8,
)

#: The rules `RankWeights` takes (``class-balanced`` weighs samples in the loss and ranks alike).
RULES = ("equal", "size", "class-balanced", "dynamic")


class RankWeights:
    """The state of `weighted_allreduce_hook`: the weight rule and what it needs.

    Parameters
    ----------
    rule : {"equal", "size", "class-balanced", "dynamic"}
    sizes : array_like
        Every rank's shard size (``size`` weighs rank r by ``sizes[r] / sum(sizes)``).
    temperature : float, default 1
        The ``dynamic`` softmax temperature.
    process_group : ProcessGroup, optional
        The group the gradients are reduced over (the default group when omitted).

    Attributes
    ----------
    weight : float
        This rank's weight at the current step. Under ``dynamic`` it is 0 for a rank that has
        joined; the static rules keep its share (its zero-filled gradient adds nothing).
    """

    def __init__(self, rule: str, sizes, *, temperature: float = 1.0, process_group=None):
        if rule not in RULES:
            raise ValueError(f"unknown `rule`={rule!r}; known: {', '.join(RULES)}")
        self.rule, self.sizes, self.temperature = rule, list(sizes), temperature
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)
        if len(self.sizes) != self.world_size:
            raise ValueError(f"`sizes` has {len(self.sizes)} entries for a world of {self.world_size} ranks")
        self.weight = 0.0
        self._score: float | None = None

    def contribute(self, score: float) -> None:
        """Give this rank's score (its batch's mean loss) for the next backward; ``dynamic`` needs it every step."""
        self._score = float(score)

    def begin_step(self, device: torch.device) -> None:
        """Find this rank's weight for the step whose first bucket is being reduced."""
        if self.rule != "dynamic":
            self.weight = float(aggregation_weights(self.rule, self.sizes, [self.rank], num_ranks=self.world_size)[0])
            return
        # every rank, joined or not, takes part: [1 if it contributes, else 0] * K + [its score] * K
        exchange = torch.zeros(2 * self.world_size, dtype=torch.float64, device=device)
        if self._score is not None:
            exchange[self.rank] = 1.0
            exchange[self.world_size + self.rank] = self._score
        dist.all_reduce(exchange, group=self.process_group)
        members = exchange[: self.world_size].nonzero().flatten().tolist()
        if not members:
            raise SettingError("{weights}: no rank called RankWeights.contribute(score) before backward",
                               weights=self.rule)
        scores = exchange[self.world_size :][members].tolist()
        weights = aggregation_weights("dynamic", self.sizes, members, num_ranks=self.world_size, scores=scores,
                                      temperature=self.temperature)
        self.weight = float(weights[members.index(self.rank)]) if self.rank in members else 0.0

    def end_step(self) -> None:
        """Forget the step's score: a rank that does not contribute again counts as joined."""
        self._score = None


    def weight_for(self, bucket: dist.GradBucket) -> float:
        """Return this rank's weight for ``bucket``, finding it at the step's first bucket."""
        if bucket.index() == 0:
            self.begin_step(bucket.buffer().device)
        weight = self.weight
        if bucket.is_last():
            self.end_step()
        return weight


def weighted_allreduce_hook(state: RankWeights, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """All-reduce ``weight_r * g_r`` over the ranks: the parameters receive ``sum_r w_r g_r``.

    Register with ``model.register_comm_hook(RankWeights(...), weighted_allreduce_hook)``.
    """
    tensor = bucket.buffer().mul_(state.weight_for(bucket))
    work = dist.all_reduce(tensor, group=state.process_group, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])


def weighted(hook, hook_state):
    """Return a hook that weighs this rank's gradient, then hands it to an averaging ``hook``.

    The gradient is scaled by ``w_r * K``, so that a hook that averages over the K ranks (PyTorch's
    ``fp16_compress_hook``, ``powerSGD_hook``, or `int8_compress_hook`) delivers ``sum_r w_r g_r``.

    Parameters
    ----------
    hook : callable
        An averaging DDP communication hook, ``hook(hook_state, bucket) -> Future``.
    hook_state : object
        The state ``hook`` takes (a process group, or ``None`` for the default one; a ``PowerSGDState``).

    Returns
    -------
    callable
        A hook to register with the weights as its state:
        ``model.register_comm_hook(RankWeights(...), weighted(hook, hook_state))``.
    """

    def weighted_hook(state: RankWeights, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        bucket.buffer().mul_(state.weight_for(bucket) * state.world_size)
        return hook(hook_state, bucket)

    return weighted_hook


def int8_compress_hook(process_group, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average the ranks' gradients sent as 8-bit integers: each rank sends a quarter of float32's bytes.

    Each gradient tensor is quantized with one scale that all ranks share, its largest
    magnitude over the ranks / 127 (one small all-reduce per bucket), and the int8 tensors are
    all-gathered, since their sum would overflow 8 bits: each rank receives the K - 1 others'
    tensors, more than a ring all-reduce of float32 moves once K > 8. The shared scale lets the
    ranks add the integers exactly; the rounding error is at most half a step per element.
    (`fedsim.comm.compression.simulate` is the same arithmetic for the in-process engine.)
    """
    group = process_group if process_group is not None else dist.group.WORLD
    world_size = dist.get_world_size(group)
    tensors = bucket.gradients()
    largest = torch.stack([t.abs().max() for t in tensors])
    dist.all_reduce(largest, op=dist.ReduceOp.MAX, group=group)
    scales = int8_scale(largest)
    quantized = torch.cat([quantize_int8(t, scale).flatten() for t, scale in zip(tensors, scales)])
    gathered = [torch.empty_like(quantized) for _ in range(world_size)]
    work = dist.all_gather(gathered, quantized, group=group, async_op=True)

    def decompress(_):
        total = gathered[0].to(torch.int32)
        for part in gathered[1:]:
            total += part
        offset = 0
        for tensor, scale in zip(tensors, scales):
            part = total[offset : offset + tensor.numel()].view_as(tensor)
            tensor.copy_(dequantize_mean(part, scale, world_size, tensor.dtype))
            offset += tensor.numel()
        return bucket.buffer()

    return work.get_future().then(decompress)


def averaging_hook(compression: str, *, powersgd_rank: int = 2, seed: int = 0):
    """Return ``(hook, state)``: the averaging hook of a `fedsim.comm.compression` scheme, or ``None`` for ``"none"``.

    PyTorch's own hooks where it has them: ``fp16_compress_hook``, ``bf16_compress_hook`` and
    ``powerSGD_hook``; `int8_compress_hook` otherwise. Register one with
    ``model.register_comm_hook(state, hook)``, or weigh the ranks first with `weighted`.
    """
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if compression == "none":
        return None
    if compression == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=powersgd_rank, start_powerSGD_iter=POWERSGD_START_STEP,
            min_compression_rate=POWERSGD_MIN_COMPRESSION_RATE, random_seed=seed)
        hook = powerSGD_hook.powerSGD_hook
        return (one_bucket_at_a_time(hook) if dist.get_backend() == "gloo" else hook), state
    hooks = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook,
             "int8": int8_compress_hook}
    check_choice("compression", compression, ("none", *hooks, "powersgd"))
    return hooks[compression], None


def one_bucket_at_a_time(hook):
    """Return ``hook`` made to finish each bucket before DDP hands it the next.

    gloo runs collectives in the order a rank issues them. PowerSGD issues its second and third
    all-reduce from callbacks, and with several buckets in flight the callbacks of two buckets
    can run in another order on each rank: the ranks then pair mismatched collectives and abort.
    Waiting for each bucket keeps the order; it gives up overlapping buckets with each other.
    """

    def serial_hook(state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        future = hook(state, bucket)
        future.wait()
        return future

    return serial_hook
