"""McMahan et al. (2017) shards: sort by label, cut into equal shards, deal them at random."""

from __future__ import annotations

import numpy as np

from ._checks import check_labels, check_num_partitions, check_integer, check_seed
from ._errors import SettingError
from ._layout import class_blocks, split_by_owner
from .partition import Partition


def shards(
    labels,
    num_partitions: int,
    shards_per_partition: int = 2,
    *,
    shard_size: int | None = None,
    seed: int | None = None,
) -> Partition:
    """Sort the samples by label, cut ``num_partitions * shards_per_partition`` shards and deal them at random.

    McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized
    Data" (AISTATS 2017): MNIST's 60,000 training images sorted by digit, cut into 200 shards
    of 300, two shards per client for 100 clients; ``shards(mnist_labels, 100)`` gives exactly
    that layout. Within a class the order is shuffled by the seed (the paper leaves it open).
    Samples past ``num_shards * shard_size`` (the remainder of an uneven cut) are left out and
    reported in `Partition.unassigned`.

    Parameters
    ----------
    labels : array_like of int
        One class id per sample.
    num_partitions : int
        Number of partitions (clients).
    shards_per_partition : int, default 2
        Shards dealt to each partition.
    shard_size : int, optional
        Samples per shard; by default ``len(labels) // (num_partitions * shards_per_partition)``.
    seed : int, optional
        Seed for ``np.random.default_rng``.

    Returns
    -------
    Partition

    Examples
    --------
    >>> labels = np.repeat(np.arange(10), 60)
    >>> shards(labels, 10, seed=0).sizes.tolist()
    [60, 60, 60, 60, 60, 60, 60, 60, 60, 60]
    """
    labels = check_labels(labels)
    num_partitions = check_num_partitions(num_partitions, labels.size)
    per_partition = check_integer("shards_per_partition", shards_per_partition)
    num_shards = num_partitions * per_partition
    largest = labels.size // num_shards
    if shard_size is None:
        if largest == 0:
            raise SettingError(
                "{num_partitions} x {shards_per_partition} = {num_shards:text} shards exceed the {samples:text} "
                "samples; use fewer partitions or shards",
                num_partitions=num_partitions, shards_per_partition=per_partition, num_shards=num_shards,
                samples=labels.size,
            )
        shard_size = largest
    shard_size = check_integer("shard_size", shard_size)
    if shard_size > largest:
        raise ValueError(
            f"`shard_size`={shard_size} is too large: {num_shards} shards need {shard_size * num_shards} samples "
            f"but there are {labels.size}; use `shard_size` <= {largest}"
        )
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    order, _ = class_blocks(labels, int(labels.max()) + 1, rng)
    owner_of_shard = np.empty(num_shards, dtype=np.int64)
    owner_of_shard[rng.permutation(num_shards)] = np.repeat(np.arange(num_partitions), per_partition)
    owner = np.full(labels.size, -1, dtype=np.int64)
    owner[order[: num_shards * shard_size]] = np.repeat(owner_of_shard, shard_size)
    params = {"num_partitions": num_partitions, "shards_per_partition": per_partition, "shard_size": shard_size}
    return Partition(split_by_owner(owner, num_partitions), labels.size, "shards", params, seed)
