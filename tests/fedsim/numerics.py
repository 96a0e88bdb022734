"""How the tests compare two engines' models: exactly in float64, in norm in float32 (DESIGN "Numerics")."""

import pytest
import torch

#: float64 results of two arithmetically equal computations: observed <= 1e-15 after a few rounds
EXACT = {"rtol": 1e-10, "atol": 1e-10}


def relative_distance(first, second) -> float:
    """Return ||first - second|| / ||second|| over all tensors together."""
    difference = torch.sqrt(sum(((a.double() - b.double()) ** 2).sum() for a, b in zip(first, second, strict=True)))
    return float(difference / torch.sqrt(sum((b.double() ** 2).sum() for b in second)))


def assert_rows_equal_but_sums(got: list[dict], want: list[dict], rel: float) -> None:
    """Assert two runs' metrics rows are equal but for wall time and losses, which may differ by ``rel``.

    For two computations whose models differ only by the order of a floating-point sum.
    """
    losses = ["train_loss", "test_loss"]
    without = [[{key: value for key, value in row.items() if key not in ("wall_s", *losses)} for row in rows]
               for rows in (got, want)]
    assert without[0] == without[1]
    for got_row, want_row in zip(got, want, strict=True):
        assert [got_row[name] for name in losses] == pytest.approx([want_row[name] for name in losses], rel=rel)
