"""fedsim's partition schemes as flwr-datasets partitioners, and any flwr-datasets partitioner as a `Partition`.

Each class here is a ``flwr_datasets.partitioner.Partitioner`` (flwr-datasets 0.6, an optional
extra: ``pip install -e '.[flwr-datasets]'``): give it to a ``FederatedDataset`` as
``partitioners={"train": DirichletPartitioner(...)}``, or assign a ``datasets.Dataset`` to its
``dataset`` and call ``load_partition``. Its indices are the `partitions` function's for the
same labels and seed, computed once, on first use, as flwr-datasets' own partitioners do, from
the label column ``partition_by``:

===================================  ===============================================================
class                                scheme
===================================  ===============================================================
`IidPartitioner`                     `partitions.iid`
`DirichletPartitioner`               `partitions.dirichlet`: bounded retries, self-balancing
`ExtendedDirichletPartitioner`       `partitions.extended_dirichlet`: #C=k with Dir(alpha) among them
`BalancedDirichletPartitioner`       `partitions.balanced_dirichlet`: Dir(alpha), equal sizes
`PathologicalPartitioner`            `partitions.pathological`: #C=k, its three class assignments
`ShardPartitioner`                   `partitions.shards`: McMahan's shards
`QuantitySkewPartitioner`            `partitions.quantity_skew`
`NaturalIdPartitioner`               `partitions.natural`: a partition per id of ``partition_by``
`MultiLabelDirichletPartitioner`     `partitions.multilabel_dirichlet`: ``partition_by`` multi-hot
===================================  ===============================================================

The names are flwr-datasets' where it has the scheme; import the module
(``from partitions import flwr as fedsim_partitioners``) to keep both apart. `as_partition`
turns any partitioner, these or flwr-datasets' own, into a `Partition` and its labels, which
`partitions.metrics` and `partitions.plot` take.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_integer
from ._errors import SettingError
from .balanced_dirichlet import balanced_dirichlet
from .dirichlet import dirichlet
from .extended_dirichlet import extended_dirichlet
from .iid import iid
from .multilabel import multilabel_dirichlet
from .natural import natural
from .partition import Partition
from .pathological import pathological
from .quantity import quantity_skew
from .shards import shards

try:
    from flwr_datasets.partitioner import Partitioner
except ModuleNotFoundError:  # the extra is missing: say how to install it, once, where it is imported
    raise ModuleNotFoundError("partitions.flwr makes flwr-datasets partitioners, and flwr-datasets is not "
                              "installed: pip install 'fedsim[flwr-datasets]'") from None

__all__ = ["BalancedDirichletPartitioner", "DirichletPartitioner", "ExtendedDirichletPartitioner",
           "IidPartitioner", "MultiLabelDirichletPartitioner", "NaturalIdPartitioner", "PathologicalPartitioner",
           "QuantitySkewPartitioner", "SchemePartitioner", "ShardPartitioner", "as_partition"]


class SchemePartitioner(Partitioner):
    """A flwr-datasets partitioner whose indices one of fedsim's `partitions` functions makes (module text).

    Parameters
    ----------
    num_partitions : int
        K, as the scheme's function takes it.
    partition_by : str, default "label"
        The column the scheme reads: class ids (multi-hot rows for the multi-label scheme, ids
        for the natural one).
    seed : int, optional
        The scheme's seed: the same seed and labels give the `partitions` function's indices.
    **settings
        The scheme's own keyword arguments.

    Attributes
    ----------
    scheme : callable
        The `partitions` function (a class attribute that each subclass sets).
    """

    def __init__(self, num_partitions: int, *, partition_by: str = "label", seed: int | None = None, **settings):
        super().__init__()
        self._num_partitions = check_integer("num_partitions", num_partitions)
        if not isinstance(partition_by, str):
            raise SettingError("{partition_by:name} must be the name of a column, got {got:text}",
                               partition_by=partition_by, got=repr(partition_by))
        self.partition_by, self.seed, self.settings = partition_by, seed, settings
        self._partition: Partition | None = None

    @property
    def num_partitions(self) -> int:
        """K, the number of partitions."""
        return self._num_partitions

    @property
    def partition(self) -> Partition:
        """The `Partition` of the assigned dataset, made on first use from its ``partition_by`` column."""
        if self._partition is None:
            self._partition = self.split(column(self.dataset, self.partition_by))
        return self._partition

    def split(self, labels: np.ndarray) -> Partition:
        """Return the scheme's partition of ``labels`` (its function's, with this partitioner's settings)."""
        return type(self).scheme(labels, self._num_partitions, seed=self.seed, **self.settings)

    def load_partition(self, partition_id: int):
        """Return partition ``partition_id`` of the assigned dataset: its rows in the dataset's order."""
        check_integer("partition_id", partition_id, minimum=0)
        if partition_id >= self.num_partitions:
            raise SettingError("{partition_id} is not a partition: there are {count:text}, 0 to {last:text}",
                               partition_id=partition_id, count=str(self.num_partitions),
                               last=str(self.num_partitions - 1))
        return self.dataset.select(self.partition.shard(partition_id).tolist())


class IidPartitioner(SchemePartitioner):
    """`partitions.iid`: a seeded permutation cut into K nearly equal parts."""

    scheme = staticmethod(iid)

    def __init__(self, num_partitions: int, *, partition_by: str = "label", seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed)


class DirichletPartitioner(SchemePartitioner):
    """`partitions.dirichlet`: each class split by Dir(alpha), at most ``max_tries`` draws for ``min_partition_size``."""

    scheme = staticmethod(dirichlet)

    def __init__(self, num_partitions: int, alpha, *, partition_by: str = "label", min_partition_size: int = 10,
                 self_balancing: bool = False, max_tries: int = 10, seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed, alpha=alpha,
                         min_partition_size=min_partition_size, self_balancing=self_balancing, max_tries=max_tries)


class ExtendedDirichletPartitioner(SchemePartitioner):
    """`partitions.extended_dirichlet`: k classes a partition, each class split among its holders by Dir(alpha)."""

    scheme = staticmethod(extended_dirichlet)

    def __init__(self, num_partitions: int, num_classes_per_partition: int, alpha, *, partition_by: str = "label",
                 class_assignment_mode: str = "first-deterministic", min_partition_size: int = 10,
                 max_tries: int = 10, seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed,
                         num_classes_per_partition=num_classes_per_partition, alpha=alpha,
                         class_assignment_mode=class_assignment_mode, min_partition_size=min_partition_size,
                         max_tries=max_tries)


class BalancedDirichletPartitioner(SchemePartitioner):
    """`partitions.balanced_dirichlet`: Dir(alpha) label mixes in partitions of equal size."""

    scheme = staticmethod(balanced_dirichlet)

    def __init__(self, num_partitions: int, alpha, *, partition_by: str = "label", seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed, alpha=alpha)


class PathologicalPartitioner(SchemePartitioner):
    """`partitions.pathological`: #C=k, each class split evenly among its holders."""

    scheme = staticmethod(pathological)

    def __init__(self, num_partitions: int, num_classes_per_partition: int, *, partition_by: str = "label",
                 class_assignment_mode: str = "random", seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed,
                         num_classes_per_partition=num_classes_per_partition,
                         class_assignment_mode=class_assignment_mode)


class ShardPartitioner(SchemePartitioner):
    """`partitions.shards`: McMahan et al.'s shards of the label-sorted data, ``shards_per_partition`` each."""

    scheme = staticmethod(shards)

    def __init__(self, num_partitions: int, shards_per_partition: int = 2, *, partition_by: str = "label",
                 shard_size: int | None = None, seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed,
                         shards_per_partition=shards_per_partition, shard_size=shard_size)


class QuantitySkewPartitioner(SchemePartitioner):
    """`partitions.quantity_skew`: sizes by Dir(alpha), each partition the global label mix."""

    scheme = staticmethod(quantity_skew)

    def __init__(self, num_partitions: int, alpha, *, partition_by: str = "label", min_partition_size: int = 10,
                 max_tries: int = 10, seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed, alpha=alpha,
                         min_partition_size=min_partition_size, max_tries=max_tries)


class MultiLabelDirichletPartitioner(SchemePartitioner):
    """`partitions.multilabel_dirichlet`: ``partition_by`` holds each row's multi-hot labels."""

    scheme = staticmethod(multilabel_dirichlet)

    def __init__(self, num_partitions: int, alpha, *, partition_by: str = "labels", min_partition_size: int = 10,
                 max_tries: int = 10, seed: int | None = None):
        super().__init__(num_partitions, partition_by=partition_by, seed=seed, alpha=alpha,
                         min_partition_size=min_partition_size, max_tries=max_tries)


class NaturalIdPartitioner(SchemePartitioner):
    """`partitions.natural`: a partition per distinct id of the column ``partition_by`` (a writer, a speaker).

    The number of partitions is the data's: known once a dataset is assigned. Nothing is drawn.
    """

    def __init__(self, partition_by: str):
        super().__init__(1, partition_by=partition_by)

    def split(self, labels: np.ndarray) -> Partition:
        """Return `partitions.natural` of the ids."""
        return natural(labels)

    @property
    def num_partitions(self) -> int:
        """The number of distinct ids of the assigned dataset."""
        return self.partition.num_partitions


def column(dataset, name: str) -> np.ndarray:
    """Return the column ``name`` of a ``datasets.Dataset`` as an array, refusing a name it lacks."""
    if name not in dataset.column_names:
        raise SettingError("{partition_by} is not a column of the dataset, whose columns are {columns:text}",
                           partition_by=name, columns=", ".join(dataset.column_names))
    return np.asarray(dataset[name])


def as_partition(partitioner, partition_by: str | None = None) -> tuple[Partition, np.ndarray]:
    """Return a partitioner's split as a `Partition` and the labels it splits, for `partitions.metrics` and plots.

    One of this module's partitioners gives its own `Partition` and its dataset's labels. Any other
    ``flwr_datasets`` partitioner (with its dataset assigned) gives a `Partition` with the same
    label counts per partition, which is what the metrics and the plots read: its partitions'
    labels, one after the other, then the dataset's labels that no partition holds (unassigned).

    Parameters
    ----------
    partitioner : flwr_datasets.partitioner.Partitioner
        With a dataset assigned (a ``FederatedDataset`` assigns it on its first ``load_partition``).
    partition_by : str, optional
        The label column; this module's partitioners know theirs.
    """
    if isinstance(partitioner, SchemePartitioner):
        return partitioner.partition, column(partitioner.dataset, partitioner.partition_by)
    if partition_by is None:
        raise SettingError("{partition_by} names the label column of a partitioner of flwr-datasets; give it",
                           partition_by=partition_by)
    labels = column(partitioner.dataset, partition_by)
    parts = [column(partitioner.load_partition(index), partition_by) for index in range(partitioner.num_partitions)]
    held = np.concatenate(parts) if parts else labels[:0]
    unassigned = _unassigned(labels, held)
    starts = np.cumsum([0, *(len(part) for part in parts)])
    indices = [np.arange(start, stop) for start, stop in zip(starts[:-1], starts[1:])]
    ordered = np.concatenate([held, unassigned]) if len(unassigned) else held
    return Partition(indices, len(ordered), scheme=type(partitioner).__name__), ordered


def _unassigned(labels: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Return the labels of ``labels`` left once ``held`` (a sub-multiset of them) is taken out."""
    if labels.ndim > 1:  # multi-hot rows: as many rows as the partitions left out, matched row by row
        rows, counts = np.unique(labels, axis=0, return_counts=True)
        taken = {tuple(row): count for row, count in zip(*np.unique(held, axis=0, return_counts=True))} \
            if len(held) else {}
        return np.concatenate([np.repeat(row[None], count - taken.get(tuple(row), 0), axis=0)
                               for row, count in zip(rows, counts)])
    values, counts = np.unique(labels, return_counts=True)
    taken = dict(zip(*np.unique(held, return_counts=True))) if len(held) else {}
    return np.repeat(values, [count - taken.get(value, 0) for value, count in zip(values, counts)])
