"""A run's folder: config, partition, metrics, summary and checkpoints, every file written atomically.

Layout of ``DIR``::

    .fedsim-run      the marker: this folder holds a fedsim run (or a comparison of runs)
    config.json      every setting needed to rerun (RunConfig.to_dict), and under "environment" what ran it
                     (`fedsim.provenance`), one entry per start or resume
    partition.json   the partition the run trained on
    metrics.csv      one row per round; an empty cell is a value not measured that round (a round
                     that ``eval_every`` does not evaluate); no non-finite number is ever written:
                     a round whose loss or model is not finite stops the run instead
    summary.json     final numbers, keyed by strategy; standard JSON (``null`` for a number that
                     does not exist, e.g. the accuracy of a run never evaluated), with ``diverged``
                     (and its round, where and reason) telling whether the run stopped diverging
    checkpoint.pt    global tensors, server state and the rows so far (tensors and plain data only)
    model.pt         the final global tensors (`fedsim.results.model_file`; `fedsim.load_model` rebuilds the model)
    log.txt          one line per round

`write_atomic` (from `partitions`) is the one way every file here is written; scripts that add
files of their own beside runs (the benchmarks) use it too.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import torch

from partitions import Partition
from partitions._io import read_text, remove_temporaries, write_atomic

from ..checks import SettingError
from ..config.files import CODE_DIGESTS
from ..provenance import ENVIRONMENT_KEY, environment
from ..references import code_digests
from .csv_tables import append_table, read_rows, write_table
from .writing import finite_or_null, save_tensors

MARKER = ".fedsim-run"
# Settings a resumed run may change: they do not alter the training trajectory up to the checkpoint.
RESUMABLE_CHANGES = frozenset({"rounds", "eval_every", "checkpoint_every", "data_root", "download",
                               "client_state_memory", "eval_clients_every", "client_target",
                               "personalize_steps", "tensorboard"})
METRIC_COLUMNS = (
    "strategy", "round", "samples_seen", "bytes_communicated", "test_accuracy", "test_loss", "train_loss", "wall_s",
)
MULTILABEL_COLUMNS = ("test_micro_f1", "test_macro_f1", "test_mean_average_precision")
#: The file of each client's evaluation on its local test set, round by round (``local_test_fraction``).
CLIENTS_CSV = "clients.csv"


class RunFolder:
    """Read and write one run's files under ``path``.

    A folder is a run's when it holds the `MARKER` file, written before anything else: only
    such a folder is resumed or written into again, so a typo in ``--out`` neither retrains
    from scratch in silence nor overwrites a user's own files.

    Parameters
    ----------
    path : str or Path
        The run's folder; created when missing.
    kind : {"run", "comparison"}
        What the marker says the folder holds (`fedsim.comparison` keeps one run per strategy
        inside a comparison folder).
    """

    def __init__(self, path, kind: str = "run"):
        self.path = Path(path)
        self.kind = kind

    def holds_run(self) -> bool:
        """Whether the folder carries the marker of a ``kind`` folder."""
        try:
            return json.loads((self.path / MARKER).read_text(encoding="utf-8")).get("kind") == self.kind
        except (OSError, ValueError, AttributeError):
            return False

    def open(self, *, resume: bool) -> None:
        """`check` the folder, then create and mark it for a fresh run."""
        self.check(resume=resume)
        if resume:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path / MARKER, json.dumps({"kind": self.kind, "format": 1}) + "\n")
        except OSError as error:
            raise ValueError(f"cannot write to {self.path}: {error.strerror or error}") from None

    def check(self, *, resume: bool, config=None, extra: dict | None = None) -> dict | None:
        """Check, changing nothing, that the folder can take a fresh run or holds this run to resume.

        Called before any work, so that a bad ``--out`` is reported at once. A fresh run needs a
        new or empty folder, or one of its own runs that stopped before finishing a round (there
        is nothing in it to lose). Resuming needs a run folder with a readable config, partition
        and checkpoint, and, when ``config`` is given, the same settings (``extra`` too, see
        `start`) and no more rounds done than ``config.rounds``.

        Returns
        -------
        dict or None
            The checkpoint to resume from, when ``resume`` and ``config`` are given.

        Raises
        ------
        ValueError
            When the folder cannot take the run; the message says why and what to do.
        """
        what = "comparison" if self.kind == "comparison" else "run"
        if str(self.path) in ("", "."):
            raise SettingError("{out:name} is empty: name a folder for the results")
        if self.path.exists() and not self.path.is_dir():
            raise SettingError("{out:name} {path:text} is a file, not a folder; choose a folder", path=self.path)
        if resume:
            return self._check_resume(what, config, extra)
        if self.path.is_dir() and any(self.path.iterdir()) and not self._never_finished_a_round():
            if self.holds_run():
                raise SettingError("{path:text} already holds a {what:text}; pass {resume} to continue it, or choose "
                                   "another {out:name}", path=self.path, what=what, resume=True)
            raise SettingError("{path:text} is not empty and holds no fedsim {what:text}; nothing in it is "
                               "overwritten: choose a new or empty folder for {out:name}", path=self.path, what=what)
        parent = next((p for p in self.path.absolute().parents if p.exists()), None)
        if parent is not None and (not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK)):
            reason = "Not a directory" if not parent.is_dir() else "Permission denied"
            raise ValueError(f"cannot write to {self.path}: {reason} ({parent})")
        self._try_creating()
        return None

    def _try_creating(self) -> None:
        """Create the missing folder and remove it again, so that a folder no one can make is refused at once.

        Permissions are not the whole story: ``/proc`` looks writable to root, yet refuses a new folder.
        """
        missing = [folder for folder in (self.path, *self.path.parents) if not folder.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"cannot write to {self.path}: {error.strerror or error}") from None
        finally:
            for folder in missing:  # deepest first; only what this call made
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def _never_finished_a_round(self) -> bool:
        """Whether the folder holds a run of ours that stopped before writing any result (a crash in round 1)."""
        return self.kind == "run" and self.holds_run() and not any(
            (self.path / name).exists() for name in ("metrics.csv", "checkpoint.pt"))

    def _check_resume(self, what: str, config, extra) -> dict | None:
        if not self.path.exists():
            raise SettingError("cannot resume {path:text}: the folder does not exist; check {out:name}, or drop "
                               "{resume} to start a new run", path=self.path, resume=True)
        if not self.holds_run():
            other = RunFolder(self.path, "run" if self.kind == "comparison" else "comparison")
            if other.holds_run():
                raise ValueError(f"cannot resume {self.path} as a {what}: it holds a single fedsim {other.kind}; "
                                 f"continue it with `fedsim {'run' if other.kind == 'run' else 'compare'}`")
            raise SettingError("cannot resume {path:text}: it holds no fedsim {what:text} (no {marker:text} file); "
                               "check {out:name}, or drop {resume} to start a new run in an empty folder",
                               path=self.path, what=what, marker=MARKER, resume=True)
        saved = read_json(self.path / "config.json")  # a damaged one is named before any work
        if self.kind != "run":
            return None
        if self._never_finished_a_round():
            raise SettingError("cannot resume {path:text}: the run stopped before finishing its first round, so "
                               "there is nothing to continue; drop {resume} to start it again in the same folder",
                               path=self.path, resume=True)
        if not (self.path / "checkpoint.pt").exists():
            raise SettingError(
                "cannot resume {path:text}: it has no checkpoint.pt (the file was removed, or the run stopped before "
                "its first checkpoint), so nothing of it can be continued; start it again with another {out:name}",
                path=self.path,
            )
        if config is None:
            return None
        # fields added since the run was saved take their defaults, as the run did; where it ran is no setting
        saved = {**type(config)().to_dict(), **saved_settings(saved)}
        current = {**config.to_dict(), **(extra or {})}
        if digests := code_digests(config):  # the code a run names is part of what it is
            current[CODE_DIGESTS] = digests
        differing = sorted(key for key in set(saved) | set(current)
                           if saved.get(key) != current.get(key) and key not in RESUMABLE_CHANGES)
        if CODE_DIGESTS in differing:
            changed = [name for name, sha in current.get(CODE_DIGESTS, {}).items()
                       if saved.get(CODE_DIGESTS, {}).get(name) != sha]
            name = changed[0] if changed else CODE_DIGESTS
            raise SettingError("cannot resume {path:text}: {reference:text}, its {setting:name}, changed since the "
                               "run started (its SHA-256 differs from config.json's); restore the file, or start a "
                               "new run in another {out:name}", fields={"setting": name}, path=self.path,
                               reference=repr(config.to_dict().get(name, name)))
        if differing:
            # a placeholder of its own for each setting changed, each worded as the setting it names
            changes = {f"change{index}": SettingError("{setting:name} {before:text} -> {after:text}",
                                                      fields={"setting": key}, before=repr(saved.get(key)),
                                                      after=repr(current.get(key)))
                       for index, key in enumerate(differing)}
            shown = ", ".join("{" + placeholder + ":text}" for placeholder in changes)
            raise SettingError("cannot resume {path:text}: it holds a run of other settings (" + shown + "); resume "
                               "with the same settings, or choose another {out:name}", path=self.path, **changes)
        if (self.path / "partition.json").exists():
            Partition.load(self.path / "partition.json")  # a damaged one is named here, before any work
        checkpoint = self.load_checkpoint()
        done = checkpoint["progress"]["round"]
        if done > config.rounds:
            raise SettingError("cannot resume {path:text} with {rounds}: its checkpoint is already at round "
                               "{done:text}, and a run cannot be shortened; {rounds:name} must be >= {done:text} "
                               "(leave it out to keep the run's {saved:text})", path=self.path, rounds=config.rounds,
                               done=done, saved=saved["rounds"])
        return checkpoint

    def start(self, config, partition: Partition, *, resume: bool, extra: dict | None = None) -> dict | None:
        """Write the config and partition, or check them against the folder's when resuming.

        Returns the checkpoint to resume from, or ``None`` for a fresh start. ``extra`` holds
        settings from outside the config that shape the run (a comparison's sample grid); they
        are saved in ``config.json`` beside the config's fields and must match on resume too.

        Raises
        ------
        ValueError
            Whatever `check` refuses, and a partition that differs from the folder's.
        """
        partition_path = self.path / "partition.json"
        current = {**config.to_dict(), **(extra or {})}
        if not resume:
            self.open(resume=False)
            self.write_config(current)
            partition.save(partition_path)
            return None
        checkpoint = self.check(resume=True, config=config, extra=extra)
        remove_temporaries(self.path)  # what a writer killed outright (SIGKILL) left half-written
        if partition_path.exists() and Partition.load(partition_path) != partition:
            raise ValueError(f"cannot resume {self.path}: its partition.json differs from this run's partition")
        if not partition_path.exists():
            partition.save(partition_path)
        self.write_config(current, from_round=checkpoint["progress"]["round"])
        return checkpoint

    def write_config(self, settings: dict, *, from_round: int | None = None) -> None:
        """Write ``config.json``: ``settings``, and the environment of each start under ``"environment"``.

        ``from_round`` is ``None`` for a fresh start (the record starts over), else the round a
        resumed run continues from: its environment is added to those of the earlier starts, and
        the settings (a new ``rounds``) replace the old, so the file says what the run now is.
        """
        path = self.path / "config.json"
        earlier = read_json(path).get(ENVIRONMENT_KEY, []) if from_round is not None and path.exists() else []
        record = [*(earlier if isinstance(earlier, list) else []), environment(from_round or 0)]
        write_atomic(path, json.dumps({**settings, ENVIRONMENT_KEY: record}, indent=2))

    def write_rows(self, rows: list[dict], name: str = "metrics.csv") -> Path:
        """Write the per-round rows as CSV, with the standard columns first.

        NaN, the rows' mark of a value not measured, is written as an empty cell.
        """
        columns = list(METRIC_COLUMNS) + sorted({key for row in rows for key in row} - set(METRIC_COLUMNS))
        return self.write_table(name, columns, rows)

    def write_table(self, name: str, columns, rows: list[dict]) -> Path:
        """Write ``rows`` as the CSV file ``name`` with ``columns``, atomically; NaN as an empty cell."""
        write_table(self.path / name, columns, rows)
        return self.path / name

    def append_table(self, name: str, columns, rows: list[dict]) -> None:
        """Add ``rows`` to the CSV file ``name`` written with ``columns`` (`fedsim.results.csv_tables.append_table`)."""
        append_table(self.path / name, columns, rows)

    def read_table(self, name: str) -> list[dict]:
        """Read the CSV file ``name`` written by `write_table` as `read_rows` reads (nothing when it is absent)."""
        path = self.path / name
        return read_rows(path) if path.exists() else []

    def write_summary(self, summary: dict) -> Path:
        """Write ``summary.json`` (keyed by strategy) as standard JSON: a NaN or infinite number becomes ``null``."""
        path = self.path / "summary.json"
        write_atomic(path, json.dumps(finite_or_null(summary), indent=2, allow_nan=False))
        return path

    def log(self, line: str) -> None:
        """Append a line to ``log.txt``."""
        with open(self.path / "log.txt", "a", encoding="utf-8") as stream:
            stream.write(line + "\n")

    def rewrite_log(self, lines: list[str]) -> None:
        """Replace ``log.txt`` with ``lines`` (a resumed run drops the lines of rounds it replays)."""
        write_atomic(self.path / "log.txt", "".join(line + "\n" for line in lines))

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
        except Exception as error:  # torch raises several types for a damaged file, with pages of advice
            reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
            raise SettingError("cannot resume from {path:text}: the checkpoint is damaged ({reason:text}); nothing of "
                               "it can be continued: start the run again with another {out:name}", path=path,
                               reason=reason) from None

    def checkpoint_round(self) -> int:
        """Return the round ``checkpoint.pt`` holds, 0 when there is none.

        The file is memory-mapped, so that a large checkpoint (SCAFFOLD's control variates of
        many clients) is not read just for its round number.
        """
        path = self.path / "checkpoint.pt"
        if not path.exists():
            return 0
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["progress"]["round"])

    def save_model(self, state: list[torch.Tensor]) -> None:
        """Save the final global tensors to ``model.pt``."""
        save_tensors({"state": [t.detach().cpu() for t in state]}, self.path / "model.pt")


def read_json(path) -> dict:
    """Read a JSON file of the run folder; a missing or damaged one is an error naming the file."""
    try:
        data = json.loads(read_text(path, "fedsim settings file"))
    except FileNotFoundError:
        raise ValueError(f"{path} is missing: the folder is not a complete fedsim run") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is damaged and cannot be read ({error}); it is not a file fedsim can resume from") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is damaged: it holds {type(data).__name__}, not a table of settings")
    return data


def saved_settings(saved: dict) -> dict:
    """Return the settings of a ``config.json``'s contents: all but the environment it records."""
    return {key: value for key, value in saved.items() if key != ENVIRONMENT_KEY}
