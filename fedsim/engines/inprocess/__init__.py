"""The in-process engine: K ranks or clients simulated in one process with one model object."""

from ...results.outcome import RunResult
from .loop import run

__all__ = ["RunResult", "run"]
