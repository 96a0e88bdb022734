"""Feature-noise skew (NIID-Bench): a noise level per partition, applied later as a data transform."""

from __future__ import annotations

import numpy as np

from ._checks import check_integer, check_number


def feature_noise_levels(num_partitions: int, sigma: float) -> np.ndarray:
    """Return the Gaussian noise standard deviation of each partition, ``sigma * i / (K - 1)``.

    Partition 0 gets clean data and partition ``K - 1`` gets noise of standard deviation
    ``sigma``, as in NIID-Bench (Li et al., "Federated Learning on Non-IID Data Silos: An
    Experimental Study", ICDE 2022). The labels are split separately (usually IID); the
    noise is added to the inputs of partition ``i`` when its batches are drawn.

    Parameters
    ----------
    num_partitions : int
        Number of partitions, >= 1. A single partition gets level 0.
    sigma : float
        The largest noise level, >= 0.

    Examples
    --------
    >>> feature_noise_levels(5, 0.1).round(3).tolist()
    [0.0, 0.025, 0.05, 0.075, 0.1]
    """
    num_partitions = check_integer("num_partitions", num_partitions)
    sigma = check_number("sigma", sigma, low=0.0)
    if num_partitions == 1:
        return np.zeros(1)
    return sigma * np.arange(num_partitions) / (num_partitions - 1)
