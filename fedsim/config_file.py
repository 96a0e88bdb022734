"""Where a run's settings come from: a ``--config FILE.toml``, a mapping (``config.json``, Flower's run config),
flags laid over a file. Every error names the source, and for a file the line where it can.

`fedsim.config.RunConfig` is what they become; this module reads and merges them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from partitions._io import read_text

from .config import RunConfig
from .partitioning import SCHEME_SETTINGS
from .strategies import SETTINGS


def read_settings(path) -> dict:
    """Return the settings of a TOML file of `fedsim.config.RunConfig` fields (flat, or under ``[run]``).

    Each value is checked on its own (its type, range or choices) before the flags are laid
    over the file, so that a bad value is reported even where a flag overrides it, with the
    file and line to fix. Whether the values fit together is checked once merged.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError, TypeError
        The file is not UTF-8 TOML, has keys outside ``[run]``, or holds a bad value.
    """
    path = Path(path)
    text = read_text(path, "TOML file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path} is not valid TOML: {error}") from None
    if "run" in data:
        if not isinstance(data["run"], dict):
            raise ValueError(f"`run` in {path} must be a table ([run]), got {data['run']!r}")
        stray = sorted(set(data) - {"run"})
        if stray:
            raise ValueError(f"{path} has key {stray[0]!r} outside its [run] table; put every setting in [run]")
        data = data["run"]
    values = field_values(data, str(path))
    for name, value in values.items():
        try:
            RunConfig(**_where_read(name), **{name: value})
        except (ValueError, TypeError) as error:
            raise type(error)(f"{path}{_line_of(text, name)}: {error}") from None
    return data


def merge_settings(base: Mapping, overrides: Mapping) -> dict:
    """Return ``base`` updated by ``overrides``, merging their ``dataset_options`` tables key by key."""
    merged = {**base, **overrides}
    if isinstance(base.get("dataset_options"), dict) and isinstance(overrides.get("dataset_options"), dict):
        merged["dataset_options"] = {**base["dataset_options"], **overrides["dataset_options"]}
    return merged


def field_values(mapping: Mapping, source: str) -> dict:
    """Return ``mapping`` with dashes in its keys read as underscores, refusing keys that are not fields."""
    known = {field.name for field in fields(RunConfig)}
    values = {str(key).replace("-", "_"): value for key, value in mapping.items()}
    if "dataset_option" in values:  # the flag's own spelling, --dataset-option
        values["dataset_options"] = values.pop("dataset_option")
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {source}; known keys: {', '.join(sorted(known))}")
    return values


def _where_read(name: str) -> dict:
    """Return the settings under which field ``name`` is read, so it can be checked alone."""
    context = {}
    if name in SETTINGS:
        setting = SETTINGS[name]
        context["strategy"] = sorted(setting.strategies)[0]
        if setting.weights:
            context["weights"] = setting.weights
    if name == "weights":
        context["strategy"] = "reweighted"  # it takes every rule
    if name in SCHEME_SETTINGS:
        context["partition"] = SCHEME_SETTINGS[name][0][0]
    return context


def _line_of(text: str, name: str) -> str:
    """Return ", line N" for the line that sets ``name`` (dashes or underscores, quoted or not), or ""."""
    spelled = "[-_]".join(map(re.escape, name.split("_")))
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf'\s*"?{spelled}"?\s*=', line):
            return f", line {number}"
    return ""
