"""A Flower user's flwr-datasets partitioner, named by reference, splits fedsim's data (``--partition pkg.mod:Name``)."""

import os

import numpy as np
import pytest

from fedsim.config.partitioning import partition_for
from fedsim.config.run_config import RunConfig

from .test_cli import fedsim

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here reaches the Hub
datasets = pytest.importorskip("datasets")  # the extra: `pip install -e '.[flwr-datasets]'`
LABELS = np.random.default_rng(3).integers(0, 10, 600)
THEIRS = "flwr_datasets.partitioner:DirichletPartitioner"

MINE = '''
from flwr_datasets.partitioner import Partitioner


class EveryOther(Partitioner):
    """Sample i to partition i % k: takes neither a seed nor the label column."""

    def __init__(self, num_partitions):
        super().__init__()
        self._count = num_partitions

    @property
    def num_partitions(self):
        return self._count

    def load_partition(self, partition_id):
        return self.dataset.select(range(partition_id, len(self.dataset), self._count))
'''


def test_a_flwr_datasets_partitioner_gives_its_own_indices_with_the_runs_count_and_seed():
    from flwr_datasets.partitioner import DirichletPartitioner

    config = RunConfig(partition=THEIRS, partition_options={"alpha": 0.3, "min_partition_size": 5},
                       num_partitions=6, seed=4)
    partition = partition_for(config, LABELS)
    theirs = DirichletPartitioner(6, "label", 0.3, min_partition_size=5, seed=4)
    theirs.dataset = datasets.Dataset.from_dict({"label": LABELS, "row": np.arange(len(LABELS))})
    assert [part.tolist() for part in partition] == [sorted(theirs.load_partition(k)["row"]) for k in range(6)]
    assert (partition.scheme, partition.params, partition.seed) == (THEIRS, {"alpha": 0.3, "min_partition_size": 5}, 4)


def test_a_users_partitioner_from_a_file_trains_a_run(tmp_path):
    (tmp_path / "mine.py").write_text(MINE)
    config = RunConfig(dataset="digits", model="mlp", partition=f"{tmp_path}/mine.py:EveryOther", num_partitions=3,
                       rounds=1)
    partition = partition_for(config, LABELS)
    assert [part[:3].tolist() for part in partition] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    from fedsim.engines.inprocess import run

    result = run(config, tmp_path / "run")
    assert result.rows[-1]["round"] == 1 and "mine.py:EveryOther" in (tmp_path / "run" / "partition.json").read_text()


@pytest.mark.parametrize("settings, message", [
    ({"partition": THEIRS, "num_partitions": 4}, r"`partition`='flwr_datasets.partitioner:DirichletPartitioner' "
                                                 r"raised TypeError: .*'alpha'"),
    ({"partition": "numpy:array", "num_partitions": 4, "partition_options": {"object": [1, 2]}},
     r"`partition`='numpy:array' made a ndarray, not a flwr-datasets partitioner"),
])
def test_what_is_no_partitioner_or_fails_is_one_error_naming_the_partition(settings, message):
    with pytest.raises(ValueError, match=message):
        partition_for(RunConfig(**settings), LABELS)


def test_a_partitioner_that_makes_another_count_is_refused_with_the_count_it_made(tmp_path):
    (tmp_path / "mine.py").write_text(MINE)
    config = RunConfig(partition=f"{tmp_path}/mine.py:EveryOther", partition_options={"num_partitions": 5},
                       num_partitions=3)
    with pytest.raises(ValueError, match=r"made 5 partitions, where `num_partitions`=3 asks for as many; give "
                                         r"`num_partitions`=5"):
        partition_for(config, LABELS)


def test_partition_options_without_a_partitioner_by_reference_are_refused():
    with pytest.raises(ValueError, match=r"`partition_options`=\{'alpha': 0.3\} does nothing with "
                                         r"`partition`='dirichlet'"):
        RunConfig(partition_options={"alpha": 0.3})


def test_the_command_line_takes_the_partitioner_and_its_arguments(tmp_path):
    result = fedsim("partition", "--dataset", "digits", "--partition", THEIRS, "--partition-option", "alpha=0.3",
                    "--num-partitions", "4", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 0, result.stderr
    assert "digits flwr_datasets.partitioner:DirichletPartitioner  4" in result.stdout
