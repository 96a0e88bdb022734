"""A flwr-datasets partitioner of the user's, named by reference (``--partition package.module:Name``), over
fedsim's data: a Flower user's own partition compared on fedsim's engines.

The partitioner is built with ``partition_options`` as its arguments, and with the run's
``num_partitions``, ``seed`` and ``partition_by="label"`` where its signature takes them and the
options do not set them. It is given a ``datasets.Dataset`` of the training labels (a ``label``
column; multi-hot rows for multi-label data), each sample's ``index``, and, where the data
carries them, its ``client_id``; the indices of its partitions become the run's `Partition`.
"""

from __future__ import annotations

import inspect

import numpy as np

import partitions

from ..checks import SettingError
from ..references import calling, load, shown

#: The install line of the package a partitioner by reference needs.
FLWR_DATASETS_INSTALL = "pip install 'fedsim[flwr-datasets]'"


def partitioner_partition(config, labels, client_ids=None) -> partitions.Partition:
    """Return the partition that ``config.partition``, a flwr-datasets partitioner by reference, makes of ``labels``.

    Raises
    ------
    ValueError
        Naming ``partition``: the object is no partitioner, it raised, or it made another number
        of partitions than ``num_partitions``.
    """
    dataset_class = _dataset_class()
    factory = load(config.partition, "partition")
    partitioner = calling(config.partition, "partition", factory, **arguments(config, factory))
    if not all(hasattr(type(partitioner), name) for name in ("load_partition", "num_partitions", "dataset")):
        raise SettingError("{partition} made a {kind:text}, not a flwr-datasets partitioner (with load_partition and "
                           "num_partitions)", partition=shown(config.partition), kind=type(partitioner).__name__)
    labels = np.asarray(labels)
    columns = {"label": labels.tolist() if labels.ndim > 1 else labels, "index": np.arange(len(labels))}
    if client_ids is not None:
        columns["client_id"] = np.asarray(client_ids)
    partitioner.dataset = dataset_class.from_dict(columns)
    indices = calling(config.partition, "partition", lambda: [
        partitioner.load_partition(index)["index"] for index in range(partitioner.num_partitions)])
    if len(indices) != config.num_partitions:
        raise SettingError("{partition} made {count:text} partitions, where {num_partitions} asks for as many; give "
                           "{num_partitions:name}={count:text}", partition=shown(config.partition),
                           count=str(len(indices)), num_partitions=config.num_partitions)
    return partitions.Partition(indices, len(labels), scheme=shown(config.partition),
                                params=dict(config.partition_options), seed=config.seed)


def arguments(config, partitioner_class) -> dict:
    """Return the arguments a partitioner is built with: ``partition_options``, and the run's own where it takes them."""
    given = dict(config.partition_options)
    try:
        takes = inspect.signature(partitioner_class).parameters
    except (TypeError, ValueError):  # no signature to read: the options alone
        return given
    run = {"num_partitions": config.num_partitions, "seed": config.seed, "partition_by": "label"}
    return {**{name: value for name, value in run.items() if name in takes}, **given}


def _dataset_class():
    """Return ``datasets.Dataset``, or refuse with the install line where the extra is missing."""
    try:
        from datasets import Dataset
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"a partitioner by reference is a flwr-datasets partitioner, and flwr-datasets is "
                                  f"not installed: {FLWR_DATASETS_INSTALL}") from None
    return Dataset
