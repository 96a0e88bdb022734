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

from .aggregate import aggregation_weights

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
        This rank's weight at the current step (0 while it has joined).
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
            raise RuntimeError("`weights`='dynamic': no rank called RankWeights.contribute(score) before backward")
        scores = exchange[self.world_size :][members].tolist()
        weights = aggregation_weights("dynamic", self.sizes, members, num_ranks=self.world_size, scores=scores,
                                      temperature=self.temperature)
        self.weight = float(weights[members.index(self.rank)]) if self.rank in members else 0.0

    def end_step(self) -> None:
        """Forget the step's score: a rank that does not contribute again counts as joined."""
        self._score = None


def weighted_allreduce_hook(state: RankWeights, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """All-reduce ``weight_r * g_r`` over the ranks: the parameters receive ``sum_r w_r g_r``.

    Register with ``model.register_comm_hook(RankWeights(...), weighted_allreduce_hook)``.
    """
    if bucket.index() == 0:
        state.begin_step(bucket.buffer().device)
    tensor = bucket.buffer().mul_(state.weight)
    if bucket.is_last():
        state.end_step()
    work = dist.all_reduce(tensor, group=state.process_group, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])
