"""Weighted means of updates and the rules that weight ranks or clients. Pure functions, no state."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .checks import SettingError


@torch.no_grad()
def weighted_sum(updates: Sequence[Sequence[torch.Tensor]], weights: Sequence[float]) -> list[torch.Tensor]:
    """Return ``sum_k weights[k] * updates[k]``, tensor by tensor.

    With weights that sum to one this is the weighted mean FedAvg takes of its clients' deltas.

    Examples
    --------
    >>> a, b = [torch.tensor([1.0, 2.0])], [torch.tensor([3.0, 6.0])]
    >>> weighted_sum([a, b], [0.25, 0.75])
    [tensor([2.5000, 5.0000])]
    """
    if len(updates) != len(weights) or not updates:
        raise SettingError("`updates` ({updates:text}) and {weights:name} ({count:text}) must be equally long and "
                           "non-empty", updates=len(updates), count=len(weights))
    total = [torch.zeros_like(tensor, dtype=torch.float32 if not tensor.is_floating_point() else tensor.dtype)
             for tensor in updates[0]]
    for update, weight in zip(updates, weights):
        accumulate(total, update, weight)
    return total


@torch.no_grad()
def accumulate(total: list[torch.Tensor], update: Sequence[torch.Tensor], weight: float) -> None:
    """Add ``weight * update`` to ``total`` in place (one fused ``_foreach`` call).

    Outside autograd: ``update`` may be a model's live parameters, and a sum over clients must
    not grow a graph through them.
    """
    torch._foreach_add_(total, list(update), alpha=float(weight))


def size_weights(sizes) -> np.ndarray:
    """Return ``n_k / sum(n)``: FedAvg's weights (McMahan et al. 2017)."""
    sizes = np.asarray(sizes, dtype=float)
    if sizes.sum() <= 0:
        raise ValueError("`sizes` must have a positive total")
    return sizes / sizes.sum()


def class_balance_weights(counts, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Return per-rank, per-class loss weights ``p_global(y) / p_k(y) * K / h(y)`` (zero where rank k has no y).

    ``p_global(y) / p_k(y)`` is the importance weight from rank ``k``'s label distribution to
    the global one. Alone, it makes a rank's gradient an unbiased estimate of the global
    gradient only when the rank holds every class; under #C=k skew a rank covers a fraction of
    the classes and the sum over ranks shrinks by that fraction. The coverage factor
    ``K / h(y)``, with ``h(y)`` the number of ranks holding class ``y``, makes the equal-weight
    sum over ranks an unbiased estimate of the global gradient for any partition:
    ``sum_k 1/K * p_k(y) * w_k(y) = p_global(y)``. When every rank holds every class it is 1.

    Parameters
    ----------
    counts : array_like
        (ranks x classes) label counts of the ranks' shards.
    dtype : torch.dtype, default torch.float32
        The run's dtype (the weights are computed in float64 either way).

    Examples
    --------
    >>> class_balance_weights([[3, 1], [1, 3]])
    tensor([[0.6667, 2.0000],
            [2.0000, 0.6667]])
    >>> class_balance_weights([[6, 2, 0], [0, 2, 2]])  # class 1 is held twice, 0 and 2 once
    tensor([[1.3333, 1.3333, 0.0000],
            [0.0000, 0.6667, 0.6667]])
    """
    counts = torch.as_tensor(np.asarray(counts), dtype=torch.float64)
    global_share = counts.sum(dim=0) / counts.sum()
    local_share = counts / counts.sum(dim=1, keepdim=True).clamp(min=1)
    holders = (counts > 0).sum(dim=0).clamp(min=1)
    coverage = counts.shape[0] / holders
    weights = torch.where(local_share > 0, global_share * coverage / local_share.clamp(min=1e-300), torch.zeros(()))
    return weights.to(dtype)


def loss_class_weights(rule: str, partition, labels, task, dtype: torch.dtype) -> torch.Tensor | None:
    """Return the ranks' per-class loss weights under ``rule`` (`class_balance_weights`), or ``None``.

    Only ``class-balanced`` weighs samples; it needs single-label data.
    """
    if rule != "class-balanced":
        return None
    if task.multilabel:
        raise SettingError("{weights} needs single-label data; use 'size' or 'dynamic'", weights=rule)
    return class_balance_weights(partition.counts(np.asarray(labels), task.num_classes), dtype=dtype)


def aggregation_weights(rule: str, sizes, members, *, num_ranks: int | None = None, scores=None,
                        temperature: float = 1.0) -> np.ndarray:
    """Return the weight of each member (the ranks active at a step, or a round's sampled clients).

    The one place every engine takes its weights from.

    Parameters
    ----------
    rule : {"equal", "size", "class-balanced", "dynamic"}
        ``equal`` and ``class-balanced`` weigh members alike (class-balanced weighs samples by
        `class_balance_weights` instead); ``size`` by shard size ``n_k``; ``dynamic`` by
        ``softmax(scores / temperature)``.
    sizes : array_like
        Shard size of every rank or client, members or not.
    members : array_like of int
        Who takes part.
    num_ranks : int, optional
        The gradient strategies' world size K. Given, a member's weight is its share of the
        whole group (1/K, n_k / n, or its softmax share times |members|/K), so that under
        ``Join`` a rank that sits out takes its share with it and the sum is still divided by K,
        as DDP divides by the initial world size. Omitted (FedAvg), the weights are normalised
        over the members and sum to one.
    scores : array_like, optional
        Per-member scores for ``dynamic`` (mean loss, or gradient cosine to the mean).
    temperature : float, default 1
        Softmax temperature of ``dynamic``.

    Examples
    --------
    >>> aggregation_weights("size", [10, 30, 60], [1, 2]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    >>> aggregation_weights("size", [10, 30, 60], [1, 2], num_ranks=3).tolist()  # rank 0 has joined
    [0.3, 0.6]
    >>> aggregation_weights("dynamic", [5, 5], [0], num_ranks=2, scores=[1.0]).tolist()
    [0.5]
    """
    sizes = np.asarray(sizes, dtype=float)
    members = np.asarray(members, dtype=int)
    group = len(members) if num_ranks is None else num_ranks
    if rule in ("equal", "class-balanced"):
        return np.full(len(members), 1.0 / group)
    if rule == "size":
        return size_weights(sizes)[members] if num_ranks is not None else size_weights(sizes[members])
    if rule == "dynamic":
        if scores is None or len(scores) != len(members):
            raise SettingError("{weights} needs one score per member", weights=rule)
        return softmax_weights(scores, temperature) * len(members) / group
    raise ValueError(f"unknown `rule`={rule!r}; known: equal, size, class-balanced, dynamic")


def softmax_weights(scores, temperature: float) -> np.ndarray:
    """Return ``softmax(scores / temperature)``: the dynamic rule's weights.

    Examples
    --------
    >>> softmax_weights([0.0, 0.0], 1.0).tolist()
    [0.5, 0.5]
    """
    scores = np.asarray(scores, dtype=float) / temperature
    scores = np.exp(scores - scores.max())  # shift for overflow safety; softmax is shift-invariant
    return scores / scores.sum()


def cosine_to_mean(gradients: Sequence[Sequence[torch.Tensor]]) -> np.ndarray:
    """Return the cosine similarity of each rank's flattened gradient to the mean gradient."""
    flat = torch.stack([torch.cat([g.reshape(-1).double() for g in gradient]) for gradient in gradients])
    return torch.nn.functional.cosine_similarity(flat, flat.mean(dim=0, keepdim=True), dim=1).cpu().numpy()
