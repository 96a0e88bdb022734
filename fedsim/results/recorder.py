"""The recorder every engine feeds, one round at a time: start or resume, record a round, finish.

It owns the row schema of ``metrics.csv``, the summary, the checkpoint format and resume, so an
engine only trains and evaluates. Flower's strategy owns its own round loop, which is why
nothing here drives the rounds: the engine calls `Recorder.record_round` from wherever its
round ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass

import torch

from ..interrupts import RunDiverged, RunInterrupted, deferred_interrupt, stop_signal
from ..config.files import CODE_DIGESTS
from .client_eval import CLIENTS_CSV_COLUMNS, PERSONAL_COLUMNS, round_statistics, warn_small_test_sets
from .divergence import all_finite, divergence_advice
from .folder import CLIENTS_CSV, RunFolder
from .progress import Progress, RoundStats
from .summary import MULTILABEL_METRICS, summarize
from .tensorboard import TensorBoardRows
from ..references import code_digests
from ..clock import rules_the_run
from ..config.strategies import get_strategy
from ..schedule import SampleGrid, holdout_of

CHECKPOINT_FORMAT = 2


@dataclass
class Restored:
    """What a resumed run continues from: the global tensors and its engine's own state."""

    global_state: list[torch.Tensor]
    engine_state: dict


class Recorder:
    """Record a run round by round: rows, log, checkpoints, summary, and resume.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    partition : partitions.Partition
    out : str or Path, optional
        The run's folder (`fedsim.results.folder.RunFolder`); without it nothing is written.
    resume : bool, default False
        Continue from ``out``'s checkpoint (`start` returns it).
    multilabel : bool, default False
        The task is multi-label: rows carry its F1 and mAP columns, and its subset accuracy as
        ``test_accuracy``.
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth; the config's own by default. `fedsim.comparison` gives
        allreduce and reweighted FedAvg's grid, which is then recorded in ``config.json``.
    quiet : bool, default True
        No progress bar.
    """

    def __init__(self, config, partition, out=None, *, multilabel: bool = False, resume: bool = False,
                 grid: SampleGrid | None = None, quiet: bool = True):
        self.config, self.partition, self.multilabel = config, partition, multilabel
        self.resume, self.quiet = resume, quiet
        self.grid = grid or SampleGrid.from_config(config)
        self.folder = RunFolder(out) if out is not None else None
        self.progress = Progress()
        self.rows: list[dict] = []
        self.per_class: list[float] | None = None  # the last evaluation's accuracy of each class
        self.tensorboard = None  # the rows as TensorBoard scalars (``config.tensorboard``), opened by `start`
        self.checkpoint_round: int | None = None
        self.diverged: RunDiverged | None = None
        self._bar = None

    def start(self) -> Restored | None:
        """Write the run's config and partition (or check them when resuming); return what to resume from.

        Warns once when clients' local test sets are too small to measure them (`warn_small_test_sets`).
        """
        if self.partition.local_test is not None:
            warn_small_test_sets(self.partition)
        restored = None
        if self.folder is not None:
            extra = extra_record(self.config, self.grid)
            checkpoint = self.folder.start(self.config, self.partition, resume=self.resume, extra=extra)
            if checkpoint is not None:
                restored = self._restore(checkpoint)
            if self.config.tensorboard is not None:  # beside a results folder: one process of a run writes it
                self.tensorboard = TensorBoardRows(self.config.tensorboard, self.config.label,
                                                   None if restored is None else self.progress.round)
        if not self.quiet:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.config.rounds, initial=self.progress.round, desc=self.config.label,
                             unit="round", leave=True)
        return restored

    @contextlib.contextmanager
    def interruptible(self):
        """Turn Ctrl-C or SIGTERM inside the block into `RunInterrupted`, which says what is saved.

        Any error ends the progress bar's line first, so that its message starts a line of its own.
        """
        try:
            yield
        except KeyboardInterrupt as stop:
            if self._bar is not None:
                self._bar.close()
            folder = self.folder.path if self.folder is not None else None
            raise RunInterrupted(self.progress.round, self.config.rounds, self.checkpoint_round, folder,
                                 signum=stop_signal(stop)) from None
        except BaseException:
            if self._bar is not None:
                self._bar.close()
            raise

    def pending_rounds(self) -> range:
        """Return the indices of the rounds still to run."""
        return range(self.progress.round, self.config.rounds)

    def schedule_round(self, round_index: int) -> int:
        """Add round ``round_index``'s samples to the grid and return the cumulative target."""
        self.progress.scheduled_samples += self.grid.samples(self.partition.sizes, round_index,
                                                             holdout_of(self.partition))
        return self.progress.scheduled_samples

    def evaluation_due(self, round_index: int) -> bool:
        """Whether round ``round_index`` ends with an evaluation (every ``eval_every``, and the last)."""
        return (round_index + 1) % self.config.eval_every == 0 or round_index + 1 == self.config.rounds

    def client_evaluation_due(self, round_index: int) -> bool:
        """Whether round ``round_index`` ends with an evaluation on the clients' local test sets (when they exist):
        every ``eval_clients_every`` (by default ``eval_every``), and the last."""
        if self.partition.local_test is None:
            return False
        every = self.config.eval_clients_every or self.config.eval_every
        return (round_index + 1) % every == 0 or round_index + 1 == self.config.rounds

    def record_round(self, stats: RoundStats, metrics: dict | None, *, wall_s: float, eval_s: float = 0.0,
                     global_state=None, engine_state=None, clients: list[dict] | None = None) -> dict:
        """Add a finished round: its row, its log line and, when due, a checkpoint.

        Parameters
        ----------
        stats : RoundStats
        metrics : dict or None
            `fedsim.client.evaluate`'s output, or ``None`` for a round without evaluation.
        wall_s, eval_s : float
            Seconds the round took, and the part of them spent evaluating.
        global_state : list of Tensor, optional
            The global tensors after the round (needed for a checkpoint).
        engine_state : callable, optional
            Returns the engine's own state to checkpoint (server optimizer, step count).
        clients : list of dict, optional
            `fedsim.results.client_eval.evaluate_clients`'s output, when the round evaluated on
            the clients' local test sets: written to ``clients.csv``, its statistics to the row.

        Returns
        -------
        dict
            The round's row.

        Raises
        ------
        fedsim.interrupts.RunDiverged
            When the round's training or test loss, or the global model, is not finite: nothing of
            the round is written, the summary says so (`diverge`).
        """
        self.check_finite(stats, metrics, global_state)
        progress = self.progress
        progress.round += 1
        progress.samples_seen += stats.samples
        progress.bytes_up += stats.bytes_up
        progress.bytes_down += stats.bytes_down
        progress.wall_s += wall_s
        progress.eval_s += eval_s
        progress.sim_time_s += stats.sim_s
        row = self._row(stats.train_loss, metrics)
        if get_strategy(self.config.strategy).local_training:  # the clock times FedAvg's clients
            row["sim_time_s"] = progress.sim_time_s
        if self.config.client_dropout or self.config.round_deadline is not None or self.config.over_select:
            row["dropped_clients"] = stats.dropped
        if stats.server_steps is not None:  # asynchronous: the updates taken since the last row
            row["server_steps"], row["staleness_max"] = stats.server_steps, stats.staleness_max
            row["staleness_mean"] = stats.staleness_sum / max(stats.clients, 1)
        if self.config.stragglers:
            row["stragglers"] = stats.stragglers
        if self.config.client_sampling == "poisson":  # a Poisson round's size varies
            row["clients"] = stats.clients
        if stats.epsilon is not None:
            row["dp_clip"], row["epsilon"] = stats.dp_clip, stats.epsilon
        if metrics is not None and "per_class_accuracy" in metrics:
            self.per_class = list(metrics["per_class_accuracy"])
        if clients is not None:
            row.update(round_statistics(clients, self.config.client_target, holdout_of(self.partition)))
        self.rows.append(row)
        if self.folder is not None:
            with deferred_interrupt():  # the rows, log and checkpoint of a round land together
                self.folder.write_rows(self.rows)
                if self.tensorboard is not None:
                    self.tensorboard.add(row)
                if clients is not None:
                    columns = CLIENTS_CSV_COLUMNS + (PERSONAL_COLUMNS if "personal_accuracy" in clients[0] else ())
                    self.folder.append_table(CLIENTS_CSV, columns, [{"round": progress.round, **client}
                                                                    for client in clients])
                self.folder.log(_log_line(row))
                last = progress.round == self.config.rounds
                if global_state is not None and (progress.round % self.config.checkpoint_every == 0 or last):
                    self.folder.save_checkpoint(self._checkpoint(global_state, engine_state() if engine_state else {}))
                    self.checkpoint_round = progress.round
        if self._bar is not None:
            self._bar.set_postfix_str(f"acc {row['test_accuracy']:.3f}", refresh=False)
            self._bar.update(1)
        return row

    def check_finite(self, stats: RoundStats, metrics: dict | None, global_state=None) -> None:
        """Call `diverge` if the round's summed losses or ``global_state`` are not finite.

        Once a round, on what the round has already summed, rather than at every step: a
        non-finite step leaves a non-finite sum or model (SGD carries a NaN or an infinity
        into every parameter it touches), so the round where it appeared is still found.
        """
        test_loss = (metrics or {}).get("loss", 0.0)
        if not math.isfinite(stats.loss_sum):
            self.diverge(f"the training loss is {stats.loss_sum}", stats.nonfinite)
        if not math.isfinite(test_loss):
            self.diverge(f"the test loss is {test_loss}")
        if global_state is not None and not all_finite(global_state):
            self.diverge("the global model holds values that are not finite", stats.nonfinite)

    def diverge(self, what: str, where: str = "") -> None:
        """Stop the run at the round being recorded: write the summary with ``diverged``, raise `RunDiverged`.

        No row of the round is written and no checkpoint: ``checkpoint.pt`` keeps the last finite model.
        """
        if self._bar is not None:
            self._bar.close()
        self.diverged = RunDiverged(self.progress.round + 1, what, where=where, checkpoint_round=self.checkpoint_round,
                                    folder=self.folder.path if self.folder is not None else None,
                                    advice=divergence_advice(self.config))
        self.diverged.rows, self.diverged.summary = list(self.rows), self.summary()
        if self.folder is not None:
            with deferred_interrupt():
                self.folder.write_summary({self.config.label: self.diverged.summary})
        raise self.diverged

    def summary(self, extra: dict | None = None) -> dict:
        """Return the run's summary so far (`summarize`), with whether and where it diverged."""
        diverged = self.diverged
        return {
            **summarize(self.rows, self.progress, self.partition.num_partitions, self.config.target_accuracy),
            **(extra or {}),
            # single-label runs: each class's test accuracy at the last evaluation of this process
            # (the last round's, once a run ends), null for a class the test split lacks
            **({} if self.per_class is None else {"final_per_class_test_accuracy": self.per_class}),
            "diverged": diverged is not None,
            "diverged_round": None if diverged is None else diverged.round,
            "diverged_where": None if diverged is None else diverged.where or None,
            "diverged_reason": None if diverged is None else diverged.what,
        }

    def finish(self, global_state, extra: dict | None = None) -> dict:
        """Write the summary (with an engine's ``extra`` entries) and the final model; return the summary."""
        if self._bar is not None:
            self._bar.close()
        summary = self.summary(extra)
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.folder is not None:
            with deferred_interrupt():
                self.folder.write_summary({self.config.label: summary})
                self.folder.save_model(global_state)
            from .plots import learning_curves

            learning_curves({self.config.label: self.rows}, path=self.folder.path / "learning_curves.png",
                            title=run_title(self.config, self.partition),
                            against=("round", "bytes", "time") if rules_the_run(self.config) else ("round", "bytes"))
        return summary

    def _row(self, train_loss: float, metrics: dict | None) -> dict:
        metrics = metrics or {}
        multilabel = self.multilabel
        progress = self.progress
        row = {
            "strategy": self.config.label,
            "round": progress.round,
            "samples_seen": progress.samples_seen,
            "bytes_communicated": progress.bytes_communicated,
            "bytes_up": progress.bytes_up,
            "bytes_down": progress.bytes_down,
            # multi-label runs report subset accuracy (every label right) as their accuracy
            "test_accuracy": metrics.get("subset_accuracy" if multilabel else "accuracy", math.nan),
            "test_loss": metrics.get("loss", math.nan),
            "train_loss": train_loss,
            "wall_s": progress.wall_s,
        }
        if multilabel:
            for key in MULTILABEL_METRICS:
                row[f"test_{key}"] = metrics.get(key, math.nan)
        return row

    def _checkpoint(self, global_state, engine_state: dict) -> dict:
        return {
            "format": CHECKPOINT_FORMAT,
            "progress": dataclasses.asdict(self.progress),
            "rows": [dict(row) for row in self.rows],
            "global_state": [t.detach().cpu().clone() for t in global_state],
            "engine": engine_state,
        }

    def _restore(self, checkpoint: dict) -> Restored:
        if checkpoint.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"cannot resume from {self.folder.path / 'checkpoint.pt'}: its format is "
                f"{checkpoint.get('format')!r}, this version reads format {CHECKPOINT_FORMAT}; start a new run"
            )
        self.progress = Progress(**checkpoint["progress"])
        self.rows = [dict(row) for row in checkpoint["rows"]]
        self.checkpoint_round = self.progress.round
        # the clients' rows of rounds after the checkpoint are evaluated again: their old rows go
        kept = [row for row in self.folder.read_table(CLIENTS_CSV) if row["round"] <= self.progress.round]
        if kept:
            self.folder.write_table(CLIENTS_CSV, list(kept[0]), kept)
        elif (self.folder.path / CLIENTS_CSV).exists():
            (self.folder.path / CLIENTS_CSV).unlink()
        # rounds logged after the checkpoint are replayed: their old lines go
        self.folder.rewrite_log([*map(_log_line, self.rows), f"resumed from the checkpoint of round {self.progress.round}"])
        return Restored(checkpoint["global_state"], checkpoint["engine"])


def extra_record(config, grid: SampleGrid | None) -> dict:
    """Return what ``config.json`` records beside the config, which a resumed run must match.

    ``grid``, when it is not the config's own, and the SHA-256 of each file the config names by
    reference (``--strategy path/to/file.py:Name``), so that a run is not resumed with other code.
    """
    record = {}
    if grid is not None and grid != SampleGrid.from_config(config):
        record["sample_grid"] = dataclasses.asdict(grid)
    if digests := code_digests(config):
        record[CODE_DIGESTS] = digests
    return record


def run_title(config, partition) -> str:
    """Return a figure title naming the data, the model and the partition with its parameters."""
    return f"{config.dataset}, {config.model}, {partition.describe()}, K={partition.num_partitions}"


def _log_line(row) -> str:
    return (f"round {row['round']} samples {row['samples_seen']} bytes {row['bytes_communicated']} "
            f"test_accuracy {row['test_accuracy']:.4f} test_loss {row['test_loss']:.4f} "
            f"train_loss {row['train_loss']:.4f} wall_s {row['wall_s']:.2f}")
