"""The library's parameter names in an error message turned back into the flags the user typed (`flag_message`)."""

from __future__ import annotations

import dataclasses
import re

from ..config.run_config import RunConfig
from .flags import PARAMETER_ALIASES, config_flag

PARAMETER_FLAGS = {field.name: config_flag(field.name) for field in dataclasses.fields(RunConfig)}
PARAMETER_FLAGS.update({alias: PARAMETER_FLAGS[field] for alias, field in PARAMETER_ALIASES.items()})
# a settings file's keys beside the fields, and the training commands' own flags
PARAMETER_FLAGS.update(strategies="--strategies", out="--out", resume="--resume", workers="--workers")
# The true/false fields, whose flags are switches (--amp / --no-amp) rather than --amp=True.
SWITCHES = frozenset({"resume", *(field.name for field in dataclasses.fields(RunConfig) if "bool" in str(field.type))})


def flag_message(message: str) -> str:
    """Return an error message with each backticked library parameter replaced by the flag that sets it.

    A registry's ``name`` takes the flag of the field its kind names ("unknown dataset
    `name`" -> ``--dataset``); the keys of dataset options (after "option") stay as they are.

    Examples
    --------
    >>> flag_message("`num_classes_per_partition`=11 exceeds the 10 classes in `labels`")
    '`--classes-per-partition`=11 exceeds the 10 classes in `labels`'
    >>> flag_message("unknown dataset `name`='imagenet'")
    "unknown dataset `--dataset`='imagenet'"
    >>> flag_message("`fused`=False does nothing with `strategy`='scaffold'")
    "`--no-fused` does nothing with `--strategy`='scaffold'"
    """

    def switch(match: re.Match) -> str:
        name, value = match.group(1), match.group(2)
        if name not in SWITCHES:
            return match.group(0)
        return f"`{config_flag(name)}`" if value == "True" else f"`--no-{config_flag(name)[2:]}`"

    message = re.sub(r"`(\w+)`=(True|False)\b", switch, message)  # a switch as typed: --amp, --no-fused

    def swap(match: re.Match) -> str:
        word, name = match.group(1), match.group(2)
        if word == "option":
            return match.group(0)
        flag = PARAMETER_FLAGS.get(word if name == "name" else name)
        return match.group(0) if flag is None else f"{word + ' ' if word else ''}`{flag}`"

    return re.sub(r"(?:\b(\w+) )?`(\w+)`", swap, message)
