"""The `Partition`: which samples each partition (client, rank) holds, and how it was made."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ._checks import check_integer, check_labels
from ._io import read_text, write_atomic

FORMAT_NAME = "fedsim.partition"
FORMAT_VERSION = 1


class Partition(Sequence):
    """Disjoint index arrays into one dataset, with the scheme, parameters and seed that made them.

    A `Partition` is a sequence of 1-D ``int64`` arrays, one per partition, each sorted
    ascending. Indices are disjoint and lie in ``[0, num_samples)``. Every sample is in at
    most one partition; a scheme that leaves samples out (pathological classes nobody holds,
    the remainder of McMahan shards) reports them in `unassigned`.

    Parameters
    ----------
    indices : sequence of array_like
        One array of sample indices per partition.
    num_samples : int
        Size of the dataset the indices point into.
    scheme : str
        Name of the partitioner that made it, e.g. ``"dirichlet"``.
    params : mapping, optional
        The partitioner's parameters, JSON-serialisable.
    seed : int or None, optional
        The seed the partitioner was given.
    local_test : sequence of array_like, optional
        Per partition, the sample indices it holds back to test on (`partitions.split_local_test`),
        disjoint from every partition's training indices, which are then ``indices``.

    Examples
    --------
    >>> p = Partition([[0, 2], [1, 3]], num_samples=4, scheme="manual")
    >>> p.sizes.tolist()
    [2, 2]
    >>> p.counts([0, 0, 1, 1]).tolist()
    [[1, 1], [1, 1]]
    """

    def __init__(self, indices, num_samples: int, scheme: str, params: Mapping | None = None, seed=None,
                 local_test=None):
        self._indices = tuple(np.sort(np.asarray(part, dtype=np.int64).ravel()) for part in indices)
        self.num_samples = int(num_samples)
        self.scheme = str(scheme)
        self.params = dict(params or {})
        self.seed = seed
        self.local_test = None
        if local_test is not None:
            self.local_test = tuple(np.sort(np.asarray(part, dtype=np.int64).ravel()) for part in local_test)
            if len(self.local_test) != len(self._indices):
                raise ValueError(f"`local_test` has {len(self.local_test)} parts for {len(self._indices)} partitions")
        _check_disjoint_in_range(self._indices + (self.local_test or ()), self.num_samples)

    # -- sequence protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, index):
        return self._indices[index]

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self._indices)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return (
            self.num_samples == other.num_samples
            and len(self) == len(other)
            and all(np.array_equal(a, b) for a, b in zip(self, other))
            and (self.local_test is None) == (other.local_test is None)
            and all(np.array_equal(a, b) for a, b in zip(self.local_test or (), other.local_test or ()))
        )

    __hash__ = None

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items() if k != "num_partitions")
        return (
            f"Partition(scheme={self.scheme!r}, num_partitions={len(self)}, "
            f"num_samples={self.num_samples}, {params + ', ' if params else ''}seed={self.seed!r})"
        )

    def describe(self) -> str:
        """Return a short label of the scheme and its parameters, for figure titles and tables.

        The notation is the one papers use (NIID-Bench's ``Dir(alpha)`` and ``#C=k``, McMahan's
        shards). A partition whose scheme is not one of this package's, or whose parameters were
        not recorded, is labelled with its scheme name alone.

        Examples
        --------
        >>> from partitions import (balanced_dirichlet, dirichlet, extended_dirichlet, iid, multilabel_dirichlet,
        ...                         natural, pathological, quantity_skew, shards)
        >>> labels = np.repeat(np.arange(4), 25)
        >>> iid(labels, 4, seed=0).describe()
        'IID'
        >>> dirichlet(labels, 4, alpha=0.1, min_partition_size=0, seed=0).describe()
        'Dir(0.1)'
        >>> dirichlet(labels, 4, alpha=[0.1, 0.1, 1, 1], min_partition_size=0, seed=0).describe()
        'Dir(α per class)'
        >>> dirichlet(labels, 4, alpha=0.5, self_balancing=True, seed=0).describe()
        'Dir(0.5), self-balancing'
        >>> pathological(labels, 4, 2, seed=0).describe()
        '#C=2'
        >>> extended_dirichlet(labels, 4, num_classes_per_partition=2, alpha=0.5, min_partition_size=0,
        ...                    seed=0).describe()
        '#C=2 Dir(0.5)'
        >>> balanced_dirichlet(labels, 4, alpha=0.5, seed=0).describe()
        'balanced Dir(0.5)'
        >>> shards(labels, 4, seed=0).describe()
        'shards(2 per client)'
        >>> quantity_skew(labels, 4, alpha=0.5, min_partition_size=0, seed=0).describe()
        'quantity Dir(0.5)'
        >>> multilabel_dirichlet(np.eye(4, dtype=bool)[labels], 4, alpha=1.0, min_partition_size=0, seed=0).describe()
        'multi-label Dir(1)'
        >>> natural([7, 7, 9]).describe()
        'natural (2 ids)'
        >>> Partition([[0], [1]], num_samples=2, scheme="manual").describe()
        'manual'
        """
        params = self.params
        if self.scheme == "iid":
            return "IID"
        if self.scheme in _DIRICHLET_SCHEMES:
            prefix, alpha_per = _DIRICHLET_SCHEMES[self.scheme]
            alpha = _concentration_label(params.get("alpha"), alpha_per)
            if alpha is None:
                return self.scheme
            return f"{prefix}({alpha})" + (", self-balancing" if params.get("self_balancing") else "")
        if self.scheme == "pathological" and "num_classes_per_partition" in params:
            return f"#C={params['num_classes_per_partition']}"
        if self.scheme == "extended_dirichlet" and "num_classes_per_partition" in params:
            alpha = _concentration_label(params.get("alpha"), "class")
            return self.scheme if alpha is None else f"#C={params['num_classes_per_partition']} Dir({alpha})"
        if self.scheme == "natural":
            return f"natural ({self.num_partitions} ids)"
        if self.scheme == "shards" and "shards_per_partition" in params:
            return f"shards({params['shards_per_partition']} per client)"
        return self.scheme

    # -- views -------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """Number of partitions."""
        return len(self._indices)

    @property
    def sizes(self) -> np.ndarray:
        """Number of samples in each partition."""
        return np.array([part.size for part in self._indices], dtype=np.int64)

    @property
    def unassigned(self) -> np.ndarray:
        """Sorted indices of the samples that no partition holds."""
        return np.flatnonzero(self.assignment() < 0)

    def assignment(self) -> np.ndarray:
        """Return the partition id of every sample, ``-1`` for a sample no partition holds."""
        owner = np.full(self.num_samples, -1, dtype=np.int64)
        for pid, part in enumerate(self._indices):
            owner[part] = pid
        return owner

    def shard(self, rank: int) -> np.ndarray:
        """Return the sample indices of partition ``rank`` (a DDP rank or client id)."""
        rank = check_integer("rank", rank, minimum=0)
        if rank >= len(self):
            raise ValueError(f"`rank` must be between 0 and {len(self) - 1}, got {rank}")
        return self._indices[rank]

    def counts(self, labels, num_classes: int | None = None) -> np.ndarray:
        """Return the (partitions x classes) matrix of label counts.

        Parameters
        ----------
        labels : array_like
            Integer class ids, one per sample, or a multi-hot (samples x classes) matrix,
            in which case a sample counts once for every label it carries.
        num_classes : int, optional
            Number of columns; defaults to ``max(labels) + 1`` (or the matrix width).
        """
        labels = np.asarray(labels)
        if labels.ndim not in (1, 2) or labels.shape[0] != self.num_samples:
            raise ValueError(
                f"`labels` has {labels.shape[0] if labels.ndim else 0} entries (shape {labels.shape}) but the "
                f"partition covers {self.num_samples} samples: give one label or multi-hot row per sample"
            )
        if labels.ndim == 2:
            if num_classes is not None and num_classes != labels.shape[1]:
                raise ValueError(f"`num_classes`={num_classes} differs from the {labels.shape[1]} label columns")
            table = np.zeros((len(self), labels.shape[1]), dtype=np.int64)
            for pid, part in enumerate(self._indices):
                table[pid] = labels[part].sum(axis=0, dtype=np.int64)
            return table
        labels = check_labels(labels) if labels.size else labels.astype(np.int64)
        width = (int(labels.max()) + 1 if labels.size else 0) if num_classes is None else int(num_classes)
        if labels.size and labels.max() >= width:
            raise ValueError(f"`labels` hold class {labels.max()} but `num_classes`={width}")
        owner = self.assignment()
        held = owner >= 0
        flat = owner[held] * width + labels[held]
        return np.bincount(flat, minlength=len(self) * width).reshape(len(self), width)

    def label_distribution(self, labels, num_classes: int | None = None) -> np.ndarray:
        """Return each partition's label distribution (rows sum to 1; NaN rows for empty partitions)."""
        table = self.counts(labels, num_classes).astype(float)
        totals = table.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return table / totals

    # -- persistence -------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Return the JSON-ready form that `save` writes."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "scheme": self.scheme,
            "params": self.params,
            "seed": self.seed,
            "num_samples": self.num_samples,
            "indices": [part.tolist() for part in self._indices],
            **({} if self.local_test is None else {"local_test": [part.tolist() for part in self.local_test]}),
        }

    def save(self, path) -> Path:
        """Write the partition to ``path`` as JSON, atomically (`partitions._io.write_atomic`), creating its folder."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.to_dict(), separators=(",", ":")))
        return path

    @classmethod
    def from_dict(cls, data, source: str = "data") -> Partition:
        """Rebuild a partition from `to_dict` output, validating it."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise ValueError(f"{source} is not a fedsim partition (no \"format\": \"{FORMAT_NAME}\" field)")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{source} has partition format version {data.get('version')!r}; "
                f"this fedsim reads version {FORMAT_VERSION}"
            )
        missing = [key for key in ("scheme", "params", "seed", "num_samples", "indices") if key not in data]
        if missing:
            raise ValueError(f"{source} is a corrupt partition file: missing {', '.join(missing)}")
        arrays = _index_lists(data["indices"], "indices", source)
        local_test = _index_lists(data["local_test"], "local_test", source) if "local_test" in data else None
        try:
            return cls(arrays, data["num_samples"], data["scheme"], data["params"], data["seed"], local_test)
        except ValueError as error:
            raise ValueError(f"{source} is a corrupt partition file: {error}") from None

    @classmethod
    def load(cls, path) -> Partition:
        """Read a partition written by `save`, checking it is well formed, disjoint and in range."""
        path = Path(path)
        text = read_text(path, "fedsim partition file")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is a corrupt partition file: invalid JSON ({error})") from None
        return cls.from_dict(data, source=str(path))


#: Label prefix of each Dirichlet scheme, and what its per-entry concentration vector runs over.
_DIRICHLET_SCHEMES = {
    "balanced_dirichlet": ("balanced Dir", "class"),
    "dirichlet": ("Dir", "class"),
    "multilabel_dirichlet": ("multi-label Dir", "class"),
    "quantity_skew": ("quantity Dir", "partition"),
}


def _concentration_label(alpha, alpha_per: str) -> str | None:
    """Return a concentration as ``0.5``, or ``α per class`` for a vector of differing values; None if unreadable."""
    if alpha is None:
        return None
    try:
        values = np.asarray(alpha, dtype=float).ravel()
    except (TypeError, ValueError):
        # params also come from partition files, which may hold anything: fall back rather than fail a plot
        return None
    if values.size == 0:
        return None
    if np.all(values == values[0]):
        return f"{values[0]:g}"
    return f"α per {alpha_per}"


def _index_lists(lists, key: str, source: str) -> list[np.ndarray]:
    """Return a file's list of index lists as arrays, or raise naming ``key`` and the file."""
    if not isinstance(lists, list) or not all(isinstance(part, list) for part in lists):
        raise ValueError(f"{source} is a corrupt partition file: `{key}` must be a list of lists")
    try:
        return [np.asarray(part, dtype=np.int64) for part in lists]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{source} is a corrupt partition file: `{key}` must hold integers") from None


def _check_disjoint_in_range(indices: Sequence[np.ndarray], num_samples: int) -> None:
    if num_samples < 0:
        raise ValueError(f"`num_samples` must be >= 0, got {num_samples}")
    total = sum(part.size for part in indices)
    if total == 0:
        return
    flat = np.concatenate(indices)
    if flat.min() < 0 or flat.max() >= num_samples:
        bad = flat[(flat < 0) | (flat >= num_samples)][0]
        raise ValueError(f"index {bad} is out of range for {num_samples} samples")
    # bincount is O(n) where np.unique would sort a million indices
    if np.bincount(flat, minlength=num_samples).max() > 1:
        raise ValueError("the partitions overlap: a sample index appears more than once")
