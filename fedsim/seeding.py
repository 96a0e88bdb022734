"""Independent, reproducible random streams derived from one base seed, named in one table."""

from __future__ import annotations

import enum

import numpy as np
import torch


class Stream(enum.IntEnum):
    """The key of every random stream a run draws from, so that no two uses share one by accident.

    Each stream is ``derive_seed(seed, Stream.X, *keys)`` with the keys listed here; every engine
    draws from the same streams, which is what makes their runs comparable number for number.
    """

    MODEL = 0x30DE1
    """The initial model (no further keys): the same for every strategy and engine."""
    SAMPLING = 0xC0407
    """The clients a round samples (round), or those an asynchronous server sends the model to at its n-th
    dispatch (n): with every client free, none with an empty shard, and a round's number of places, the same
    draw as round n's."""
    SHUFFLE = 0x5EED
    """A rank's shuffle of its shard (epoch, rank, cycle), for allreduce/reweighted and `ShardSampler`."""
    STEP_DATA = 0x57E9
    """One rank's augmentation and feature noise at one global step (step, rank)."""
    STEP_DROPOUT = 0x57EA
    """Dropout and other global-RNG draws of one global step: one rank's (step, rank), a fused forward's (step)."""
    CLIENT_DATA = 0xC11E
    """One client's shuffles, augmentation and noise in one round (round, client)."""
    CLIENT_DROPOUT = 0xC11F
    """Dropout and other global-RNG draws of one client in one round (round, client), or of the one forward of a
    round's one-step clients (round)."""
    CLIENT_LOSS = 0xD409
    """Which of a round's sampled clients fail to return, with ``client_dropout`` (round)."""
    STRAGGLERS = 0x5796
    """Which of a round's clients straggle (round), and how much work each does (round, client)."""
    DP_NOISE = 0xD9A0
    """Client-level DP's noise on a round's clipped sum, then on its count of unclipped updates (round)."""
    PERSONALIZE = 0xF17E
    """The base seed of personalized evaluation's fine-tuning (no further keys): each client's streams
    derive from it as its training's derive from the run's seed, so the two never share one."""
    CLOCK = 0xC10C
    """Each client's compute speed (0) and link bandwidth (1) on the simulated clock, drawn once per run."""


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
