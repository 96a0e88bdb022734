"""Assertions and hypothesis strategies shared by the partition tests."""

import numpy as np
from hypothesis import strategies as st


def assert_covers_each_index_once(partition, num_samples, *, exhaustive=True):
    """Every index lies in at most one part (exactly one if ``exhaustive``), parts sorted and in range."""
    flat = np.concatenate(list(partition)) if len(partition) else np.zeros(0, dtype=np.int64)
    counts = np.bincount(flat, minlength=num_samples)
    assert counts.size == num_samples
    assert counts.max() <= 1
    if exhaustive:
        assert counts.min() == 1
    for part in partition:
        assert part.dtype == np.int64
        assert np.all(np.diff(part) > 0)


@st.composite
def label_arrays(draw, min_size=20, max_size=400, max_classes=12, min_per_class=8):
    """Random integer label arrays in which each class appears at least ``min_per_class`` times."""
    num_classes = draw(st.integers(2, max_classes))
    size = draw(st.integers(max(min_size, num_classes * min_per_class), max(max_size, num_classes * min_per_class)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    guaranteed = np.repeat(np.arange(num_classes), min_per_class)
    rest = rng.integers(0, num_classes, size - guaranteed.size)
    return rng.permutation(np.concatenate([guaranteed, rest]))
