"""allreduce (as FedSGD) and reweighted on Flower: one Flower round per gradient step.

At step ``t`` the server sends the global parameters, and the BatchNorm statistics every rank
starts from, to each rank with a batch at ``t`` (`fedsim.schedule.RankSchedule`); each client
returns the gradient of its batch's mean loss and its updated statistics; the server combines
the gradients with the shared weights and server step, exactly as
`fedsim.rounds.gradient.GradientRounds` combines its ranks' at the same step. A
fedsim round is the steps that bring the samples seen up to FedAvg's grid, so Flower runs as
many rounds as the pending fedsim rounds have steps, planned before the first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid

from .client_app import config_json
from .records import buffer_names, from_record, gradient_names, to_record
from .strategy import FedsimStrategy


@dataclass(frozen=True)
class PlannedRound:
    """A fedsim round and the global steps it takes (possibly none, after a step that overshot)."""

    index: int
    steps: range


class GradientSteps(FedsimStrategy):
    """allreduce or reweighted, one gradient step per Flower round, reproducible step for step.

    Takes the parameters of `fedsim.engines.flower.strategy.FedsimStrategy`, with ``rounds``
    a `fedsim.rounds.gradient.GradientRounds` whose model is the global model.
    A rank whose client does not reply is left out of the step as a rank that has joined is
    under DDP's ``Join``: its share of the weights goes with it.
    """

    def __init__(self, rounds, names, nodes, recorder, evaluation):
        super().__init__(rounds, names, nodes, recorder, evaluation)
        self.gradient_names, self.buffer_names = gradient_names(rounds.model), buffer_names(rounds.model)
        self.plan = plan_rounds(rounds, recorder)
        self.first_step = rounds.step_count
        self._recorded = 0  # how many of the planned rounds are recorded
        self._active: list[int] = []
        with torch.no_grad():  # the combined gradient is written into .grad, which the server never computes
            for param in rounds.params:
                if param.grad is None:
                    param.grad = torch.zeros_like(param)

    @property
    def num_rounds(self) -> int:
        """One Flower round per planned step."""
        return sum(len(planned.steps) for planned in self.plan)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """Send the global parameters and the authority's statistics to the ranks with a batch at this step."""
        rounds, step = self.rounds, self.first_step + server_round - 1
        planned = self.plan[self._recorded]  # the earlier rounds are recorded by now (`evaluate_fn`)
        if step == planned.steps.start:
            self.begin_round(planned.index)
            rounds.begin_round()
        _, self._active = rounds.begin_step(step)
        start = rounds.start_buffers(self._active)
        state = [*rounds.global_state[: len(rounds.global_state) - len(start)], *start]
        config["fedsim-step"] = step
        config["fedsim-config"] = config_json(rounds.config)
        content = RecordDict({"arrays": to_record(self.names, state), "config": config})
        return self.messages(self._active, content, grid)

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Combine the ranks' gradients in rank order, step the server, keep the authority's statistics."""
        rounds, step, stats = self.rounds, self.first_step + server_round - 1, self._stats
        clients, by_client = self.replies_in_order(replies, self.plan[self._recorded].index, self._active)
        gradients, updated, rank_means = [], {}, []
        for client in clients:
            content = by_client[client]
            gradients.append(from_record(content["arrays"], self.gradient_names, rounds.params))
            if rounds.buffers:
                updated[client] = from_record(content["arrays"], self.buffer_names, rounds.buffers)
            rank_means.append(float(content["metrics"]["mean-loss"]))
            loss_sum = float(content["metrics"]["loss-sum"])
            stats.loss_sum += loss_sum
            stats.note_nonfinite(loss_sum, f"rank {client}")  # the divergence line names it, as in-process
        rounds.keep_buffers(self._active, updated)
        if not clients:  # no rank came back: the model stays
            rounds.step_count += 1
            return None, None
        rounds.server.zero_grad()
        rounds.combine(gradients, clients, rank_means)
        sizes = rounds.schedule.batch_sizes(step)
        rounds.end_step(step, stats, [size if rank in by_client else 0 for rank, size in enumerate(sizes)])
        # beyond what a DDP step moves: the statistics come back up, and a lost client was sent the model too
        stats.bytes_up += len(clients) * rounds.buffer_bytes
        stats.bytes_down += (len(self._sent) - len(clients)) * (rounds.param_bytes + rounds.buffer_bytes)
        return None, MetricRecord({"train-loss": stats.train_loss})

    def evaluate_fn(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Flower's ``evaluate_fn``: record every planned round whose steps are done by now.

        Called with 0 before the first step, which records the rounds that take no step.
        """
        done, metrics = self.first_step + server_round, None
        while self._recorded < len(self.plan) and self.plan[self._recorded].steps.stop <= done:
            planned = self.plan[self._recorded]
            if not planned.steps:
                self.begin_round(planned.index)
            metrics = self.record(planned.index, self._stats)
            self._recorded += 1
        return metrics


def plan_rounds(rounds, recorder) -> list[PlannedRound]:
    """Return the recorder's pending rounds with the steps each takes, as `GradientRounds.train_round` takes them.

    A round steps until the samples seen reach FedAvg's cumulative grid (`RankSchedule.round_steps`).
    """
    schedule, progress = rounds.schedule, recorder.progress
    step, seen, target = rounds.step_count, progress.samples_seen, progress.scheduled_samples
    plan = []
    for round_index in recorder.pending_rounds():
        target += recorder.grid.samples(recorder.partition.sizes, round_index)
        steps = schedule.round_steps(step, seen, target)
        seen += sum(sum(schedule.batch_sizes(s)) for s in steps)
        step = steps.stop
        plan.append(PlannedRound(round_index, steps))
    return plan
