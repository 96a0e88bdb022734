"""What a run leaves: its folder (``folder``, its files written by ``writing``), the recorder that writes it
round by round (``recorder``, with ``divergence`` for a run that stops being finite), its figures
(``plots``), and what a finished, stopped or diverged run returns and left behind (``outcome``).

These modules import the config and the schedule, never the rounds or an engine, so every engine
records the same way. `RunFolder`, `read_rows` and `RunResult` are what a user reads results with.
"""

from .folder import RunFolder, read_rows
from .outcome import RunResult

__all__ = ["RunFolder", "RunResult", "read_rows"]
