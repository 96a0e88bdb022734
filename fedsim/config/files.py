"""Where a run's settings come from: a ``--config FILE.toml`` (or a run's ``config.json``), a mapping (Flower's
run config), flags laid over a file. Every error names the source, and for a file the line where it can.

`fedsim.config.RunConfig` is what they become; this module reads and merges them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path

from partitions._io import read_text

from ..checks import SettingError, SettingTypeError
from .keys import field_values, line_of
from .run_config import FIELD_DEFAULTS, FIELD_NAMES, RunConfig
from .partitioning import SCHEME_SETTINGS
from .client_evaluation import ON_LOCAL_TEST_SETS
from ..provenance import ENVIRONMENT_KEY
from .privacy import ADAPTIVE_SETTINGS, DP_SETTINGS, NOISE_SETTINGS
from .timing import ASYNC_SETTINGS, ONLY_FOR
from .strategies import SETTINGS


#: The tables of a settings file that apply to one command each, over the file's top-level keys.
COMMAND_TABLES = ("run", "compare", "ddp", "flower")
#: Keys a settings file may hold besides `RunConfig`'s fields: the results folder and compare's list.
FILE_KEYS = ("out", "strategies")
# What config.json records beside the settings: not settings, so a file read back leaves them out.
#: The key of ``config.json`` holding the SHA-256 of each file of user code the run names.
CODE_DIGESTS = "code_digests"
RECORD_KEYS = (ENVIRONMENT_KEY, "sample_grid", CODE_DIGESTS)


def read_settings(path, command: str = "run") -> dict:
    """Return the settings of a TOML file, or of a run's ``config.json``, for ``command``.

    A TOML file's top-level keys apply to every command; a table named after a command
    (``[run]``, ``[compare]``, ``[ddp]``, ``[flower]``) applies to that command only and overrides
    them, so one file can describe a run and a comparison. Besides `fedsim.config.RunConfig`'s
    fields (dashes or underscores, not both spellings of one key), a file may set ``out``, the
    results folder, and, for ``compare``, ``strategies`` (a list, or comma-separated text).

    A ``.json`` file is read as a run's or a comparison's ``config.json``; what it records
    besides the settings (the environment, the sample grid) is left out.

    Each value is checked on its own (its type, range or choices) before the flags are laid
    over the file, so that a bad value is reported even where a flag overrides it, with the
    file and line to fix. Whether the values fit together is checked once merged.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError, TypeError
        The file is not UTF-8 TOML (or JSON), has an unknown key (named with its line and the
        nearest known key) or a key spelled twice, or holds a bad value.
    """
    path = Path(path)
    is_json = path.suffix.lower() == ".json"
    text = read_text(path, "JSON settings file" if is_json else "TOML file")
    if is_json:
        tables = {None: _read_json(text, path)}
    else:
        tables = _command_tables(text, path)
    settings = {}
    for table, data in tables.items():
        values = field_values(data, str(path), FIELD_NAMES | set(FILE_KEYS), text=text, table=table)
        for name, value in values.items():
            _check_value(name, value, path, line_of(text, name, table))
        if table in (None, command):
            settings = merge_settings(settings, values)
    if "strategies" in settings and command != "compare":
        where = f"{path}{line_of(text, 'strategies', command if command in tables else None)}"
        raise SettingError("{where:text}: {strategies:name} is read by `fedsim compare` only; put it in a [compare] "
                           "table", where=where, strategies=settings["strategies"])
    return settings


def _read_json(text: str, path: Path) -> dict:
    """Return the settings of a ``config.json``, without what it records besides them."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is damaged: it is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is damaged: it holds {type(data).__name__}, not a table of settings")
    return {key: value for key, value in data.items() if key not in RECORD_KEYS}


def _command_tables(text: str, path: Path) -> dict:
    """Return a TOML file's top-level settings (key ``None``) and its command tables (key: the command)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path} is not valid TOML: {error}") from None
    tables = {None: {key: value for key, value in data.items() if key not in COMMAND_TABLES}}
    for command in COMMAND_TABLES:
        if command in data:
            if not isinstance(data[command], dict):
                raise ValueError(f"{path}{line_of(text, command)}: `{command}` must be a table ([{command}]) of the "
                                 f"settings of `fedsim {command}`, got {data[command]!r}")
            tables[command] = data[command]
    return tables


def _check_value(name: str, value, path: Path, line: str) -> None:
    """Check one setting of a file on its own; the error names the file and the line."""
    if name == "out":
        if not isinstance(value, str) or not value:
            raise SettingTypeError("{where:text}: {out:name} must be a folder path (text), got {got:text}",
                                   where=f"{path}{line}", out=value, got=repr(value))
        return
    if name == "strategies":
        from .strategies import check_strategy_names

        try:
            check_strategy_names(strategy_list(value))
        except (ValueError, TypeError) as error:
            raise with_source(error, "{where:text}: {reason:text}", where=f"{path}{line}") from None
        return
    if name == "algorithm_options":  # an algorithm's own: checked against its declarations with the strategy
        if not isinstance(value, dict):
            raise SettingTypeError("{where:text}: {algorithm_options:name} must be a table of option = value, got "
                                   "{got:text}", where=f"{path}{line}", algorithm_options=value, got=repr(value))
        return
    try:  # a field at its default is valid alone; another value is checked where it is read
        alone = name in FIELD_DEFAULTS and value == FIELD_DEFAULTS[name]
        RunConfig(**({} if alone else _where_read(name)), **{name: value})
    except (ValueError, TypeError) as error:
        raise with_source(error, "{where:text}: {reason:text}", where=f"{path}{line}") from None


def with_source(error: ValueError | TypeError, template: str, **values) -> SettingError | SettingTypeError:
    """Return ``error`` told with where its settings come from: a `SettingError` (`SettingTypeError` for a
    ``TypeError``) of ``template``, whose ``{reason:text}`` is ``error``, worded with it.

    Examples
    --------
    >>> error = with_source(SettingError("{mu} must be >= 0", mu=-1.0), "{where:text}: {reason:text}",
    ...                     where="run.toml, line 2")
    >>> str(error), error.worded(lambda name, value: f"`--{name}`={value!r}")
    ('run.toml, line 2: `mu`=-1.0 must be >= 0', 'run.toml, line 2: `--mu`=-1.0 must be >= 0')
    """
    kind = SettingTypeError if isinstance(error, TypeError) else SettingError
    return kind(template, reason=error, **values)


def strategy_list(value) -> list[str]:
    """Return the strategies of ``strategies`` given as comma-separated text or as a list of names."""
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return [name.strip() for name in value]
    raise SettingTypeError("{strategies:name} must be a list of strategy names or comma-separated text, got {got:text}",
                           strategies=value, got=repr(value))


def merge_settings(base: Mapping, overrides: Mapping) -> dict:
    """Return ``base`` updated by ``overrides``, merging their option tables (``dataset_options`` and the like) key by
    key."""
    merged = {**base, **overrides}
    for table in ("dataset_options", "algorithm_options", "partition_options"):
        if isinstance(base.get(table), dict) and isinstance(overrides.get(table), dict):
            merged[table] = {**base[table], **overrides[table]}
    return merged


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
    if name in ON_LOCAL_TEST_SETS:
        context["local_test_fraction"] = 0.5  # any: whether one is set is checked with the other settings
    if name in ASYNC_SETTINGS:  # read by an asynchronous server: the one that reads it
        context["asynchronous"] = ONLY_FOR.get(name, "fedbuff")
    if name == "dp_clip" or name in DP_SETTINGS:  # DP on, with a noise multiplier unless the setting is one
        context.update(dp_clip=1.0, **({} if name in NOISE_SETTINGS else {"dp_noise": 0.0}))
        if name in ADAPTIVE_SETTINGS:
            context["dp_adaptive_quantile"] = 0.5
        if name == "dp_accountant":
            context["client_sampling"] = "poisson"  # the one every accountant takes
        context.pop(name, None)  # dp_clip's own value is the one checked
    return context


def from_toml(path, **overrides) -> RunConfig:
    """Return the `RunConfig` of a TOML file's settings for ``fedsim run`` (top level, then ``[run]``; not ``out``).

    ``overrides`` are laid over the file's settings, as flags are.
    """
    settings = read_settings(path)
    settings.pop("out", None)
    return RunConfig.from_mapping(merge_settings(settings, overrides), source=str(path))
