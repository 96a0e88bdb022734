"""Natural partitions: one partition per id the data already carries (a writer, a speaker, a device)."""

from __future__ import annotations

import numpy as np

from .partition import Partition


def natural(ids) -> Partition:
    """Give each distinct id its own partition, holding the samples that carry it.

    The federated datasets of LEAF and TFF come split already: FEMNIST by writer,
    Shakespeare by role, Stack Overflow by user. This keeps that split, as flwr-datasets'
    ``NaturalIdPartitioner`` does. Partition ``i`` holds the samples of the ``i``-th id in sorted
    order, and ``params["ids"]`` lists the ids in that order, so the client of a saved partition
    can be traced back to its writer. Nothing is drawn: there is no seed.

    Parameters
    ----------
    ids : array_like of int or str
        One id per sample.

    Returns
    -------
    Partition

    Raises
    ------
    ValueError
        If ``ids`` is empty or not one-dimensional.
    TypeError
        If the ids are neither integers nor strings.

    Examples
    --------
    >>> p = natural(["bob", "ann", "bob", "cy", "ann"])
    >>> [part.tolist() for part in p], p.params["ids"], p.describe()
    ([[1, 4], [0, 2], [3]], ['ann', 'bob', 'cy'], 'natural (3 ids)')
    """
    ids = check_ids(ids)
    values, owner = np.unique(ids, return_inverse=True)
    by_owner = np.argsort(owner, kind="stable")
    parts = np.split(by_owner, np.cumsum(np.bincount(owner, minlength=len(values)))[:-1])
    params = {"num_partitions": len(values), "ids": values.tolist()}
    return Partition(parts, len(ids), "natural", params, seed=None)


def check_ids(ids, name: str = "ids") -> np.ndarray:
    """Return ``ids`` as a non-empty 1-D array of integers or strings, or raise naming the parameter ``name``."""
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional (one id per sample), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` is empty: there is nothing to partition")
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or array.dtype.kind in "US"):
        raise TypeError(f"`{name}` must hold integers or strings, one per sample, got dtype {array.dtype}")
    return array
