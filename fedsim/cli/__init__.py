"""The ``fedsim`` command line; `main` is its entry point.

``commands`` holds the parser and the commands that train in this process (``run``, ``compare``,
``partition``, ``datasets``, ``models``); ``launch`` the commands that start processes (``ddp``,
``flower``); ``settings`` what both do with their arguments (settings, checks, the report);
``flags`` the flags, made from `fedsim.config.RunConfig`'s fields. Everything here may import
the rest of fedsim; nothing else imports the command line.
"""

from .commands import main

__all__ = ["main"]
