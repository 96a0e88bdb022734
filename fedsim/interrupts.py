"""How a run reports that it was stopped, by a signal, by divergence or by a failed process (without torch, so that
the command line reports it cheaply).

Ctrl-C (SIGINT) and SIGTERM (what a batch scheduler, ``timeout``, Docker and systemd send) stop a
run the same way: Python raises `KeyboardInterrupt` for SIGINT, and `stop_on_sigterm` makes
SIGTERM raise `Terminated`, a `KeyboardInterrupt` that records its signal. Every place that
turns Ctrl-C into a saved state and one line therefore handles SIGTERM too, and the line and the
exit status (128 + the signal's number, as a shell reports it) follow the signal.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading

from .checks import Worded

#: The signals that stop a run and leave it resumable.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: The exit status of a run that diverged: neither bad input (2) nor a signal (128 + n).
DIVERGED = 3


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python raises `KeyboardInterrupt` for Ctrl-C."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def stop_signal(error: BaseException) -> int:
    """Return the number of the signal that raised ``error``: SIGINT for a plain `KeyboardInterrupt`."""
    return getattr(error, "signum", int(signal.SIGINT))


def exit_status(signum: int) -> int:
    """Return the exit status of a command stopped by signal ``signum``, as a shell reports it (128 + n)."""
    return 128 + int(signum)


def stopped_by(signum: int) -> str:
    """Return how a run stopped by ``signum`` says so: "interrupted" (Ctrl-C), or "terminated (SIGTERM)"."""
    return "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"


def raise_terminated(signum, frame) -> None:
    """The SIGTERM handler of `stop_on_sigterm`."""
    raise Terminated(signum)


def stop_on_sigterm() -> None:
    """Make SIGTERM raise `Terminated` in this process (from the main thread; elsewhere it does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_terminated)


def ignore_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM: a second one must not break off the cleanup of the first."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)


class RunInterrupted(Exception):
    """A signal (Ctrl-C, SIGTERM) stopped a run; says which round was finished and which checkpoint holds what.

    Attributes
    ----------
    rounds_finished : int
    checkpoint_round : int or None
        The round ``checkpoint.pt`` holds (``None``: no checkpoint, or no folder).
    folder : Path or None
    signum : int
        The signal that stopped it (`exit_status` gives the command's exit status).
    """

    def __init__(self, rounds_finished: int, rounds: int, checkpoint_round: int | None, folder,
                 signum: int = signal.SIGINT):
        self.rounds_finished, self.checkpoint_round, self.folder = rounds_finished, checkpoint_round, folder
        self.signum = int(signum)
        super().__init__(f"{stopped_by(signum)} after round {rounds_finished} of {rounds}; "
                         f"{checkpoint_place(folder, checkpoint_round)}")


class RunDiverged(Worded, Exception):
    """A run's loss or model stopped being finite; says where, what is kept and which setting to lower.

    Its ``advice``, which settings to lower (`fedsim.results.divergence.divergence_advice`), is an
    unraised `fedsim.checks.SettingError`, worded with the message: the command line names its
    settings as the flags that set them.

    Attributes
    ----------
    round : int
        The round (1-based, as ``metrics.csv`` counts) where it first appeared.
    what : str
        What is not finite ("the training loss is nan").
    where : str
        "client 3", "rank 1", or "" where it is not known.
    checkpoint_round : int or None
        The round ``checkpoint.pt`` holds: the last finite model saved.
    rows, summary : list of dict, dict
        The rows of the rounds before it and the run's summary (with ``diverged``), where the
        recorder raised it (`fedsim.results.recorder.Recorder.diverge`); empty otherwise.

    Examples
    --------
    >>> from fedsim.checks import SettingError
    >>> error = RunDiverged(3, "the training loss is nan", advice=SettingError("lower {lr:name}", lr=0.5))
    >>> print(error)  # doctest: +ELLIPSIS
    diverged in round 3: the training loss is nan; stopped there, ...; lower `lr`
    """

    def __init__(self, round: int, what: str, *, where: str = "", checkpoint_round: int | None = None,
                 folder=None, advice: Worded | str = ""):
        self.round, self.what, self.where = round, what, where
        self.checkpoint_round, self.folder = checkpoint_round, folder
        self.rows: list[dict] = []
        self.summary: dict = {}
        kept = checkpoint_place(folder, checkpoint_round)
        if folder is not None and checkpoint_round is not None:
            kept += ", the last finite model"
        super().__init__("diverged in round {round:text}{place:text}: {what:text}; stopped there, no row of it "
                         "written; {kept:text}" + ("; {advice:text}" if advice else ""),
                         round=round, place=f" ({where})" if where else "", what=what, kept=kept, advice=advice)

    def __reduce__(self):
        # rebuilt by this constructor, which takes no template (`Worded.__reduce__` would pass one), with its rows
        rebuild = functools.partial(type(self), self.round, self.what, where=self.where,
                                    checkpoint_round=self.checkpoint_round, folder=self.folder,
                                    advice=self.values["advice"])
        return rebuild, (), {"rows": self.rows, "summary": self.summary}


class RunFailed(Worded, RuntimeError):
    """The processes of a run (its torchrun ranks, its Flower apps) ended before it finished.

    A `RuntimeError`, as the environment's errors are, whose message carries the settings it
    names (how to continue: ``resume``, `fedsim.results.outcome.resume_hint`), so that the
    command line words them as its flags. Its parameters are `fedsim.checks.Worded`'s.
    """


def checkpoint_place(folder, checkpoint_round: int | None) -> str:
    """Return what the run's folder holds to continue from, in words."""
    if folder is None:
        return "nothing was saved (no results folder)"
    if checkpoint_round is None:
        return f"no checkpoint was written yet in {folder}"
    return f"{folder / 'checkpoint.pt'} holds round {checkpoint_round}"


@contextlib.contextmanager
def deferred_interrupt():
    """Hold Ctrl-C (SIGINT) and SIGTERM back until the block is done, then deliver the first received.

    The run's files are each written atomically; this keeps a set of them (rows, log and
    checkpoint of one round) consistent, and a second signal from breaking off the cleanup of
    a first. Outside the main thread, where Python delivers no signal, it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {number: signal.signal(number, lambda signum, frame: received.append(signum))
                for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        signal.raise_signal(received[0])  # through the handler restored above (Ctrl-C's raises KeyboardInterrupt)
