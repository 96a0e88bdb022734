import json
import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from partitions import Partition, dirichlet, iid, pathological
from partitions.metrics import (
    effective_num_classes,
    emd,
    hellinger,
    heterogeneity,
    jensen_shannon,
    size_stats,
    summary,
)

PER_PARTITION = [emd, hellinger, jensen_shannon, effective_num_classes]


def test_iid_partitions_are_close_to_the_global_distribution():
    labels = np.repeat(np.arange(10), 1000)
    p = iid(labels, 10, seed=0)
    assert emd(p, labels).max() < 0.15
    assert hellinger(p, labels).max() < 0.05
    assert jensen_shannon(p, labels).max() < 0.05
    assert effective_num_classes(p, labels).min() > 9.9


@pytest.mark.parametrize("num_classes", [2, 4, 10])
def test_one_class_per_partition_has_the_closed_form_distances(num_classes):
    # Each partition holds one class of a uniform global distribution: q = e_c, p = 1/C.
    labels = np.repeat(np.arange(num_classes), 20)
    p = pathological(labels, num_classes, 1, class_assignment_mode="deterministic", seed=0)
    c = num_classes
    js_divergence = 0.5 * (math.log2(2 * c / (c + 1)) + (math.log2(2 / (c + 1)) + (c - 1)) / c)
    np.testing.assert_allclose(emd(p, labels), 2 * (1 - 1 / c))
    np.testing.assert_allclose(hellinger(p, labels), math.sqrt(1 - math.sqrt(1 / c)))
    np.testing.assert_allclose(jensen_shannon(p, labels), math.sqrt(js_divergence))
    assert effective_num_classes(p, labels).tolist() == [1.0] * c


def test_four_classes_one_each_matches_numbers_worked_by_hand():
    labels = np.repeat(np.arange(4), 25)
    p = pathological(labels, 4, 1, class_assignment_mode="deterministic", seed=0)
    # q = (1, 0, 0, 0), p = (1/4, ...): |1 - 1/4| + 3/4; Hellinger^2 = 1 - sqrt(1/4); m = (5/8, 1/8, 1/8, 1/8)
    np.testing.assert_allclose(emd(p, labels), 1.5)
    np.testing.assert_allclose(hellinger(p, labels), math.sqrt(0.5))
    # KL(q || m) = log2(8/5); KL(p || m) = 1/4 log2(2/5) + 3/4 log2(2)
    js_divergence = 0.5 * (math.log2(8 / 5) + math.log2(2 / 5) / 4 + 3 / 4)
    np.testing.assert_allclose(jensen_shannon(p, labels), math.sqrt(js_divergence))
    np.testing.assert_allclose(jensen_shannon(p, labels), 0.740807, atol=1e-6)


def test_hand_made_partition_matches_hand_computed_metrics():
    labels = np.array([0, 0, 1, 1, 1, 2])
    # sample 5 (class 2) is held by nobody but still counts in the global distribution
    p = Partition([[0, 1, 2], [3, 4]], num_samples=6, scheme="manual")
    glob = np.array([2, 3, 1]) / 6
    local = np.array([[2 / 3, 1 / 3, 0], [0, 1, 0]])

    np.testing.assert_allclose(emd(p, labels), [1 / 3 + 1 / 6 + 1 / 6, 1 / 3 + 1 / 2 + 1 / 6])
    squared = (math.sqrt(2 / 3) - math.sqrt(1 / 3)) ** 2 + (math.sqrt(1 / 3) - math.sqrt(1 / 2)) ** 2 + 1 / 6
    h0 = math.sqrt(0.5 * squared)
    h1 = math.sqrt(1 - math.sqrt(1 / 2))
    np.testing.assert_allclose(hellinger(p, labels), [h0, h1])
    np.testing.assert_allclose(jensen_shannon(p, labels), [jensenshannon(row, glob, base=2) for row in local])
    entropy0 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    np.testing.assert_allclose(effective_num_classes(p, labels), [math.exp(entropy0), 1.0])


def test_mean_jensen_shannon_falls_as_alpha_grows():
    labels = np.repeat(np.arange(10), 200)
    def mean_js(alpha, seed):
        partition = dirichlet(labels, 10, alpha, min_partition_size=0, seed=seed)
        return heterogeneity(partition, labels)["mean_jensen_shannon"]

    means = [np.mean([mean_js(alpha, seed) for seed in range(5)]) for alpha in (0.05, 0.5, 5.0, 50.0)]
    assert all(a > b for a, b in zip(means, means[1:])), means


def test_multi_hot_labels_normalise_the_label_counts():
    labels = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 1]], dtype=bool)
    p = Partition([[0, 1], [2, 3]], num_samples=4, scheme="manual")
    # partition label counts (2, 1, 0) and (0, 1, 2); global counts (2, 2, 2)
    np.testing.assert_allclose(emd(p, labels), [2 / 3, 2 / 3])
    np.testing.assert_allclose(jensen_shannon(p, labels), jensenshannon([2, 1, 0], [1, 1, 1], base=2))
    entropy = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    np.testing.assert_allclose(effective_num_classes(p, labels), math.exp(entropy))
    np.testing.assert_allclose(emd(p, labels.astype(int)), emd(p, labels))


@pytest.mark.parametrize("metric", PER_PARTITION)
def test_empty_partitions_give_nan_and_are_skipped_by_the_means(metric):
    labels = np.array([0, 1, 0, 1])
    p = Partition([[0, 1], [], [2, 3]], num_samples=4, scheme="manual")
    values = metric(p, labels)
    assert values.shape == (3,)
    assert np.isnan(values[1]) and not np.isnan(values[[0, 2]]).any()
    h = heterogeneity(p, labels)
    assert h["empty_partitions"] == 1
    key = f"mean_{metric.__name__}"
    assert h[key] == pytest.approx(np.mean(values[[0, 2]]))


def test_all_partitions_empty_gives_nan_means_without_warnings():
    p = Partition([[], []], num_samples=3, scheme="manual")
    h = heterogeneity(p, [0, 1, 2])
    assert math.isnan(h["mean_emd"]) and math.isnan(h["size_cv"]) and h["unassigned"] == 3


def test_size_stats():
    p = Partition([[0], [1, 2, 3], [4, 5]], num_samples=6, scheme="manual")
    stats = size_stats(p)
    assert stats == {
        "num_partitions": 3, "total": 6, "min": 1, "max": 3, "mean": 2.0,
        "std": pytest.approx(math.sqrt(2 / 3)), "cv": pytest.approx(math.sqrt(2 / 3) / 2),
        "gini": pytest.approx((2 + 4 + 2) / (2 * 9 * 2)),  # sum |x_i - x_j| / (2 n^2 mean)
    }
    assert size_stats(iid(100, 4, seed=0))["gini"] == 0.0


def test_heterogeneity_is_flat_json_ready_and_consistent():
    labels = np.repeat(np.arange(5), 40)
    p = dirichlet(labels, 4, alpha=0.5, min_partition_size=0, seed=1)
    h = heterogeneity(p, labels)
    json.dumps(h, allow_nan=False)
    assert all(type(value) in (int, float) for value in h.values())
    assert h["num_partitions"] == 4 and h["num_classes"] == 5 and h["num_samples"] == 200
    assert h["size_total"] == 200 and h["unassigned"] == 0
    assert h["mean_emd"] == pytest.approx(np.mean(emd(p, labels)))
    assert h["mean_hellinger"] == pytest.approx(np.mean(hellinger(p, labels)))


def test_summary_names_every_scheme_and_shows_the_numbers():
    labels = np.repeat(np.arange(4), 25)
    schemes = {
        "iid-10": iid(labels, 4, seed=0),
        "one-class": pathological(labels, 4, 1, class_assignment_mode="deterministic", seed=0),
    }
    text = summary(schemes, labels)
    lines = text.splitlines()
    assert len(lines) == 4 and lines[0].split()[0] == "name"
    assert lines[2].startswith("iid-10") and lines[3].startswith("one-class")
    assert lines[3].split()[1:] == ["4", "25", "25.0", "25", "1.500", "0.707", "0.741", "1.00"]
    assert len({len(line) for line in lines}) == 1  # aligned columns
    assert summary(schemes["iid-10"], labels).splitlines()[2].startswith("iid ")


def test_summary_survives_empty_partitions():
    p = Partition([[0, 1], []], num_samples=2, scheme="manual")
    assert "nan" not in summary(p, [0, 1]).splitlines()[2].split()[5:7]


@pytest.mark.parametrize("metric", [*PER_PARTITION, heterogeneity])
def test_non_partition_is_a_type_error_naming_the_parameter(metric):
    with pytest.raises(TypeError, match="`partition`"):
        metric([[0, 1]], [0, 1])


def test_summary_rejects_bad_arguments():
    p = iid(4, 2, seed=0)
    with pytest.raises(TypeError, match=r"`partitions\['bad'\]`"):
        summary({"ok": p, "bad": [[0, 1]]}, [0, 1, 0, 1])
    with pytest.raises(TypeError, match="`partitions`"):
        summary([p], [0, 1, 0, 1])
    with pytest.raises(ValueError, match="`partitions`"):
        summary({}, [0, 1, 0, 1])
    with pytest.raises(TypeError, match="`partition`"):
        size_stats("p")


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        ([0, 1, 0], ValueError, "`labels` has 3 entries"),
        ([0, -1, 0, 1], ValueError, "`labels` must be >= 0"),
        (np.zeros((4, 2, 2)), ValueError, "`labels` must be class ids"),
        ([[0, 2], [1, 0], [0, 1], [1, 1]], ValueError, "multi-hot"),
        (["a", "b", "c", "d"], TypeError, "`labels`"),
    ],
)
def test_bad_labels_are_rejected(labels, error, match):
    with pytest.raises(error, match=match):
        emd(iid(4, 2, seed=0), labels)
