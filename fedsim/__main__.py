"""``python -m fedsim``: the command line, as the ``fedsim`` script runs it, and as torchrun starts each rank."""

import os
import sys

from .cli import main


def exit_code(status) -> int:
    """Return the process exit code of a `SystemExit` code or `main`'s return value (printing a message)."""
    if status is None or isinstance(status, int):
        return status or 0
    print(status, file=sys.stderr)
    return 1


try:
    code = exit_code(main())
except SystemExit as stop:
    code = exit_code(stop.code)
launch = sys.modules.get("fedsim.engines.distributed.launch")
if launch is not None and launch.under_torchrun():
    # A rank's run is over: its process group is destroyed and every file it wrote is whole. Python's
    # teardown then runs C++ destructors of torch's globals, where a gloo rank now and then aborts
    # ("terminate called without an active exception") with the run done; leave without them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
