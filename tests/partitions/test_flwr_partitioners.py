"""`partitions.flwr`: fedsim's schemes as flwr-datasets partitioners, offline on ``datasets.Dataset.from_dict``.

The same seed and labels give the `partitions` function's indices, for every scheme; any
partitioner, flwr-datasets' own included, becomes a `Partition` that the metrics and plots take.
A ``FederatedDataset`` downloads from the Hugging Face Hub, which these tests never reach.
"""

import importlib
import os
import sys

import numpy as np
import pytest

import partitions
from partitions.metrics import heterogeneity

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here reaches the Hub; should a change try, it fails
datasets = pytest.importorskip("datasets")  # the extra: `pip install -e '.[flwr-datasets]'`
fp = importlib.import_module("partitions.flwr")

RNG = np.random.default_rng(7)
LABELS = RNG.integers(0, 10, 3000)
WRITERS = RNG.integers(0, 12, 3000)
MULTI_HOT = (RNG.random((3000, 5)) < 0.3).astype(np.int64)
MULTI_HOT[MULTI_HOT.sum(axis=1) == 0, 0] = 1  # every sample holds a label


@pytest.fixture(scope="module")
def data():
    return datasets.Dataset.from_dict({"label": LABELS, "writer": WRITERS, "labels": MULTI_HOT.tolist(),
                                       "row": np.arange(len(LABELS))})


#: Each partitioner, and the `partitions` function call that must give its indices.
SCHEMES = {
    "iid": (lambda: fp.IidPartitioner(8, seed=1), lambda: partitions.iid(LABELS, 8, seed=1)),
    "dirichlet": (lambda: fp.DirichletPartitioner(10, 0.3, min_partition_size=5, self_balancing=True, seed=2),
                  lambda: partitions.dirichlet(LABELS, 10, 0.3, min_partition_size=5, self_balancing=True, seed=2)),
    "extended-dirichlet": (lambda: fp.ExtendedDirichletPartitioner(10, 3, 0.5, seed=3),
                           lambda: partitions.extended_dirichlet(LABELS, 10, num_classes_per_partition=3, alpha=0.5,
                                                                 seed=3)),
    "balanced-dirichlet": (lambda: fp.BalancedDirichletPartitioner(6, 0.5, seed=4),
                           lambda: partitions.balanced_dirichlet(LABELS, 6, alpha=0.5, seed=4)),
    **{f"pathological-{mode}": (
        lambda mode=mode: fp.PathologicalPartitioner(12, 2, class_assignment_mode=mode, seed=5),
        lambda mode=mode: partitions.pathological(LABELS, 12, 2, class_assignment_mode=mode, seed=5))
       for mode in ("random", "deterministic", "first-deterministic")},
    "shards": (lambda: fp.ShardPartitioner(20, 2, seed=6), lambda: partitions.shards(LABELS, 20, 2, seed=6)),
    "quantity": (lambda: fp.QuantitySkewPartitioner(9, 0.5, seed=7),
                 lambda: partitions.quantity_skew(LABELS, 9, 0.5, seed=7)),
    "natural": (lambda: fp.NaturalIdPartitioner("writer"), lambda: partitions.natural(WRITERS)),
    "multilabel-dirichlet": (lambda: fp.MultiLabelDirichletPartitioner(8, 0.5, seed=8),
                             lambda: partitions.multilabel_dirichlet(MULTI_HOT, 8, 0.5, seed=8)),
}


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_each_partitioner_gives_the_indices_of_its_partitions_function(data, scheme):
    make, expected = SCHEMES[scheme]
    partitioner, want = make(), expected()
    partitioner.dataset = data
    assert partitioner.num_partitions == want.num_partitions
    for index in range(want.num_partitions):
        assert partitioner.load_partition(index)["row"] == want.shard(index).tolist()
    assert partitioner.partition == want


def test_the_indices_are_made_once_on_first_use(data, monkeypatch):
    made = []
    partitioner = fp.DirichletPartitioner(5, 0.5, seed=0)
    split = partitioner.split
    monkeypatch.setattr(partitioner, "split", lambda labels: made.append(len(labels)) or split(labels))
    partitioner.dataset = data
    assert made == []  # nothing until a partition is asked for
    first, again = partitioner.load_partition(0)["row"], partitioner.load_partition(0)["row"]
    partitioner.load_partition(4)
    assert made == [len(LABELS)] and first == again


def test_a_partitioner_reads_the_label_column_it_is_given(data):
    by_writer = fp.IidPartitioner(4, partition_by="writer", seed=0)
    by_writer.dataset = data
    assert by_writer.load_partition(1)["row"] == partitions.iid(WRITERS, 4, seed=0).shard(1).tolist()
    missing = fp.DirichletPartitioner(4, 0.5, partition_by="target")
    missing.dataset = data
    with pytest.raises(ValueError, match=r"`partition_by`='target' is not a column of the dataset, whose columns "
                                         r"are label, writer, labels, row"):
        missing.load_partition(0)


def test_a_partition_that_does_not_exist_is_refused_by_name(data):
    partitioner = fp.IidPartitioner(3, seed=0)
    partitioner.dataset = data
    with pytest.raises(ValueError, match=r"`partition_id`=3 is not a partition: there are 3, 0 to 2"):
        partitioner.load_partition(3)
    with pytest.raises(ValueError, match=r"`partition_id`"):
        partitioner.load_partition(-1)


def test_a_scheme_that_cannot_be_met_says_what_would_work(data):
    partitioner = fp.DirichletPartitioner(10, 0.01, min_partition_size=300, max_tries=2, seed=0)
    partitioner.dataset = data
    with pytest.raises(ValueError, match=r"min_partition_size"):
        partitioner.load_partition(0)


# pyarrow 26 deprecates an option flwr-datasets 0.6.1's ShardPartitioner sorts with
@pytest.mark.filterwarnings("ignore:Specifying null_placement:FutureWarning")
def test_any_partitioner_is_a_partition_with_its_label_counts(data):
    """flwr-datasets' own Dirichlet and shard partitioners: the counts per partition, and those left out."""
    from flwr_datasets.partitioner import DirichletPartitioner, ShardPartitioner

    for theirs in (DirichletPartitioner(7, "label", 0.5, seed=1),
                   ShardPartitioner(9, "label", shard_size=250, keep_incomplete_shard=False, seed=2)):
        theirs.dataset = data
        partition, labels = fp.as_partition(theirs, "label")
        rows = [theirs.load_partition(index)["row"] for index in range(theirs.num_partitions)]
        held = partitions.Partition(rows, len(LABELS), scheme="theirs")
        assert np.array_equal(partition.counts(labels, 10), held.counts(LABELS, 10))
        assert partition.unassigned.size == held.unassigned.size
        assert heterogeneity(partition, labels) == pytest.approx(heterogeneity(held, LABELS), nan_ok=True)
    ours = fp.PathologicalPartitioner(10, 2, class_assignment_mode="first-deterministic", seed=0)
    ours.dataset = data
    partition, labels = fp.as_partition(ours)
    assert partition is ours.partition and np.array_equal(labels, LABELS)
    with pytest.raises(ValueError, match=r"`partition_by`=None names the label column"):
        fp.as_partition(theirs)


def test_the_plots_take_a_partitioner(data, tmp_path):
    pytest.importorskip("matplotlib")
    from partitions.plot import stacked_bars

    partitioner = fp.DirichletPartitioner(6, 0.5, seed=0)
    partitioner.dataset = data
    stacked_bars(*fp.as_partition(partitioner), path=tmp_path / "bars.png")
    assert (tmp_path / "bars.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_flwr_datasets_the_import_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr_datasets", None)
    monkeypatch.setitem(sys.modules, "flwr_datasets.partitioner", None)
    monkeypatch.delitem(sys.modules, "partitions.flwr")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'fedsim\[flwr-datasets\]'"):
        importlib.import_module("partitions.flwr")
