import numpy as np
import pytest

from partitions import (
    Partition,
    balanced_dirichlet,
    dirichlet,
    extended_dirichlet,
    iid,
    multilabel_dirichlet,
    pathological,
    quantity_skew,
    shards,
)

LABELS = np.repeat(np.arange(5), 40)


@pytest.mark.parametrize(
    ("make", "label"),
    [
        (lambda: iid(LABELS, 4, seed=0), "IID"),
        (lambda: dirichlet(LABELS, 4, alpha=0.1, min_partition_size=0, seed=0), "Dir(0.1)"),
        (lambda: dirichlet(LABELS, 4, alpha=0.5, self_balancing=True, seed=0), "Dir(0.5), self-balancing"),
        (lambda: dirichlet(LABELS, 4, alpha=[0.3] * 5, min_partition_size=0, seed=0), "Dir(0.3)"),
        (lambda: dirichlet(LABELS, 4, alpha=np.linspace(0.1, 100, 5), min_partition_size=0, seed=0),
         "Dir(α per class)"),
        (lambda: pathological(LABELS, 5, 3, class_assignment_mode="deterministic"), "#C=3"),
        (lambda: shards(LABELS, 4, 3, seed=0), "shards(3 per client)"),
        (lambda: quantity_skew(LABELS, 4, alpha=0.5, min_partition_size=0, seed=0), "quantity Dir(0.5)"),
        (lambda: quantity_skew(LABELS, 3, alpha=[1, 2, 3], min_partition_size=0, seed=0),
         "quantity Dir(α per partition)"),
        (lambda: multilabel_dirichlet(np.eye(5, dtype=bool)[LABELS], 4, alpha=2.0, min_partition_size=0, seed=0),
         "multi-label Dir(2)"),
        (lambda: extended_dirichlet(LABELS, 5, num_classes_per_partition=2, alpha=0.5, min_partition_size=0, seed=0),
         "#C=2 Dir(0.5)"),
        (lambda: extended_dirichlet(LABELS, 5, num_classes_per_partition=3, alpha=[0.1, 1, 1, 1, 1],
                                    min_partition_size=0, seed=0), "#C=3 Dir(α per class)"),
        (lambda: balanced_dirichlet(LABELS, 4, alpha=0.5, seed=0), "balanced Dir(0.5)"),
        (lambda: balanced_dirichlet(LABELS, 4, alpha=[2] * 5, seed=0), "balanced Dir(2)"),
    ],
)
def test_describe_gives_the_scheme_in_the_notation_of_papers_and_survives_a_save(make, label, tmp_path):
    partition = make()
    assert partition.describe() == label
    assert Partition.load(partition.save(tmp_path / "p.json")).describe() == label


@pytest.mark.parametrize(
    ("scheme", "params"),
    [
        ("manual", {}),
        ("dirichlet", {}),  # parameters not recorded
        ("dirichlet", {"alpha": "high"}),  # hand-edited partition file
        ("quantity_skew", {"alpha": []}),
        ("pathological", {"num_partitions": 2}),
        ("shards", {}),
        ("extended_dirichlet", {"num_classes_per_partition": 2}),  # no alpha
        ("extended_dirichlet", {"alpha": 0.5}),  # no k
        ("balanced_dirichlet", {"alpha": "high"}),
    ],
)
def test_describe_falls_back_to_the_scheme_name_when_the_parameters_say_nothing(scheme, params):
    assert Partition([[0], [1]], num_samples=2, scheme=scheme, params=params).describe() == scheme
