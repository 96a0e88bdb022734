"""The optional extras a setting needs, checked before any work: each missing one refused with its install line."""

from __future__ import annotations

import importlib.util

#: The install line of TensorBoard, the package ``tensorboard`` writes with.
TENSORBOARD_INSTALL = "pip install 'fedsim[tensorboard]'"


def check_tensorboard_installed() -> None:
    """Raise naming ``tensorboard`` and the install line when the package is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ValueError(f"`tensorboard` writes TensorBoard's event files with the tensorboard package, which is "
                         f"not installed: {TENSORBOARD_INSTALL}")
