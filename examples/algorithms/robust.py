"""Robust aggregation (Yin et al., "Byzantine-Robust Distributed Learning", ICML 2018), on fedsim's public API.

The server combines the round's trained models coordinate by coordinate: the median, or the
mean of what is left once the ``beta`` share of largest and of smallest values is dropped. The
clients train as FedAvg's do; only `Algorithm.aggregate` changes. Run it with::

    fedsim run --strategy examples/algorithms/robust.py:TrimmedMean --algorithm-option beta=0.2 ...
"""

import math
from fractions import Fraction

import torch

from fedsim.algorithms import Algorithm, Option


def sorted_coordinates(models):
    """Yield, per tensor, the clients' values stacked along a first axis and sorted along it."""
    for tensors in zip(*models):
        yield torch.stack(tensors).sort(dim=0).values


class Median(Algorithm):
    """The coordinate-wise median of the clients' models (the mean of the two middle values for an even count)."""

    name = "median"

    def aggregate(self, models, weights, global_state, clients):
        count = len(models)
        return [(values[(count - 1) // 2] + values[count // 2]) / 2 for values in sorted_coordinates(models)]


def trimmed_count(beta, count):
    """Return how many of ``count`` values a ``beta``-trimmed mean drops at each end: floor(beta count), exactly.

    ``beta`` is taken as the decimal it was written as (its shortest repr), so that 0.29 of 100
    is 29: the product in floating point, 28.999999999999996, would floor to 28. At least one
    value stays.

    Examples
    --------
    >>> trimmed_count(0.29, 100), 0.29 * 100
    (29, 28.999999999999996)
    >>> trimmed_count(0.1, 10), trimmed_count(0.3, 7)
    (1, 2)
    """
    return min(math.floor(Fraction(repr(float(beta))) * count), (count - 1) // 2)


class TrimmedMean(Algorithm):
    """The coordinate-wise beta-trimmed mean: drop the floor(beta m) largest and smallest of m values, average the rest."""

    name = "trimmed-mean"
    options = {"beta": Option(0.1, low=0.0, high=0.5, help="share of the largest, and of the smallest, values "
                                                           "dropped at each coordinate")}

    def aggregate(self, models, weights, global_state, clients):
        count = len(models)
        dropped = trimmed_count(self.option("beta"), count)
        return [values[dropped : count - dropped].mean(dim=0) for values in sorted_coordinates(models)]
