"""The extended and balanced Dirichlet schemes: a RunConfig builds them, and refuses the settings they do not read."""

import numpy as np
import pytest

from fedsim.config.run_config import RunConfig
from fedsim.config.partitioning import SCHEMES, make_partition, partition_for

LABELS = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 103))


def config(**settings) -> RunConfig:
    return RunConfig(strategy="fedavg", dataset="digits", model="mlp", num_partitions=10, seed=3, **settings)


def test_both_schemes_are_command_line_choices():
    assert {"extended-dirichlet", "balanced-dirichlet"} <= set(SCHEMES)


def test_extended_dirichlet_config_builds_k_classes_per_partition_split_by_dirichlet():
    partition = partition_for(config(partition="extended-dirichlet", classes_per_partition=3, alpha=0.3,
                                     min_partition_size=5, max_tries=20), LABELS)
    assert partition.scheme == "extended_dirichlet" and partition.seed == 3
    assert partition.params == {"num_partitions": 10, "num_classes_per_partition": 3, "alpha": 0.3,
                                "class_assignment_mode": "first-deterministic", "min_partition_size": 5}
    counts = partition.counts(LABELS)
    assert np.all((counts > 0).sum(axis=1) == 3)
    assert all(row[p] > 0 for p, row in enumerate(counts))  # fedsim's #C=k: partition i holds class i first
    assert partition.sizes.min() >= 5 and partition.unassigned.size == 0
    assert partition.describe() == "#C=3 Dir(0.3)"


def test_balanced_dirichlet_config_builds_equal_partitions():
    partition = partition_for(config(partition="balanced-dirichlet", alpha=0.2), LABELS)
    assert partition.scheme == "balanced_dirichlet" and partition.params == {"num_partitions": 10, "alpha": 0.2}
    assert partition.sizes.tolist() == [103] * 10
    assert partition.describe() == "balanced Dir(0.2)"


@pytest.mark.parametrize(
    "scheme, setting, value",
    [
        ("balanced-dirichlet", "classes_per_partition", 3),
        ("balanced-dirichlet", "class_assignment_mode", "random"),
        ("balanced-dirichlet", "min_partition_size", 5),
        ("balanced-dirichlet", "max_tries", 3),
        ("balanced-dirichlet", "self_balancing", True),
        ("extended-dirichlet", "self_balancing", True),
        ("extended-dirichlet", "shards_per_partition", 3),
    ],
)
def test_a_setting_the_scheme_does_not_read_is_refused(scheme, setting, value):
    with pytest.raises(ValueError, match=rf"`{setting}`={value!r} does nothing with `partition`='{scheme}'"):
        config(partition=scheme, **{setting: value})


@pytest.mark.parametrize("scheme", ["extended-dirichlet", "balanced-dirichlet"])
def test_multi_label_data_is_refused(scheme):
    with pytest.raises(ValueError, match=f"`scheme`='{scheme}' needs single-label data"):
        make_partition(np.eye(10, dtype=bool)[LABELS], scheme, num_partitions=4)
