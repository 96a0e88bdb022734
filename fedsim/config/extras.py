"""The optional extras a setting needs, checked before any work: each missing one refused with its install line."""

from __future__ import annotations

import importlib.util

from ..checks import SettingError

#: The install line of TensorBoard, the package ``tensorboard`` writes with.
TENSORBOARD_INSTALL = "pip install 'fedsim[tensorboard]'"


def check_tensorboard_installed() -> None:
    """Raise naming ``tensorboard`` and the install line when the package is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise SettingError("{tensorboard:name} writes TensorBoard's event files with the tensorboard package, which "
                           "is not installed: {install:text}", install=TENSORBOARD_INSTALL)
