"""What a round did (`RoundStats`, which the engines fill) and where a run stands (`Progress`, which a checkpoint keeps)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class RoundStats:
    """What one round did: samples forwarded, summed training loss, bytes each way, steps or clients."""

    samples: int = 0
    loss_sum: float = 0.0
    bytes_up: int = 0
    bytes_down: int = 0
    steps: int = 0
    clients: int = 0
    #: the first client (or rank) whose loss was not finite, where the engine names them ("client 3")
    nonfinite: str = ""
    #: FedAvg's round: sampled clients whose work it did not take (they failed to return, returned after the
    #: deadline or after the round had its clients), and stragglers
    dropped: int = 0
    stragglers: int = 0
    #: the round's seconds on the simulated clock (`fedsim.clock`)
    sim_s: float = 0.0
    #: asynchronous rounds: the summed and largest staleness of the updates taken, and the server steps so far
    staleness_sum: int = 0
    staleness_max: int = 0
    server_steps: int | None = None
    #: client-level DP: the clip norm the round used, and the epsilon spent once it was released
    dp_clip: float | None = None
    epsilon: float | None = None

    @property
    def train_loss(self) -> float:
        """Mean training loss per sample forwarded this round."""
        return self.loss_sum / max(self.samples, 1)

    def add_client(self, samples: int, loss_sum: float, steps: int, where: str = "") -> None:
        """Count one client's local training: samples forwarded, their summed loss, optimizer steps.

        ``where`` names the client ("client 3"); the first whose loss is not finite is kept in `nonfinite`.
        """
        self.samples += samples
        self.loss_sum += loss_sum
        self.steps += steps
        self.note_nonfinite(loss_sum, where)

    def note_nonfinite(self, loss_sum: float, where: str) -> None:
        """Keep ``where`` as the round's first non-finite loss, if ``loss_sum`` is not finite and none was kept."""
        if where and not self.nonfinite and not math.isfinite(loss_sum):
            self.nonfinite = where

    def count_step(self, batch_sizes, param_bytes: int, buffer_bytes: int) -> None:
        """Count one allreduce or reweighted step: its samples, each active rank's gradient up and model down."""
        active = sum(1 for size in batch_sizes if size)
        self.samples += sum(batch_sizes)
        self.bytes_up += active * param_bytes
        self.bytes_down += active * (param_bytes + buffer_bytes)
        self.steps += 1


@dataclass
class Progress:
    """Where a run stands after its last recorded round; what a checkpoint resumes from.

    Attributes
    ----------
    round : int
        Rounds finished.
    samples_seen : int
        Samples forwarded so far.
    scheduled_samples : int
        FedAvg's cumulative work so far (`fedsim.schedule.SampleGrid`): the grid every strategy
        reports on.
    bytes_up, bytes_down : int
        Bytes sent by the ranks or clients, and to them.
    wall_s, eval_s : float
        Seconds spent in rounds, and the part of them spent evaluating.
    sim_time_s : float
        Seconds on the simulated clock (`fedsim.clock`).
    """

    round: int = 0
    samples_seen: int = 0
    scheduled_samples: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    wall_s: float = 0.0
    eval_s: float = 0.0
    sim_time_s: float = 0.0

    @property
    def bytes_communicated(self) -> int:
        """Bytes both ways."""
        return self.bytes_up + self.bytes_down
