import numpy as np
import pytest

import partitions
from partitions.metrics import heterogeneity


def test_large_alpha_approaches_the_even_split_among_holders(mnist_like_labels):
    counts = partitions.extended_dirichlet(
        mnist_like_labels, 20, num_classes_per_partition=2, alpha=1e4, class_assignment_mode="deterministic", seed=0
    ).counts(mnist_like_labels)
    for column in counts.T:  # each class has four holders under "deterministic" with 20 partitions
        held = column[column > 0]
        assert held.size == 4
        assert np.allclose(held / held.sum(), 0.25, atol=0.02)


def test_small_alpha_skews_the_holders_shares():
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 300))

    def mean_over_seeds(alpha, key):
        return np.mean([
            heterogeneity(partitions.extended_dirichlet(labels, 20, num_classes_per_partition=2, alpha=alpha,
                                                        min_partition_size=0, seed=seed), labels)[key]
            for seed in range(3)
        ])

    # Two classes each: a skewed split leaves a partition nearer one effective class, and the sizes uneven.
    effective = "mean_effective_num_classes"
    assert mean_over_seeds(0.05, effective) < 1.75 < 1.9 < mean_over_seeds(1e3, effective)
    assert mean_over_seeds(0.05, "size_cv") > 2 * mean_over_seeds(1e3, "size_cv")


def test_tiny_alpha_still_gives_every_partition_its_k_classes(mnist_like_labels):
    partition = partitions.extended_dirichlet(mnist_like_labels, 30, num_classes_per_partition=3, alpha=1e-3,
                                              min_partition_size=0, seed=0)
    assert np.all((partition.counts(mnist_like_labels) > 0).sum(axis=1) == 3)
    assert partition.sizes.sum() == mnist_like_labels.size


def test_first_deterministic_is_the_default_and_holds_every_class(mnist_like_labels):
    partition = partitions.extended_dirichlet(mnist_like_labels, 10, num_classes_per_partition=2, alpha=0.5, seed=1)
    counts = partition.counts(mnist_like_labels)
    assert all(row[p % 10] > 0 for p, row in enumerate(counts))
    assert partition.unassigned.size == 0


@pytest.mark.parametrize("mode", ["random", "deterministic", "first-deterministic"])
def test_holds_and_drops_the_classes_pathological_does(mnist_like_labels, mode):
    """The classes are chosen by the same code and the same random stream as `pathological`'s."""
    with pytest.warns(UserWarning, match="held by no partition") as record:
        extended = partitions.extended_dirichlet(mnist_like_labels, 3, num_classes_per_partition=2, alpha=0.5,
                                                 class_assignment_mode=mode, seed=4)
    assert record[0].filename == __file__  # the warning points at the call
    with pytest.warns(UserWarning, match="held by no partition"):
        pathological = partitions.pathological(mnist_like_labels, 3, 2, class_assignment_mode=mode, seed=4)
    assert np.array_equal(extended.counts(mnist_like_labels) > 0, pathological.counts(mnist_like_labels) > 0)
    assert np.array_equal(extended.unassigned, pathological.unassigned)


def test_a_failed_minimum_size_names_one_the_same_call_reaches(mnist_like_labels):
    with pytest.raises(ValueError, match=r"min_partition_size.*alpha") as error:
        partitions.extended_dirichlet(mnist_like_labels, 50, num_classes_per_partition=2, alpha=0.05,
                                      min_partition_size=500, seed=0)
    reachable = int(str(error.value).split("Use `min_partition_size` <= ")[1].split(",")[0])
    partition = partitions.extended_dirichlet(mnist_like_labels, 50, num_classes_per_partition=2, alpha=0.05,
                                              min_partition_size=reachable, seed=0)
    assert partition.sizes.min() >= reachable


def test_records_scheme_parameters_and_seed(mnist_like_labels):
    partition = partitions.extended_dirichlet(mnist_like_labels, 10, num_classes_per_partition=3, alpha=0.5, seed=7)
    assert partition.scheme == "extended_dirichlet"
    assert partition.seed == 7
    assert partition.params == {"num_partitions": 10, "num_classes_per_partition": 3, "alpha": 0.5,
                                "class_assignment_mode": "first-deterministic", "min_partition_size": 10}


def test_survives_a_save(mnist_like_labels, tmp_path):
    partition = partitions.extended_dirichlet(mnist_like_labels, 10, num_classes_per_partition=2, alpha=0.5, seed=0)
    loaded = partitions.Partition.load(partition.save(tmp_path / "p.json"))
    assert loaded == partition and loaded.params == partition.params and loaded.scheme == partition.scheme
