"""fedsim's app run on a `LocalFederation`, from start to outcome: ``fedsim flower simulate`` and ``deploy``.

The ServerApp runs in a process of Flower's (the simulation runtime's, or the SuperLink's
``flwr-serverapp``) and writes the run's folder as `fedsim run` does; this process submits the
run, shows its progress from the rows the folder gains, keeps Flower's log in ``flower.log``
beside them (or shows it, with ``verbose``), and reads the outcome back from the folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from partitions._io import remove_temporaries

from ...config.run_config import RunConfig
from ...interrupts import RunFailed, RunInterrupted, stop_signal
from ...results.folder import RunFolder
from ...results.outcome import diverged_run, finished_result, resume_hint, saved_round, user_code_error, written_rows
from .federation import LocalFederation, tail
from .records import grid_entry, to_run_config

#: The file of a run's folder that keeps Flower's log of the run (appended to when it resumes).
FLOWER_LOG = "flower.log"


def run_app(federation: LocalFederation, config: RunConfig, out, *, resume: bool = False, timeout_s: float,
            grid=None, quiet: bool = True, verbose: bool = False, named_folder: bool = True,
            started=None):
    """Start ``federation``, run ``config`` on it as fedsim's app writing ``out``, and return the run's result.

    Parameters
    ----------
    federation : LocalFederation
        Not yet started; it is started here and stopped however the run ends.
    config : fedsim.config.RunConfig
    out : Path
        The results folder, as an absolute path (the ServerApp runs in another folder).
    resume : bool, default False
    timeout_s : float
        Seconds the server waits for the nodes, and for a round's replies.
    grid : fedsim.schedule.SampleGrid, optional
        The samples each round is worth (the config's own by default).
    quiet : bool, default True
        No progress bar.
    verbose : bool, default False
        Show Flower's log of the run here rather than keep it in ``out/flower.log``.
    named_folder : bool, default True
        Whether ``out`` is the user's folder, which messages name (not a temporary one).
    started : callable, optional
        Called with the started federation before the run is submitted (to say where it listens).

    Returns
    -------
    fedsim.results.outcome.RunResult

    Raises
    ------
    fedsim.interrupts.RunInterrupted
        Ctrl-C or SIGTERM: every Flower process is stopped; the error names the checkpoint.
    fedsim.interrupts.RunDiverged
        The run's summary records a divergence.
    fedsim.user_code.UserCodeError
        The run's summary records a bug in the user's code (a method's hook) that stopped it.
    fedsim.interrupts.RunFailed
        A `RuntimeError`: the run did not finish; the message quotes the end of Flower's log, and
        advises resuming where a checkpoint holds something to continue.
    """
    entries = {**to_run_config(config), "out": str(out), "resume": resume, "timeout": timeout_s,
               "grid": grid_entry(config, grid), "simulated": federation.simulation}
    progress = FolderProgress(out, config, quiet=quiet)
    try:
        with federation:
            if started is not None:
                started(federation)
            log = federation.home / FLOWER_LOG
            try:
                with log.open("w") as stream:
                    status = federation.run(entries, stream=None if verbose else stream, watch=progress.update)
            finally:
                progress.close()
                keep_log(log, out)
            log_end = "" if verbose else tail(log)
    except KeyboardInterrupt as stop:
        folder, checkpoint_round = (Path(out), saved_round(out)) if named_folder else (None, None)
        raise RunInterrupted(len(written_rows(out)), config.rounds, checkpoint_round, folder, stop_signal(stop)) from None
    finally:
        # The ServerApp process, which writes here, is ended by Flower's own signal handlers or, past
        # the grace period, by SIGKILL: one ended in the middle of a write leaves its temporary file
        # behind (the file it was replacing stays as it was)
        remove_temporaries(out)
    if (diverged := diverged_run(out, config, named_folder=named_folder)) is not None:
        raise diverged
    if (failed := user_code_error(out, config)) is not None:
        raise failed
    result = finished_result(out, config)
    if status != 0 or result is None:
        where = "its log above says why" if verbose else f"the end of its log:\n{log_end}"
        advice = resume_hint(out) if named_folder else ""
        raise RunFailed("the Flower run did not finish (flwr run exit status {status:text}); {where:text}{advice:text}",
                        status=status, where=where, advice=advice)
    return result


def keep_log(log: Path, out) -> None:
    """Append Flower's log of the run to ``out/flower.log``, where ``out`` is a run's folder (never someone's files)."""
    folder = RunFolder(out)
    if log.exists() and log.stat().st_size and folder.holds_run():
        with log.open("rb") as source, (folder.path / FLOWER_LOG).open("ab") as kept:
            shutil.copyfileobj(source, kept)


class FolderProgress:
    """A progress bar for a run whose server is another process, fed by the rows it writes to ``metrics.csv``.

    Parameters
    ----------
    out : Path
        The run's folder.
    config : fedsim.config.RunConfig
    quiet : bool
        No bar at all.
    """

    def __init__(self, out, config: RunConfig, *, quiet: bool):
        self.out = out
        self.config = config
        self._bar = None
        if not quiet:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=config.rounds, initial=len(written_rows(out)), desc=config.label,
                             unit="round", leave=True)


    def update(self) -> None:
        """Move the bar to the rounds the folder holds, showing the last test accuracy."""
        if self._bar is None:
            return
        rows = written_rows(self.out)
        if len(rows) > self._bar.n:
            self._bar.set_postfix_str(f"acc {rows[-1]['test_accuracy']:.3f}", refresh=False)
            self._bar.update(len(rows) - self._bar.n)

    def close(self) -> None:
        """Show the last rounds written, then close the bar."""
        if self._bar is not None:
            self.update()
            self._bar.close()
            self._bar = None
