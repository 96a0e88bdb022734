"""fedsim's Flower app folder (``fedsim/flower_app``) and the run-config TOML ``flwr run`` takes.

The folder is a Flower app as ``flwr run`` expects one: a ``pyproject.toml`` with the
``[tool.flwr.app]`` tables and two small modules, whose apps come from this package. Its
``[tool.flwr.app.config]`` lists every `fedsim.config.RunConfig` field at its default, so that
``flwr run --run-config`` may set any of them (Flower refuses keys the app does not list).
"""

from __future__ import annotations

import json
from pathlib import Path

from ...config.run_config import RunConfig
from .records import APP_ENTRIES, to_run_config

APP_FOLDER = Path(__file__).resolve().parents[2] / "flower_app"


def toml_value(value) -> str:
    """Return ``value`` (a run-config scalar) as TOML.

    Examples
    --------
    >>> toml_value(True), toml_value(0.5), toml_value('a "b"')
    ('true', '0.5', '"a \\\\"b\\\\""')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def toml_entries(entries: dict) -> str:
    """Return ``entries`` (scalars) as the `key = value` lines of a TOML table body."""
    return "".join(f"{name} = {toml_value(value)}\n" for name, value in entries.items())


def default_entries() -> dict:
    """Return what the app's ``[tool.flwr.app.config]`` holds: every field at its default, and the app's entries."""
    return {**to_run_config(RunConfig()), **APP_ENTRIES}
