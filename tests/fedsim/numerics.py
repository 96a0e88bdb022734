"""How the tests compare two computations: exactly in float64, in norm in float32 (DESIGN "Numerics").

Two engines, two processes, two thread counts or two CPU kernels sum in different orders, so
their float results differ in the last bits however equal the arithmetic: nothing computed by
two such paths is compared with ``==``. Counts and names (rounds, samples, bytes, strategy) are.
"""

import math

import pytest
import torch

#: float64 results of two arithmetically equal computations: observed <= 1e-15 after a few rounds
EXACT = {"rtol": 1e-10, "atol": 1e-10}


def relative_distance(first, second) -> float:
    """Return ||first - second|| / ||second|| over all tensors together."""
    difference = torch.sqrt(sum(((a.double() - b.double()) ** 2).sum() for a, b in zip(first, second, strict=True)))
    return float(difference / torch.sqrt(sum((b.double() ** 2).sum() for b in second)))


def assert_rows_close(got: list[dict], want: list[dict], *, skip=()) -> None:
    """Assert two float64 runs' metrics rows agree: counts and names exactly, measured numbers within `EXACT`.

    ``wall_s``, a clock, is never compared; ``skip`` names more columns that legitimately differ.
    A loss or an accuracy is a float: two models within 1e-10 give losses within about 1e-10
    relative, and the same accuracy unless two logits of a test sample tie within 1e-10, which
    the tolerance then covers no better than ``==`` would. An evaluation that a round skipped is
    NaN in both rows.
    """
    ignored = {"wall_s", *skip}
    assert len(got) == len(want), f"{len(got)} rows against {len(want)}"
    for index, (got_row, want_row) in enumerate(zip(got, want)):
        assert got_row.keys() == want_row.keys(), f"row {index}: columns differ"
        columns = [key for key in want_row if key not in ignored]
        floats = [key for key in columns if isinstance(want_row[key], float) or isinstance(got_row[key], float)]
        exact = [key for key in columns if key not in floats]
        assert {key: got_row[key] for key in exact} == {key: want_row[key] for key in exact}, f"row {index}"
        assert all(math.isnan(got_row[key]) == math.isnan(want_row[key]) for key in floats), (
            f"row {index}: a number in one row is a skipped evaluation (NaN) in the other")
        assert [got_row[key] for key in floats] == pytest.approx(
            [want_row[key] for key in floats], rel=EXACT["rtol"], abs=EXACT["atol"], nan_ok=True), f"row {index}"
