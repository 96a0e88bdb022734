"""System heterogeneity in FedAvg's round: clients that fail to return, stragglers that do partial work, and the
round's time on the simulated clock, with its deadline and over-selection.

Each is drawn from the run's seed and the round alone (`fedsim.seeding.Stream`), or follows from
the clock (`fedsim.clock`), so every engine, and a Flower node training its own client, finds the
same: the server knows which clients will not return, or return too late, and a node knows how
much work its client does, without a message saying so.
"""

from __future__ import annotations

import dataclasses
import math

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


@dataclasses.dataclass(frozen=True)
class RoundTiming:
    """Where a round's drawn clients end up on the simulated clock, and how long the round takes.

    Attributes
    ----------
    kept : list of int
        The clients whose models the round takes, in partition order.
    failed : list of int
        Those that never return (``client_dropout``).
    late : list of int
        Those that would return after ``round_deadline``: dropped at it.
    unselected : list of int
        Over-selected clients that returned after the round had its clients (``over_select``).
    seconds : float
        The round's simulated time: until its last kept client returns, until the deadline where a
        client failed or was late, or until the last client it needs where it over-selected.
    """

    kept: list[int]
    failed: list[int]
    late: list[int]
    unselected: list[int]
    seconds: float

    @property
    def lost(self) -> list[int]:
        """The clients sent the model whose work the round did not take."""
        return self.failed + self.late + self.unselected


def time_round(drawn: list[int], failed: list[int], seconds: dict, *, deadline: float | None = None,
               wanted: int | None = None) -> RoundTiming:
    """Return a synchronous round's `RoundTiming`: who returns in time, who is kept, and when the round ends.

    Parameters
    ----------
    drawn : list of int
        The clients sent the model.
    failed : list of int
        Those of ``drawn`` that never return.
    seconds : dict of int to float
        Each drawn client's time to receive, train and send (`fedsim.clock.ClientClock.seconds`).
    deadline : float, optional
        The round's deadline: a client whose time is beyond it is dropped at it.
    wanted : int, optional
        With over-selection, the clients the round needs: it keeps the first ``wanted`` to
        return, clients that tie in time by their ids, and ends when the last of them does.

    Examples
    --------
    >>> time_round([0, 1, 2], [], {0: 4.0, 1: 1.0, 2: 2.0}, deadline=1.5)
    RoundTiming(kept=[1], failed=[], late=[0, 2], unselected=[], seconds=1.5)
    >>> time_round([0, 1, 2], [], {0: 4.0, 1: 1.0, 2: 2.0}, wanted=2)
    RoundTiming(kept=[1, 2], failed=[], late=[], unselected=[0], seconds=2.0)
    """
    failed = list(failed)
    returning = sorted((seconds[client], client) for client in drawn if client not in set(failed))
    on_time = [(time, client) for time, client in returning if deadline is None or time <= deadline]
    late = sorted(client for time, client in returning if deadline is not None and time > deadline)
    unselected = []
    if wanted is not None and len(on_time) >= wanted:
        on_time, unselected = on_time[:wanted], [client for _, client in on_time[wanted:]]
        end = on_time[-1][0] if on_time else 0.0
    elif deadline is not None and (late or failed):
        end = deadline  # the server cannot know that a client will not come
    else:
        end = max((time for time, _ in on_time), default=0.0)
    return RoundTiming(sorted(client for _, client in on_time), failed, late, unselected, end)


def cohort_size(fraction: float, participants: int) -> int:
    """Return the clients a round of ``fraction`` of the ``participants`` takes, as `fedsim.schedule.sample_clients`
    draws them: ``max(1, round(fraction x participants))``."""
    return max(1, int(round(fraction * participants)))


def over_selected_fraction(fraction: float, over_select: float, participants: int) -> float:
    """Return the fraction of the ``participants`` that a round with ``over_select`` samples: (1 + f) x its clients.

    Examples
    --------
    >>> over_selected_fraction(0.1, 0.3, 100) * 100, over_selected_fraction(0.5, 1.5, 10)
    (13.0, 1.0)
    """
    cohort = cohort_size(fraction, participants)
    return min(participants, math.ceil(round((1 + over_select) * cohort, 9))) / participants
