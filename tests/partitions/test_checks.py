"""The argument checks every layer shares: NumPy scalars are numbers, booleans are not."""

import json

import numpy as np
import pytest

import partitions
from partitions.metrics import emd
from partitions._checks import check_class_labels, check_integer, check_label_matrix, check_number


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_integer_check_accepts_numpy_integers(value):
    assert check_integer("rounds", value) == 3
    assert type(check_integer("rounds", value)) is int


@pytest.mark.parametrize(
    "value, error, match",
    [
        (True, TypeError, r"`count` must be an integer, got True \(bool\)"),
        (np.bool_(True), TypeError, r"`count` must be an integer, got .*True"),
        (3.0, TypeError, r"`count` must be an integer, got 3.0 \(float\)"),
        ("3", TypeError, r"`count` must be an integer, got '3' \(str\)"),
        (0, ValueError, "`count` must be >= 1, got 0"),
        (np.int64(-2), ValueError, "`count` must be >= 1, got -2"),
    ],
)
def test_integer_check_refuses(value, error, match):
    with pytest.raises(error, match=match):
        check_integer("count", value)


@pytest.mark.parametrize(
    "call",
    [
        lambda i, f: partitions.iid(np.arange(40) % 4, i(4), seed=i(1)),
        lambda i, f: partitions.pathological(np.arange(40) % 4, i(4), i(2), seed=i(0)),
        lambda i, f: partitions.shards(np.arange(40) % 4, i(4), i(2), seed=i(0)),
        lambda i, f: partitions.dirichlet(np.arange(40) % 4, i(2), f(1.0), min_partition_size=i(1), max_tries=i(3),
                                          seed=i(0)),
        lambda i, f: partitions.feature_noise_levels(i(3), f(0.5)),
    ],
    ids=["iid", "pathological", "shards", "dirichlet", "feature_noise"],
)
def test_partitioners_give_numpy_scalars_the_result_of_plain_numbers(call):
    """``i`` and ``f`` make the integer and float arguments: Python's, or NumPy's scalars."""
    plain, numpy = call(int, float), call(np.int64, np.float32)
    if isinstance(plain, partitions.Partition):
        assert numpy == plain
        # what partition.json holds: the same parameters and seed, as plain numbers
        assert json.dumps(numpy.to_dict()) == json.dumps(plain.to_dict())
    else:
        assert numpy.dtype == plain.dtype and numpy.tolist() == plain.tolist()


@pytest.mark.parametrize(
    "value, match",
    [
        (float("nan"), "`alpha` must be a finite number > 0, got nan"),
        (float("inf"), "`alpha` must be a finite number > 0, got inf"),
        (0.0, "`alpha` must be a finite number > 0, got 0.0"),
        (np.float64(-1.0), "`alpha` must be a finite number > 0, got -1.0"),
    ],
)
def test_number_check_refuses_nan_and_out_of_range_as_bad_values(value, match):
    with pytest.raises(ValueError, match=match):
        check_number("alpha", value, low=0.0, low_open=True)


def test_number_check_accepts_numpy_floats_and_refuses_booleans():
    assert check_number("lr", np.float32(0.5), low=0.0) == 0.5
    with pytest.raises(TypeError, match="`lr` must be a number, got True"):
        check_number("lr", True, low=0.0)


@pytest.mark.parametrize("matrix", [[[1, 0], [0, 1]], [[True, False], [True, True]], np.eye(2, dtype=np.float32)])
def test_label_matrix_check_returns_booleans(matrix):
    assert check_label_matrix(matrix).dtype == bool
    assert check_class_labels(matrix).dtype == bool


@pytest.mark.parametrize(
    "matrix, error, match",
    [
        ([[0, 2], [1, 0]], ValueError, "`labels` must be multi-hot: every entry 0 or 1"),
        ([["a", "b"]], TypeError, "`labels` must be numeric or boolean"),
        (np.zeros((0, 3)), ValueError, "`labels` is empty"),
        (np.zeros((2, 2, 2)), ValueError, "`labels` must be class ids"),
    ],
)
def test_multi_hot_labels_are_checked_alike_by_partitioners_and_metrics(matrix, error, match):
    with pytest.raises(error, match=match):
        check_class_labels(matrix)
    if np.asarray(matrix).ndim == 2:
        with pytest.raises(error, match=match.replace("labels", "label_matrix")):
            partitions.multilabel_dirichlet(matrix, 1, 1.0, min_partition_size=0)
        with pytest.raises(error, match=match):
            emd(partitions.Partition([[0]], num_samples=max(len(matrix), 1), scheme="manual"),
                                   matrix)
