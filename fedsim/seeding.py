"""Independent, reproducible random streams derived from one base seed."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(seed: int, *keys: int) -> int:
    """Return a 63-bit seed for the stream named by ``keys`` (e.g. round, client) under ``seed``.

    Uses ``numpy.random.SeedSequence`` so that nearby keys give unrelated streams, unlike
    ``seed + client``. The number of keys is part of the entropy: ``SeedSequence`` pads its
    input with zeros, so ``(seed, a)`` and ``(seed, a, 0)`` would otherwise be one stream.

    Examples
    --------
    >>> derive_seed(0, 1, 2) == derive_seed(0, 1, 2) != derive_seed(0, 2, 1)
    True
    >>> derive_seed(0, 1) != derive_seed(0, 1, 0)
    True
    """
    state = np.random.SeedSequence([int(seed), len(keys), *map(int, keys)]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def torch_generator(seed: int, *keys: int) -> torch.Generator:
    """Return a CPU ``torch.Generator`` seeded with ``derive_seed(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))
