import numpy as np
import pytest


@pytest.fixture
def mnist_like_labels():
    """60,000 labels, 6,000 per class, in a shuffled order."""
    return np.random.default_rng(0).permutation(np.repeat(np.arange(10), 6000))
