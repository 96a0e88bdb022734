"""Dataset files on disk: the one error for missing files, atomic gunzipping, and no leftovers of a failed load."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from partitions._io import atomic_open

from ..checks import Worded


class DatasetFilesError(Worded, RuntimeError):
    """A dataset's files are missing or unreadable: the machine's state, not a value out of range.

    A `RuntimeError`, as the environment's errors are, that carries the settings it names
    (``download``, ``root``) so that the command line words them as its flags.
    """


def files_error(
    name: str,
    required: Sequence[Path],
    *,
    download: bool,
    cause: BaseException,
    hint: str = "",
    gzipped_ok: bool = False,
) -> DatasetFilesError:
    """Return the `DatasetFilesError` that says which files ``name`` needs where, and how to get them.

    Parameters
    ----------
    name : str
        The dataset's registry name.
    required : sequence of Path
        Every file the loader reads.
    download : bool
        Whether a download was attempted (and so failed).
    cause : BaseException
        The loader's own error, quoted when no file is missing (a corrupt or unexpected file).
    hint : str, optional
        Another way to get the files, appended to the message.
    gzipped_ok : bool, default False
        Whether the loader also takes each file gzipped, as ``<name>.gz`` (see `gunzip_missing`).
    """
    end = (f"; {hint}" if hint else "") + "."
    missing = [path for path in required if not path.is_file()]
    if not missing:
        # torchvision checks the idx headers with bare asserts, whose message is empty.
        reason = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        message = f"dataset {name!r}: could not load the files in {required[0].parent} ({reason})"
        return DatasetFilesError("{message:text}", message=message + end)
    folder = missing[0].parent
    names = ", ".join(path.name if path.parent == folder else str(path) for path in missing)
    message = f"dataset {name!r}: missing files in {folder}: {names}"
    message += " (each may also lie there gzipped, as <name>.gz). " if gzipped_ok else ". "
    if download:
        # torchvision's download errors span lines (one per mirror tried): keep them on one.
        reason = " ".join(str(cause).split())
        offline = _unreachable(cause) or any(sign in reason for sign in _NO_NETWORK_SIGNS)
        message += "Downloading them failed: no network could be reached" if offline else "Downloading them failed"
        message += f" ({reason[:300]}); run where a network exists, or put the files there yourself"
        return DatasetFilesError("{message:text}", message=message + end)
    return DatasetFilesError(
        "{message:text}Turn on {download:name} on a machine with a network to fetch them, or put the files there "
        "yourself ({root:name}, or $FEDSIM_DATA, names another folder){end:text}",
        message=message, download=download, end=end,
    )


# What urllib's and torchvision's errors say when no host can be reached.
_NO_NETWORK_SIGNS = ("Name or service not known", "Temporary failure in name resolution", "Network is unreachable",
                     "No address associated", "urlopen error", "Connection refused", "timed out")


def _unreachable(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a failure to reach a host."""
    import socket
    import urllib.error

    while error is not None:
        if isinstance(error, (urllib.error.URLError, socket.gaierror, ConnectionError, TimeoutError)):
            return True
        error = error.__cause__ or error.__context__
    return False


def gunzip_missing(folder: Path, names: Iterable[str], sources: Iterable[Path] = ()) -> None:
    """Write each missing file of ``names`` into ``folder`` from a ``<name>.gz`` found nearby.

    The gzipped copies are looked for in ``folder`` itself, then in each of ``sources``; the
    first folder holding all of the missing ones is used, so a dataset never mixes files
    from two origins. Each file is written under a temporary name and renamed into place,
    so a crash or a concurrent run never leaves a truncated file that would load as data.
    """
    missing = [name for name in names if not (folder / name).is_file()]
    if not missing:
        return
    for source in (folder, *sources):
        if all((source / f"{name}.gz").is_file() for name in missing):
            break
    else:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name in missing:
        with atomic_open(folder / name) as unpacked, gzip.open(source / f"{name}.gz", "rb") as packed:
            shutil.copyfileobj(packed, unpacked, length=1 << 20)


@contextlib.contextmanager
def removed_on_failure(root: Path) -> Iterator[None]:
    """Remove what the block created under ``root`` (and ``root`` itself, if it made it) when the block fails.

    A failed download leaves torchvision's empty ``<Name>/raw`` folders, and a mistyped root
    would stay behind as a new folder; only what succeeded should remain. What was there
    before is left as it was, so a root shared with other datasets or runs loses nothing.
    """
    made = [folder for folder in (root, *root.parents) if not folder.exists()]
    before = set(_entries(root))
    try:
        yield
    except BaseException:
        for path in sorted(set(_entries(root)) - before, key=lambda entry: len(entry.parts), reverse=True):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink()
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _entries(root: Path) -> Iterator[Path]:
    """Yield every file and folder under ``root`` (nothing when it is missing)."""
    for folder, subfolders, files in os.walk(root):
        for name in (*subfolders, *files):
            yield Path(folder) / name
