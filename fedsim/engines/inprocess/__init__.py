"""The in-process engine: K ranks or clients simulated in one process with one model object.

`run` (also `fedsim.run`) is its public surface; its modules are internal.
"""

from ...results.outcome import RunResult
from .loop import run

__all__ = ["RunResult", "run"]
