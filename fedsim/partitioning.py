"""Build a `Partition` from the flags the CLI and the configs share."""

from __future__ import annotations

import numpy as np

import partitions

SCHEMES = ("iid", "dirichlet", "pathological", "shards", "quantity")


def make_partition(
    labels,
    scheme: str,
    *,
    num_partitions: int,
    alpha: float = 0.5,
    classes_per_partition: int = 2,
    class_assignment_mode: str = "random",
    min_partition_size: int = 10,
    shards_per_partition: int = 2,
    seed: int = 0,
) -> partitions.Partition:
    """Return the partition of ``labels`` named by ``scheme`` and its parameters.

    A multi-hot label matrix (samples x classes) goes through `partitions.multilabel_dirichlet`
    for ``"dirichlet"``; the label-based pathological and shard schemes need single labels.

    Examples
    --------
    >>> make_partition(np.repeat(np.arange(4), 25), "pathological", num_partitions=4, classes_per_partition=1,
    ...                class_assignment_mode="deterministic").sizes.tolist()
    [25, 25, 25, 25]
    """
    labels = np.asarray(labels)
    multilabel = labels.ndim == 2
    if scheme == "iid":
        return partitions.iid(labels, num_partitions, seed=seed)
    if scheme == "quantity":
        return partitions.quantity_skew(
            labels, num_partitions, alpha, min_partition_size=min_partition_size, seed=seed
        )
    if scheme == "dirichlet":
        partitioner = partitions.multilabel_dirichlet if multilabel else partitions.dirichlet
        return partitioner(labels, num_partitions, alpha, min_partition_size=min_partition_size, seed=seed)
    if scheme in ("pathological", "shards") and multilabel:
        raise ValueError(f"`scheme`={scheme!r} needs single-label data; use 'dirichlet' or 'iid' for multi-label")
    if scheme == "pathological":
        return partitions.pathological(
            labels, num_partitions, classes_per_partition, class_assignment_mode=class_assignment_mode, seed=seed
        )
    if scheme == "shards":
        return partitions.shards(labels, num_partitions, shards_per_partition, seed=seed)
    raise ValueError(f"unknown `scheme`={scheme!r}; known: {', '.join(SCHEMES)}")


def partition_for(config, labels) -> partitions.Partition:
    """Return the partition a `fedsim.config.RunConfig` (or any object with its partition fields) describes."""
    return make_partition(
        labels,
        config.partition,
        num_partitions=config.num_partitions,
        alpha=config.alpha,
        classes_per_partition=config.classes_per_partition,
        class_assignment_mode=config.class_assignment_mode,
        min_partition_size=config.min_partition_size,
        shards_per_partition=config.shards_per_partition,
        seed=config.seed,
    )
