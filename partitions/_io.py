"""Atomic, durable file writes: the one way `partitions` and `fedsim` write a file.

A reader sees the old file or the new one, never half of one, even if the writer is killed:
the content goes to a temporary file in the same folder, is flushed to disk, and is renamed
over the target; the folder is flushed too, so the rename itself survives a crash. The file
gets the permissions a plain ``open(path, "w")`` would give it: an existing file keeps its
mode, a new one gets ``0o666`` less the umask.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ._errors import SettingError, SettingPermissionError


@contextlib.contextmanager
def atomic_open(path, mode: int | None = None) -> Iterator[BinaryIO]:
    """Open a binary stream whose content replaces ``path`` when the ``with`` block ends without an error.

    On an error the temporary file is removed and ``path`` is left as it was. The folder of
    ``path`` must exist. The file keeps the mode of the one it replaces (a new one: as
    ``open`` makes it), unless ``mode`` is given (e.g. ``0o600`` for a private key), which it
    has before anything is written to it.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with atomic_open(folder / "greeting.txt") as stream:
    ...     _ = stream.write(b"hello")
    >>> (folder / "greeting.txt").read_text()
    'hello'
    """
    path = Path(path)
    temporary, handle = _create_beside(path)
    try:
        if mode is not None:
            os.chmod(temporary, mode)
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        if mode is None:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(temporary, stat.S_IMODE(os.stat(path).st_mode))  # as open() would: keep the file's mode
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def write_atomic(path, content: str | bytes, mode: int | None = None) -> None:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` atomically and durably (see `atomic_open`)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with atomic_open(path, mode) as stream:
        stream.write(data)


def read_text(path, what: str) -> str:
    """Return the UTF-8 text of ``path``; each way reading fails is an error naming the file and ``what`` it is.

    Raises
    ------
    FileNotFoundError
        "no {what} at {path}".
    ValueError
        ``path`` is a folder, or its bytes are not UTF-8.
    """
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no {what} at {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a {what}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}), so not a {what}; "
                         "save it as UTF-8") from None


def check_writable(path, name: str = "path") -> Path:
    """Check, creating nothing, that a file can be written at ``path``; return it as a `Path`.

    ``path`` must not be a folder; its folder may be missing (writers create it), but then the
    nearest folder that exists must be a writable folder. Errors name ``name``.

    Raises
    ------
    ValueError
        ``path`` is a folder, or a file stands where one of its folders should be.
    PermissionError
        The folder it would be written in is not writable.
    """
    path = Path(path)
    if path.is_dir():
        raise SettingError("{setting} is a folder: give a file name", fields={"setting": name}, setting=str(path))
    folder = next(folder for folder in (path.parent, *path.parent.parents) if folder.exists())
    if not folder.is_dir():
        raise SettingError("{setting} cannot be written: {folder:text} is a file, not a folder",
                           fields={"setting": name}, setting=str(path), folder=repr(str(folder)))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SettingPermissionError("{setting} cannot be written: the folder {folder:text} is not writable",
                                     fields={"setting": name}, setting=str(path), folder=repr(str(folder)))
    return path


#: The name `atomic_open` gives its temporary file beside ``NAME``: ``.NAME.<12 hex digits>.tmp``
TEMPORARY_NAME = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")


def remove_temporaries(folder) -> list[Path]:
    """Remove the temporary files a writer killed outright (SIGKILL) left in ``folder``; return them.

    Only files named as `atomic_open` names its temporaries go; a finished file never has such a
    name. Call it where no writer is at work in ``folder``: when a run resumes, or after the
    processes that wrote there have stopped. A missing folder holds none.
    """
    try:
        found = [path for path in Path(folder).iterdir() if TEMPORARY_NAME.fullmatch(path.name) and path.is_file()]
    except FileNotFoundError:
        return []
    for path in found:
        path.unlink(missing_ok=True)
    return found


def _create_beside(path: Path) -> tuple[Path, int]:
    """Create a new, empty temporary file next to ``path`` and return its path and descriptor."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            # The kernel applies the umask to 0o666 here, exactly as for open(path, "w"); tempfile.mkstemp
            # would make the file private (0o600) instead.
            return temporary, os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file next to {path}: 100 random names were taken")


def _fsync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries to disk, so that a rename into it survives a power cut."""
    if os.name != "posix":
        return  # Windows cannot open a folder with os.open, so there is no handle to flush
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
