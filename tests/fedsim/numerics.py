"""How the tests compare two engines' models: exactly in float64, in norm in float32 (DESIGN "Numerics")."""

import torch

#: float64 results of two arithmetically equal computations: observed <= 1e-15 after a few rounds
EXACT = {"rtol": 1e-10, "atol": 1e-10}


def relative_distance(first, second) -> float:
    """Return ||first - second|| / ||second|| over all tensors together."""
    difference = torch.sqrt(sum(((a.double() - b.double()) ** 2).sum() for a, b in zip(first, second, strict=True)))
    return float(difference / torch.sqrt(sum((b.double() ** 2).sum() for b in second)))
