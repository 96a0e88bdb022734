"""Build a `Partition` from the flags the CLI and the configs share."""

from __future__ import annotations

import numpy as np

import partitions

SCHEMES = ("iid", "dirichlet", "pathological", "shards", "quantity")

#: fedsim's #C=k is NIID-Bench's: partition i holds class i mod C, then k - 1 others at random, so
#: every class is held once there are as many partitions as classes. `partitions.pathological`
#: keeps flwr-datasets' default, "random", which with 10 partitions, 10 classes and k = 2 leaves
#: a class held by no one in three draws out of four.
CLASS_ASSIGNMENT_MODE = "first-deterministic"


def make_partition(
    labels,
    scheme: str,
    *,
    num_partitions: int,
    alpha: float = 0.5,
    classes_per_partition: int = 2,
    class_assignment_mode: str = CLASS_ASSIGNMENT_MODE,
    min_partition_size: int = 10,
    self_balancing: bool = False,
    max_tries: int = 10,
    shards_per_partition: int = 2,
    seed: int = 0,
) -> partitions.Partition:
    """Return the partition of ``labels`` named by ``scheme`` and its parameters.

    A multi-hot label matrix (samples x classes) goes through `partitions.multilabel_dirichlet`
    for ``"dirichlet"``; the label-based pathological and shard schemes need single labels.

    Parameters
    ----------
    labels : array_like
        Class ids, or a multi-hot (samples x classes) matrix.
    scheme : {"iid", "dirichlet", "pathological", "shards", "quantity"}
    num_partitions : int
    alpha : float, default 0.5
        Dirichlet concentration of ``"dirichlet"`` (labels) and ``"quantity"`` (sizes).
    classes_per_partition : int, default 2
        k of ``"pathological"`` #C=k.
    class_assignment_mode : str, default "first-deterministic"
        How ``"pathological"`` picks each partition's classes (see `partitions.pathological`).
        The default is NIID-Bench's #C=k, which holds every class once there are as many
        partitions as classes, unlike `partitions.pathological`'s own default, ``"random"``.
    min_partition_size, max_tries : int, default 10
        Smallest partition ``"dirichlet"`` and ``"quantity"`` accept, and how many draws they make.
    self_balancing : bool, default False
        NIID-Bench's balance step of single-label ``"dirichlet"``.
    shards_per_partition : int, default 2
        Shards dealt to each partition by ``"shards"``.
    seed : int, default 0

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
            labels, num_partitions, alpha, min_partition_size=min_partition_size, max_tries=max_tries, seed=seed
        )
    if scheme == "dirichlet" and multilabel:
        if self_balancing:
            raise ValueError("`self_balancing` applies to single-label data; leave it off for multi-label data")
        return partitions.multilabel_dirichlet(
            labels, num_partitions, alpha, min_partition_size=min_partition_size, max_tries=max_tries, seed=seed
        )
    if scheme == "dirichlet":
        return partitions.dirichlet(labels, num_partitions, alpha, min_partition_size=min_partition_size,
                                    self_balancing=self_balancing, max_tries=max_tries, seed=seed)
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
        self_balancing=config.self_balancing,
        max_tries=config.max_tries,
        shards_per_partition=config.shards_per_partition,
        seed=config.seed,
    )
