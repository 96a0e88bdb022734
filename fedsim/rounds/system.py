"""System heterogeneity in FedAvg's round: clients that fail to return, and stragglers that do partial work.

Both are drawn from the run's seed and the round alone (`fedsim.seeding.Stream`), so every engine,
and a Flower node training its own client, draws the same: the server knows which clients will
not return, and a node knows how much work its client does, without a message saying so.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..seeding import Stream, derive_seed


def dropped_clients(config, drawn: list[int], round_index: int) -> list[int]:
    """Return the clients of ``drawn`` (a round's sample) that fail to return, each with chance ``client_dropout``.

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> dropped_clients(RunConfig(client_dropout=0.0), [0, 1, 2], 0)
    []
    """
    if not config.client_dropout:
        return []
    rng = np.random.default_rng(derive_seed(config.seed, Stream.CLIENT_LOSS, round_index))
    fails = rng.random(len(drawn)) < config.client_dropout
    return [client for client, failed in zip(drawn, fails) if failed]


def stragglers(config, drawn: list[int], round_index: int) -> list[int]:
    """Return the ``round(stragglers * len(drawn))`` clients of ``drawn`` that do partial work this round."""
    count = round(config.stragglers * len(drawn))
    if not count:
        return []
    rng = np.random.default_rng(derive_seed(config.seed, Stream.STRAGGLERS, round_index))
    return sorted(int(client) for client in rng.choice(drawn, size=count, replace=False))


def partial_work(config, training, client: int, round_index: int):
    """Return a straggler's `fedsim.client.LocalTraining`: local epochs drawn uniformly from 1 to the run's
    (FedProx's experiments), or local steps from 1 to tau."""
    rng = np.random.default_rng(derive_seed(config.seed, Stream.STRAGGLERS, round_index, client))
    if training.local_steps is None:
        return dataclasses.replace(training, epochs=int(rng.integers(1, training.epochs + 1)))
    return dataclasses.replace(training, local_steps=int(rng.integers(1, training.local_steps + 1)))
