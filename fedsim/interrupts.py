"""How a run reports that Ctrl-C stopped it (without torch, so that the command line reports it cheaply)."""

from __future__ import annotations


class RunInterrupted(Exception):
    """Ctrl-C stopped a run; says which round was finished and which checkpoint holds what.

    Attributes
    ----------
    rounds_finished : int
    checkpoint_round : int or None
        The round ``checkpoint.pt`` holds (``None``: no checkpoint, or no folder).
    folder : Path or None
    """

    def __init__(self, rounds_finished: int, rounds: int, checkpoint_round: int | None, folder):
        self.rounds_finished, self.checkpoint_round, self.folder = rounds_finished, checkpoint_round, folder
        if folder is None:
            where = "nothing was saved (no results folder)"
        elif checkpoint_round is None:
            where = f"no checkpoint was written yet in {folder}"
        else:
            where = f"{folder / 'checkpoint.pt'} holds round {checkpoint_round}"
        super().__init__(f"interrupted after round {rounds_finished} of {rounds}; {where}")
