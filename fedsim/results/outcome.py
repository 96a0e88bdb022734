"""What a run ends with (`RunResult`), and what a run in other processes left in its folder, read back.

The launcher waits for those processes, then learns from the folder how the run ended: the
round its checkpoint holds, whether it diverged or a bug in the user's code stopped it, and its
rows, summary and final model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..checks import SettingError
from ..interrupts import RunDiverged
from ..user_code import UserCodeError
from .divergence import divergence_advice
from .folder import RunFolder, read_json, read_rows


#: The summary entry in which a run stopped by a bug in the user's code says what it was (`record_user_code_error`).
USER_CODE_ERROR = "user_code_error"


@dataclass
class RunResult:
    """What a run returns, on every engine: the per-round rows, the summary and the final global tensors."""

    rows: list[dict]
    summary: dict
    global_state: list[torch.Tensor]


def saved_round(out) -> int | None:
    """Return the round ``out``'s checkpoint holds; ``None`` when there is none, or it cannot be read."""
    try:
        checkpoint = RunFolder(out).load_checkpoint()
    except ValueError:  # damaged: nothing to continue from
        return None
    return None if checkpoint is None else int(checkpoint["progress"]["round"])


def resume_hint(out) -> SettingError | str:
    """Return "; `resume`=True continues from its checkpoint of round N" where ``out`` holds a checkpoint, else "".

    The advice is an unraised `SettingError`, for the message of a `fedsim.interrupts.RunFailed`
    to word as its own (``{advice:text}``). A run that failed before its first checkpoint has
    nothing to continue: no advice then.
    """
    checkpoint_round = saved_round(out)
    if checkpoint_round is None:
        return ""
    return SettingError("; {resume} continues from its checkpoint of round {round:text}", resume=True,
                        round=checkpoint_round)


def diverged_run(out, config, *, named_folder=True) -> RunDiverged | None:
    """Return the `fedsim.interrupts.RunDiverged` that ``out``'s summary records, or ``None``.

    The run records its divergence in its summary; the launcher reads it back, to end with the
    run's line and exit status. The error holds the rows before the divergence and the summary,
    as the recorder's does; it names ``out`` unless ``named_folder`` is false (a temporary
    folder, which is gone once the launcher returns).
    """
    summary = strategy_summary(out, config)
    if summary is None or not summary.get("diverged"):
        return None
    diverged = RunDiverged(summary["diverged_round"], summary.get("diverged_reason") or "not finite",
                           where=summary.get("diverged_where") or "",
                           checkpoint_round=saved_round(out) if named_folder else None,
                           folder=Path(out) if named_folder else None, advice=divergence_advice(config))
    diverged.rows, diverged.summary = written_rows(out), summary
    return diverged


def record_user_code_error(out, config, summary: dict, error: UserCodeError) -> None:
    """Write ``out``'s summary (``summary``, the run's so far) with the `UserCodeError` that stopped the run.

    The process that ran the rounds (a Flower ServerApp) writes it; the launcher reads it back
    with `user_code_error`, to end with the error's own line rather than a run that did not finish.
    """
    RunFolder(out).write_summary({config.label: {**summary, USER_CODE_ERROR: str(error)}})


def user_code_error(out, config) -> UserCodeError | None:
    """Return the `UserCodeError` that ``out``'s summary records (`record_user_code_error`), or ``None``."""
    summary = strategy_summary(out, config)
    message = None if summary is None else summary.get(USER_CODE_ERROR)
    return UserCodeError(message) if isinstance(message, str) else None


def written_rows(out) -> list[dict]:
    """Return the rows ``out/metrics.csv`` holds (none before a run's first round ends)."""
    path = Path(out) / "metrics.csv"
    return read_rows(path) if path.exists() else []


def strategy_summary(out, config) -> dict | None:
    """Return ``config.strategy``'s summary from ``out/summary.json``, its null numbers as NaN; ``None`` when absent.

    The file writes a number that is not finite as ``null`` (valid JSON); a result read back
    holds NaN there, as the run's own summary did. The ``diverged_*`` fields say where and why
    a run diverged, or hold ``null``, which they keep.
    """
    path = Path(out) / "summary.json"
    summary = read_json(path).get(config.label) if path.exists() else None
    if not isinstance(summary, dict):
        return None
    return {key: math.nan if value is None and not key.startswith("diverged") else value
            for key, value in summary.items()}


def finished_result(out, config):
    """Return the `RunResult` of a run that finished in ``out``; ``None`` if it did not.

    Finished means: its summary is written and ``metrics.csv`` holds every round.
    """
    out = Path(out)
    summary = strategy_summary(out, config)
    rows = written_rows(out)
    if summary is None or len(rows) != config.rounds or not (out / "model.pt").exists():
        return None
    model = torch.load(out / "model.pt", map_location="cpu", weights_only=True)["state"]
    return RunResult(rows, summary, model)
