"""A run's folder: config, partition, metrics, summary and checkpoints, every file written atomically.

Layout of ``DIR``::

    config.json      every setting needed to rerun (RunConfig.to_dict)
    partition.json   the partition the run trained on
    metrics.csv      one row per round
    summary.json     final numbers, keyed by strategy
    checkpoint.pt    global tensors, server state and the rows so far (tensors and plain data only)
    model.pt         the final global tensors
    log.txt          one line per round
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import torch

from partitions import Partition
from partitions.partition import write_atomic

# Settings a resumed run may change: they do not alter the training trajectory up to the checkpoint.
RESUMABLE_CHANGES = frozenset({"rounds", "eval_every", "checkpoint_every", "data_root"})
METRIC_COLUMNS = (
    "strategy", "round", "samples_seen", "bytes_communicated", "test_accuracy", "test_loss", "train_loss", "wall_s",
)
MULTILABEL_COLUMNS = ("test_micro_f1", "test_macro_f1", "test_mean_average_precision")


class RunFolder:
    """Read and write one run's files under ``path``.

    Parameters
    ----------
    path : str or Path
        The run's folder; created when missing.
    """

    def __init__(self, path):
        self.path = Path(path)

    def start(self, config, partition: Partition, *, resume: bool, extra: dict | None = None) -> dict | None:
        """Write the config and partition, or check them against the folder's when resuming.

        Returns the checkpoint to resume from, or ``None`` for a fresh start. ``extra`` holds
        settings from outside the config that shape the run (a comparison's sample grid); they
        are saved in ``config.json`` beside the config's fields and must match on resume too.

        Raises
        ------
        ValueError
            Resuming a folder written by a different config or partition, or starting afresh
            in a folder that already holds a run.
        """
        config_path, partition_path = self.path / "config.json", self.path / "partition.json"
        if resume and config_path.exists():
            saved = json.loads(config_path.read_text(encoding="utf-8"))
            current = {**config.to_dict(), **(extra or {})}
            differing = sorted(key for key in set(saved) | set(current)
                               if saved.get(key) != current.get(key) and key not in RESUMABLE_CHANGES)
            if differing:
                shown = ", ".join(f"{key}: {saved.get(key)!r} -> {current.get(key)!r}" for key in differing)
                raise ValueError(
                    f"cannot resume {self.path}: it holds a run of a different config ({shown}); "
                    "rerun with the same settings, or choose another `--out`"
                )
            if partition_path.exists() and Partition.load(partition_path) != partition:
                raise ValueError(f"cannot resume {self.path}: its partition.json differs from this run's partition")
            checkpoint = self.load_checkpoint()
            if not partition_path.exists():
                partition.save(partition_path)
            if checkpoint is not None:
                self.log(f"resumed from the checkpoint of round {checkpoint['progress']['round']}")
            if checkpoint is not None and checkpoint["progress"]["round"] > config.rounds:
                raise ValueError(
                    f"cannot resume {self.path} with `rounds`={config.rounds}: its checkpoint is already at round "
                    f"{checkpoint['progress']['round']}"
                )
            write_atomic(config_path, json.dumps(current, indent=2))
            return checkpoint
        if not resume and (self.path / "metrics.csv").exists():
            raise ValueError(f"{self.path} already holds a run; pass `--resume` to continue it or choose another `--out`")
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(config_path, json.dumps({**config.to_dict(), **(extra or {})}, indent=2))
        partition.save(partition_path)
        return None

    def write_rows(self, rows: list[dict], name: str = "metrics.csv") -> Path:
        """Write the per-round rows as CSV, with the standard columns first."""
        columns = list(METRIC_COLUMNS) + sorted({key for row in rows for key in row} - set(METRIC_COLUMNS))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(row.get(key)) for key in columns})
        path = self.path / name
        write_atomic(path, buffer.getvalue())
        return path

    def write_summary(self, summary: dict) -> Path:
        """Write ``summary.json`` (keyed by strategy)."""
        path = self.path / "summary.json"
        write_atomic(path, json.dumps(summary, indent=2))
        return path

    def log(self, line: str) -> None:
        """Append a line to ``log.txt``."""
        with open(self.path / "log.txt", "a", encoding="utf-8") as stream:
            stream.write(line + "\n")

    def save_checkpoint(self, checkpoint: dict) -> None:
        """Save tensors and plain data to ``checkpoint.pt`` atomically."""
        save_tensors(checkpoint, self.path / "checkpoint.pt")

    def load_checkpoint(self) -> dict | None:
        """Return the checkpoint, or ``None`` if the run never wrote one."""
        path = self.path / "checkpoint.pt"
        if not path.exists():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises several types for a damaged file
            raise ValueError(f"cannot resume from {path}: the checkpoint is unreadable ({error})") from None

    def save_model(self, state: list[torch.Tensor]) -> None:
        """Save the final global tensors to ``model.pt``."""
        save_tensors({"state": [t.detach().cpu() for t in state]}, self.path / "model.pt")


def save_tensors(payload, path: Path) -> None:
    """``torch.save`` atomically and durably: serialised in memory, then written as `write_atomic` writes."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())


def read_rows(path) -> list[dict]:
    """Read a ``metrics.csv`` back, numbers as floats (ints for round and counters)."""
    with open(path, encoding="utf-8", newline="") as stream:
        return [{key: _parse(key, value) for key, value in row.items()} for row in csv.DictReader(stream)]


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def _parse(key, value):
    if key == "strategy":
        return value
    if value == "":
        return math.nan
    if key in ("round", "samples_seen", "bytes_communicated", "bytes_up", "bytes_down"):
        return int(value)
    return float(value)
