"""Every number of ``metrics.csv`` as TensorBoard scalars, round by round, one TensorBoard run per strategy.

CSV stays the record; TensorBoard is for watching runs as they go and laying them side by side
(pfl-research and FL-bench offer it too). It needs the ``tensorboard`` package, an optional
extra (``pip install 'fedsim[tensorboard]'``); without it ``--tensorboard`` is refused, before any
work, with that line (`fedsim.config.extras`).
"""

from __future__ import annotations

import math
from pathlib import Path

#: Row entries that are not measures: they name the row.
_NOT_SCALARS = ("strategy", "round")


class TensorBoardRows:
    """Write each row of a run as TensorBoard scalars under ``folder/label``, step = the row's round.

    Parameters
    ----------
    folder : str or Path
        The TensorBoard log folder (``tensorboard --logdir folder``).
    label : str
        The run's strategy label: its TensorBoard run.
    resumed_after : int, optional
        The round a resumed run's checkpoint holds: TensorBoard drops what the run logged after
        it (its rounds are trained again), so no round shows twice.
    """

    def __init__(self, folder, label: str, resumed_after: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        purge = None if resumed_after is None else resumed_after + 1
        self.writer = SummaryWriter(log_dir=str(Path(folder) / label), purge_step=purge)

    def add(self, row: dict) -> None:
        """Write ``row``'s finite numbers (a round without evaluation has no test numbers)."""
        for name, value in row.items():
            if name not in _NOT_SCALARS and isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(name, value, global_step=row["round"])
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
