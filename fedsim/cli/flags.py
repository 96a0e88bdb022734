"""The flags of the ``fedsim`` command line, generated from `fedsim.config.RunConfig`'s fields.

``--local-epochs`` sets ``local_epochs``, so the flags, ``--config FILE.toml`` keys and
``config.json`` always agree; `fedsim.cli.flag_messages.flag_message` turns the library's parameter
names in an error back into the flags the user typed.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing

from partitions.pathological import CLASS_ASSIGNMENT_MODES

from ..config.field_docs import FIELD_DOCS
from ..config.run_config import RunConfig
from ..config.validation import (COMPRESSIONS, DEVICES, DTYPES, DYNAMIC_RULES, SERVER_OPTIMIZERS, UNEVEN_MODES,
                                 WEIGHT_RULES)
from ..config.partitioning import SCHEMES
from ..config.strategies import list_strategies
from ..references import did_you_mean, is_reference

PARTITION_FIELDS = (
    "dataset", "data_root", "dataset_options", "partition", "partition_options", "num_partitions", "alpha", "classes_per_partition",
    "class_assignment_mode", "min_partition_size", "self_balancing", "max_tries", "shards_per_partition", "seed",
)
NORMS = ("batch", "group", "layer", "none")  # each model takes some of them; the model says which


class LazyChoices:
    """Choices read from a registry on first use, so that a command that never shows them skips its import.

    A reference to user code (``package.module:Name``) is one of the choices too: the registry resolves it.
    """

    def __init__(self, load):
        self._load, self._names = load, None

    def _choices(self) -> list[str]:
        if self._names is None:
            self._names = self._load()
        return self._names

    def __contains__(self, name) -> bool:
        return is_reference(name) or name in self._choices()

    def __iter__(self):
        return iter(self._choices())


class ChoicesOrReference(tuple):
    """Fixed choices, listed in the help, that also take a reference to user code (``path/to/file.py:Name``)."""

    def __contains__(self, name) -> bool:
        return is_reference(name) or tuple.__contains__(self, name)


def _model_names() -> list[str]:
    from ..models import list_models

    return list_models()


CHOICES = {
    "strategy": ChoicesOrReference(list_strategies()), "model": LazyChoices(_model_names), "norm": NORMS,
    "partition": ChoicesOrReference(SCHEMES), "weights": WEIGHT_RULES, "dynamic_rule": DYNAMIC_RULES, "uneven": UNEVEN_MODES,
    "compression": COMPRESSIONS, "server_optimizer": SERVER_OPTIMIZERS, "device": DEVICES, "dtype": DTYPES,
    "class_assignment_mode": CLASS_ASSIGNMENT_MODES,
}
# The table fields, each set one KEY=VALUE entry at a time.
OPTION_FLAGS = {"dataset_options": "--dataset-option", "algorithm_options": "--algorithm-option",
                "partition_options": "--partition-option"}
# Library parameters whose names differ from the RunConfig field a flag sets.
PARAMETER_ALIASES = {
    "num_classes_per_partition": "classes_per_partition",  # partitions.pathological, extended_dirichlet
    "scheme": "partition",  # fedsim.config.partitioning.make_partition
    "root": "data_root",  # fedsim.data.load_dataset
}


def config_flag(field: str) -> str:
    """Return the command-line flag that sets `RunConfig` field ``field``."""
    return OPTION_FLAGS.get(field) or "--" + field.replace("_", "-")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block), suggesting the flag or value meant for a typo.

    An error names the help of the command at fault: ``fedsim run --help`` lists the run's flags,
    which ``fedsim --help`` does not.
    """

    def parse_args(self, args=None, namespace=None):
        # argparse leaves an unknown flag to the top parser, whose help lists only the commands
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.command_parser(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def command_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """Return the parser of the command ``parsed`` chose (``fedsim flower simulate``'s), this one if none."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
                command = action.choices[getattr(parsed, action.dest)]
                return command.command_parser(parsed) if isinstance(command, OneLineParser) else command
        return self

    def error(self, message):
        if message.startswith("unrecognized arguments: "):
            message += _suggestion(self, message.removeprefix("unrecognized arguments: ").split())
        message = _close_choices(self, message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _close_choices(parser: argparse.ArgumentParser, message: str) -> str:
    """Return argparse's "invalid choice" ``message`` with the choices close to the value suggested at its end."""
    match = re.match(r"argument ([^:]+): invalid choice: ('.*?') \(choose from", message)
    action = match and parser._option_string_actions.get(match.group(1).split("/")[0])
    if action is None or action.choices is None:
        return message
    return message + did_you_mean(match.group(2)[1:-1], list(action.choices))


def _suggestion(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """Return "; did you mean --x?" for the first unknown flag close to a flag of ``parser`` or its commands."""
    import difflib

    flags = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                flags |= set(command._option_string_actions)
    for word in words:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=")[0], sorted(flags), n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def add_config_flags(parser: argparse.ArgumentParser, names=None, hidden=()) -> None:
    """Add a flag for each `RunConfig` field in ``names`` (all by default); unset flags stay absent.

    The fields in ``hidden`` still parse (so that using one gets its own error) but stay out of the help.
    """
    for field in dataclasses.fields(RunConfig):
        if names is not None and field.name not in names:
            continue
        flag = config_flag(field.name)
        if field.name in OPTION_FLAGS:
            parser.add_argument(flag, dest=field.name, action=KeyValueOption, metavar="KEY=VALUE",
                                default=argparse.SUPPRESS, help=flag_help(field) + " (repeatable)")
            continue
        aliases = [flag, "--scheme"] if field.name == "partition" else [flag]
        help_text = argparse.SUPPRESS if field.name in hidden else flag_help(field)
        kind = FLAG_TYPES[field.name]
        if kind is bool:
            parser.add_argument(*aliases, dest=field.name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)
            continue
        parser.add_argument(*aliases, dest=field.name, type=kind, choices=CHOICES.get(field.name),
                            default=argparse.SUPPRESS, help=help_text, metavar=_metavar(field.name))


def flag_help(field: dataclasses.Field) -> str:
    """Return a field's help: its `FIELD_DOCS` text with each ````field```` as its flag, then its default.

    A field whose choices are read lazily (the models) lists them here, where argparse reads them
    only when the help is shown; a table field (``KEY=VALUE``) has no default to show.
    """
    text = FIELD_DOCS[field.name]
    for name in FLAG_TYPES:
        text = text.replace(f"``{name}``", config_flag(name))
    if isinstance(CHOICES.get(field.name), LazyChoices):
        text += " (one of %(choices)s)"
    if field.name not in OPTION_FLAGS and "(default" not in text:
        text += f" (default {field.default})"
    return text.replace("%", "%%").replace("%%(choices)s", "%(choices)s")


def flag_type(annotation) -> type:
    """Return the type a flag's value is read as: a field's annotation without ``None`` (``int | None`` -> int).

    Examples
    --------
    >>> flag_type(int | None), flag_type(bool), flag_type(dict)
    (<class 'int'>, <class 'bool'>, <class 'dict'>)
    """
    kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)] or [annotation]
    if len(kinds) != 1:
        raise TypeError(f"a flag reads one type; the annotation {annotation} names {len(kinds)}")
    return kinds[0]


#: Each field's flag type, from `RunConfig`'s annotations.
FLAG_TYPES = {name: flag_type(annotation) for name, annotation in typing.get_type_hints(RunConfig).items()}


def _metavar(name: str) -> str | None:
    """Return the flag's placeholder: its choices where they are fixed, its name where they are read lazily.

    argparse lists the choices when the flag is added; a lazy list (the models) would be read,
    and torch imported, by every command, even one that fails on its first flag.
    """
    if name in CHOICES and not isinstance(CHOICES[name], LazyChoices):
        return None
    return name.upper()


# Library parameter -> the flag that sets it: every RunConfig field, the aliases, compare's list and the folder.
class KeyValueOption(argparse.Action):
    """Collect ``--dataset-option KEY=VALUE`` (or ``--algorithm-option``) into a dict, reading VALUE as TOML would."""

    def __call__(self, parser, namespace, value, option_string=None):
        import tomllib

        key, separator, text = value.partition("=")
        if not separator or not key:
            parser.error(f"{option_string} needs KEY=VALUE, got {value!r}")
        try:
            parsed = tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError:
            parsed = text  # a bare word such as `coarse` is a string
        options = dict(getattr(namespace, self.dest, None) or {})
        options[key.replace("-", "_")] = parsed
        setattr(namespace, self.dest, options)


def add_training_command(commands, name: str, help_text: str, handler, hidden=()) -> argparse.ArgumentParser:
    """Add a command that trains (run, compare, ddp, flower simulate/deploy): the config flags, --out, --resume."""
    parser = commands.add_parser(name, help=help_text)
    table = "flower" if name in ("simulate", "deploy") else name
    parser.add_argument("--config", help="TOML file of settings (or a run's config.json); its keys are the flags' "
                        f"names, its [{table}] table overrides its top-level keys for this command, and flags given "
                        "here override both (default: none)")
    parser.add_argument("--out", help="results folder: new or empty, or a run to --resume (required); out in "
                        "the --config file sets it too")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint, with "
                        "the settings it recorded: only --out is needed, and --rounds to extend it")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, hidden=hidden)
    parser.set_defaults(handler=handler)
    return parser


def add_verbose_flag(command) -> None:
    """Add ``--verbose``: Flower's and Ray's log on the terminal rather than in the run folder's ``flower.log``."""
    command.add_argument("--verbose", action="store_true", help="show Flower's and Ray's log here (default: kept "
                         "in flower.log in the run folder, whose end an error quotes)")
