"""The in-process engine: K ranks or clients simulated in one process with one model object."""

from .loop import RunResult, run

__all__ = ["RunResult", "run"]
