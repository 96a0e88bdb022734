"""Independent, reproducible random streams derived from one base seed."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(seed: int, *keys: int) -> int:
    """Return a 63-bit seed for the stream named by ``keys`` (e.g. round, client) under ``seed``.

    Uses ``numpy.random.SeedSequence`` so that nearby keys give unrelated streams, unlike
    ``seed + client``.

    Examples
    --------
    >>> derive_seed(0, 1, 2) == derive_seed(0, 1, 2) != derive_seed(0, 2, 1)
    True
    """
    state = np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def torch_generator(seed: int, *keys: int) -> torch.Generator:
    """Return a CPU ``torch.Generator`` seeded with ``derive_seed(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))
