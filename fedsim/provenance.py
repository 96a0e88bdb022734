"""What produced a result: the versions, source commit and arithmetic of the machine a run ran on.

`environment` is recorded in ``config.json`` under ``"environment"``, one entry per start or
resume of the run. Resuming never compares it: a run may be continued on another machine or
with another version, and the record then says which rounds ran where.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

#: The ``config.json`` key of the environment record; not a setting, so resume ignores it.
ENVIRONMENT_KEY = "environment"


def environment(from_round: int = 0) -> dict:
    """Return what, besides the settings, determines the numbers of a run started at ``from_round``.

    Parameters
    ----------
    from_round : int, default 0
        The round the run (re)started from: 0 for a fresh run, the checkpoint's round on resume.

    Returns
    -------
    dict
        ``from_round``; the versions of fedsim, torch and flwr (``None`` when not installed);
        ``git_commit`` of the fedsim source tree (``None`` outside a git checkout); torch's CPU
        kernel family ``cpu_capability`` (AVX2, AVX512, ...: it decides summation orders, see the
        architecture page's numerics) and its intra-op ``threads``.
    """
    import torch

    from . import __version__

    return {
        "from_round": int(from_round),
        "fedsim": __version__,
        "torch": torch.__version__,
        "flwr": _installed_version("flwr"),
        "git_commit": source_commit(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def source_commit() -> str | None:
    """Return the git commit of the checkout fedsim is imported from, or ``None``.

    ``None`` when git is missing, slow, or fedsim is not imported from the top of a git work tree
    (an installed copy inside some other repository must not report that repository's commit).
    """
    source = Path(__file__).resolve().parent.parent
    try:
        found = subprocess.run(["git", "-C", str(source), "rev-parse", "--show-toplevel", "HEAD"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(found) != 2 or Path(found[0]).resolve() != source:
        return None
    return found[1]


def _installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
