"""What a user's code did wrong: `UserCodeError`, and where that code is defined (`code_place`)."""

from __future__ import annotations

import inspect

from .references import shown_path


class UserCodeError(Exception):
    """A user's code, found and run, did what its contract forbids: a bug to fix there, not bad input.

    The message names the function (`code_place`) and what it did. The command line ends such a
    run with that one line and exit status 1, not the bad-input status 2: no setting fixes it.
    """


def code_place(owner, function: str) -> str:
    """Return where ``owner``'s ``function`` is defined, in words: "`Median.aggregate` in robust.py".

    ``owner`` is an object or a class; the function is named on the class that defines it, which
    may be a base in another file.

    Examples
    --------
    >>> class Doubler:
    ...     def scale(self, weight):
    ...         return 2 * weight
    >>> code_place(Doubler(), "scale").startswith("`Doubler.scale` in ")
    True
    """
    cls = owner if isinstance(owner, type) else type(owner)
    defining = next((base for base in cls.__mro__ if function in vars(base)), cls)
    try:
        path = shown_path(inspect.getfile(defining))
    except (TypeError, OSError):  # defined where no file is (the interpreter's prompt)
        path = defining.__module__
    return f"`{defining.__qualname__}.{function}` in {path}"
