"""A user's code by reference: ``package.module:Name`` or ``path/to/file.py:Name``, wherever a name is accepted.

`--strategy`, `--model` and `--dataset` take a registered name or a reference to an object of
the user's own code. Every process of a run resolves the same reference from the run's config
(a torchrun rank, a Flower SuperNode or simulation worker), so user code reaches every engine
without a registration that only one process would see:

- a file reference is made absolute once (`canonical`), so that a process started in another
  folder imports the same file; `digest` fingerprints it, so that a resumed run can refuse a
  file that changed since the run started;
- a module reference is imported from ``sys.path``, to which the folder the run started in is
  added (as ``python -m`` adds it); `child_pythonpath` hands that folder to the processes a run
  starts.

Each failure to find the code is one `ValueError` (or `TypeError` for an object of the wrong kind)
naming the parameter that took the reference. Code found, but doing what its contract forbids
(a method's hook returning one tensor too few), is a bug in that code rather than bad input:
`UserCodeError`, which names the function and its file.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checks import SettingError, SettingTypeError, Worded

#: The environment variable holding the folder a run's module references are imported from.
START_FOLDER_ENV = "FEDSIM_START_FOLDER"

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


#: The ready formats of a user's data, by the prefix of ``--dataset`` (`fedsim.data.formats`); not references.
DATASET_FORMATS = ("npz", "imagefolder")


def split_format(name) -> tuple[str, str] | None:
    """Return (format, path) of ``npz:FILE`` or ``imagefolder:DIR``; ``None`` for any other name.

    Examples
    --------
    >>> split_format("npz:data/mine.npz"), split_format("mnist-5k")
    (('npz', 'data/mine.npz'), None)
    """
    if not isinstance(name, str):
        return None
    prefix, separator, path = name.partition(":")
    return (prefix, path) if separator and prefix in DATASET_FORMATS else None


def is_reference(text) -> bool:
    """Return whether ``text`` is a reference to user code (it holds ``:``) rather than a registered name.

    Examples
    --------
    >>> is_reference("cnn"), is_reference("my_pkg.nets:make_net"), is_reference("nets.py:Net")
    (False, True, True)
    """
    return isinstance(text, str) and ":" in text and split_format(text) is None


@dataclass(frozen=True)
class Reference:
    """A parsed reference: a module name or a ``.py`` file, and an attribute of it (dotted for a nested one).

    Attributes
    ----------
    text : str
        The reference as written.
    module : str or None
        The module's import name, for ``package.module:Name``.
    path : pathlib.Path or None
        The file, for ``path/to/file.py:Name``.
    attribute : str
    """

    text: str
    module: str | None
    path: Path | None
    attribute: str

    @classmethod
    def parse(cls, text: str, parameter: str) -> Reference:
        """Parse ``text`` (given as ``parameter``); a malformed one is refused with the two forms.

        Examples
        --------
        >>> Reference.parse("my_pkg.nets:make_net", "model").module
        'my_pkg.nets'
        >>> Reference.parse("nets:", "model")
        Traceback (most recent call last):
        partitions.SettingError: `model`='nets:' is not a reference: write package.module:Name or path/to/file.py:Name
        """
        where, _, attribute = text.rpartition(":")
        if not where or not _ATTRIBUTE.match(attribute):
            raise SettingError("{setting} is not a reference: write package.module:Name or path/to/file.py:Name",
                               fields={"setting": parameter}, setting=text)
        if where.endswith(".py"):
            return cls(text, None, Path(where), attribute)
        if not _MODULE.match(where):
            raise SettingError("{setting}: {where:text} is neither a module name (package.module) nor a .py file",
                               fields={"setting": parameter}, setting=text, where=repr(where))
        return cls(text, where, None, attribute)


def canonical(text: str, parameter: str) -> str:
    """Return ``text`` with a file reference's path made absolute, so that any process finds the same file.

    The file must exist; a module reference is returned as is; ``npz:FILE`` and
    ``imagefolder:DIR`` get their path made absolute too.
    """
    if (data_format := split_format(text)) is not None:
        return f"{data_format[0]}:{Path(data_format[1]).expanduser().resolve()}"
    reference = Reference.parse(text, parameter)
    if reference.path is None:
        return text
    path = reference.path.expanduser().resolve()
    if not path.is_file():
        raise SettingError("{setting}: no file {path:text}", fields={"setting": parameter}, setting=text,
                           path=repr(str(path)))
    return f"{path}:{reference.attribute}"


def digest(text: str) -> str | None:
    """Return the SHA-256 of a file reference's file (``None`` for a module reference), to tell a changed file."""
    reference = Reference.parse(text, "reference")
    if reference.path is None:
        return None
    return hashlib.sha256(reference.path.read_bytes()).hexdigest()


def code_digests(config) -> dict:
    """Return the SHA-256 of each file ``config`` names: by reference (``strategy``, ``model``, ``dataset``,
    ``partition``), and the simulated clock's files of per-client values (``client_speed``, ``bandwidth``), whose
    change would change a resumed run's numbers as silently as a changed method would."""
    texts = {name: getattr(config, name) for name in ("strategy", "model", "dataset", "partition")}
    digests = {name: digest(text) for name, text in texts.items() if is_reference(text) and digest(text) is not None}
    for name in ("client_speed", "bandwidth"):
        value = getattr(config, name, None)
        if isinstance(value, str) and Path(value).is_absolute() and Path(value).is_file():  # made absolute if a file
            digests[name] = hashlib.sha256(Path(value).read_bytes()).hexdigest()
    return digests


@dataclass(frozen=True)
class Wanted:
    """What a reference should name, to list a module's candidates when the name it gives is missing.

    Attributes
    ----------
    what : str
        The kind, in words ("fedsim.algorithms.Algorithm subclasses").
    fits : callable
        Whether an object of the module is of that kind.
    """

    what: str
    fits: Callable[[object], bool]


#: What a reference names when its registry says nothing more: a factory, a function or a class.
CALLABLE = Wanted("functions and classes", callable)


def load(text: str, parameter: str, wanted: Wanted = CALLABLE):
    """Import the object ``text`` refers to; each failure is one error naming ``parameter``.

    A file is imported once per process under a module name of its own, so that every
    resolution of one reference returns the same object (a class stays one class). A name the
    module lacks is refused with the close names and the ``wanted`` objects the module defines.
    """
    reference = Reference.parse(text, parameter)
    module = _import_file(reference, parameter) if reference.path is not None else _import_module(reference, parameter)
    target = module
    for name in reference.attribute.split("."):
        if not hasattr(target, name):
            where = reference.module if reference.path is None else shown_path(reference.path)
            raise SettingError("{setting}: {where:text} has no attribute {attribute:text}{candidates:text}",
                               fields={"setting": parameter}, setting=shown(text), where=repr(where),
                               attribute=repr(reference.attribute),
                               candidates=_candidates(module, reference.attribute, wanted))
        target = getattr(target, name)
    return target


def _candidates(module, name: str, wanted: Wanted) -> str:
    """Return "; its <what>: A, B; did you mean 'A'?" for a name ``module`` lacks: the ``wanted`` objects it defines."""
    defined = sorted(key for key, value in vars(module).items()
                     if not key.startswith("_") and getattr(value, "__module__", None) == module.__name__
                     and wanted.fits(value))
    if not defined:
        return f"; it defines no {wanted.what}"
    return f"; its {wanted.what}: {', '.join(defined)}{did_you_mean(name, defined)}"


def did_you_mean(name, known) -> str:
    """Return "; did you mean 'x'?" for the known names close to ``name`` (difflib's), or "" when none is.

    It ends the message that lists the known names, as the suggestion of a mistyped flag does.

    Examples
    --------
    >>> did_you_mean("fedvag", ["allreduce", "fedavg", "fedavgm", "fednova"])
    "; did you mean 'fedavg', 'fednova' or 'fedavgm'?"
    >>> did_you_mean("imagenet", ["cifar10", "mnist"])
    ''
    """
    if not isinstance(name, str):
        return ""
    close = [repr(word) for word in difflib.get_close_matches(name, [str(word) for word in known], n=3)]
    if not close:
        return ""
    return f"; did you mean {' or '.join([', '.join(close[:-1]), close[-1]] if len(close) > 1 else close)}?"


def shown_path(path) -> str:
    """Return ``path`` as a user would write it: relative to the folder the run started in, when it is inside it.

    A file reference is stored absolute (`canonical`); messages give it back shorter, most often as typed.
    """
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path(start_folder()).resolve()))
    except ValueError:  # outside the start folder: absolute, as stored
        return str(path)


def shown(text: str) -> str:
    """Return a reference with its file's path as `shown_path` gives it (a module reference as it is)."""
    where, separator, attribute = text.rpartition(":")
    return f"{shown_path(where)}:{attribute}" if separator and where.endswith(".py") else text


def _import_module(reference: Reference, parameter: str):
    _add_start_folder()
    try:
        return importlib.import_module(reference.module)
    except ModuleNotFoundError as error:
        parts = (error.name or "").split(".")
        if reference.module.split(".")[: len(parts)] == parts:  # the module itself, not one it imports
            raise SettingError("{setting}: no module named {missing:text} (modules are found from {folder:text} and "
                               "the installed packages)", fields={"setting": parameter}, setting=reference.text,
                               missing=repr(error.name), folder=start_folder()) from None
        raise SettingError("{setting}: importing {module:text} failed: {error:text}", fields={"setting": parameter},
                           setting=reference.text, module=repr(reference.module), error=quoted(error)) from None
    except Exception as error:  # noqa: BLE001 - the user's module raised while importing: one line, its error
        raise _raised(parameter, reference.text, f"importing {reference.module!r}", error) from None


def _import_file(reference: Reference, parameter: str):
    path = reference.path.expanduser().resolve()
    if not path.is_file():
        raise SettingError("{setting}: no file {path:text}", fields={"setting": parameter},
                           setting=shown(reference.text), path=repr(str(path)))
    stem = re.sub(r"\W", "_", path.stem)
    name = f"fedsim_user_{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: a dataclass or pickle in the file looks its module up
    _add_start_folder()
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the user's file raised while importing: one line, its error
        del sys.modules[name]
        raise _raised(parameter, shown(reference.text), f"importing {shown_path(path)!r}", error) from None
    return module


def calling(reference: str, parameter: str, function, /, **arguments):
    """Return ``function(**arguments)``, a user's factory; what it raises becomes one error naming ``parameter``."""
    try:
        return function(**arguments)
    except Exception as error:  # noqa: BLE001 - the user's code failed: one line, with its own error
        raise _raised(parameter, shown(reference), "", error) from None


def _raised(parameter: str, reference: str, doing: str, error: Exception) -> SettingError:
    """Return the error for user code that raised ``error`` while ``doing`` (or, when empty, when called).

    The user's error is `quoted`, so that a setting it names (a fedsim check in the user's code)
    is worded as the rest of the message.
    """
    return SettingError("{setting}: {doing:text} raised {kind:text}: {error:text}" if doing else
                        "{setting} raised {kind:text}: {error:text}", fields={"setting": parameter},
                        setting=reference, doing=doing, kind=type(error).__name__, error=quoted(error))


def quoted(error: BaseException) -> Worded | str:
    """Return ``error`` as the ``{name:text}`` value of a message that quotes it.

    A `Worded` error is kept, so that the settings it names are worded as the quoting message's
    are (flags on the command line); any other is kept as its text alone, so that the message
    pickles to another process without the class of an error raised in a user's module.
    """
    return error if isinstance(error, Worded) else str(error)


def check_callable(value, reference: str, parameter: str, what: str) -> None:
    """Refuse a referenced object that is not callable, saying what ``parameter`` expects."""
    if not callable(value):
        raise SettingTypeError("{setting} is a {kind:text}, not {what:text}", fields={"setting": parameter},
                               setting=shown(reference), kind=type(value).__name__, what=what)


def start_folder() -> str:
    """Return the folder the run started in: module references are imported from it first."""
    return os.environ.get(START_FOLDER_ENV) or os.getcwd()


def _add_start_folder() -> None:
    folder = start_folder()
    if folder not in sys.path:
        sys.path.insert(0, folder)


def child_environment(env: dict) -> dict:
    """Return ``env`` with the run's start folder named, so that a process the run starts imports the same modules."""
    folder = start_folder()
    env = dict(env)
    env[START_FOLDER_ENV] = folder
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, env.get("PYTHONPATH")]))
    return env
