"""An error or warning worded in the flags the user typed (`flag_message`), from the settings it carries.

Every fedsim error that names a setting carries it (`fedsim.checks.SettingError`); the command line
words each as the flag that sets it, a switch as typed (``--amp``, ``--no-fused``).
"""

from __future__ import annotations

import dataclasses

from partitions._errors import parameter_word

from ..checks import NAMED_ALONE, Worded
from ..config.run_config import RunConfig
from .flags import FLAG_TYPES, PARAMETER_ALIASES, config_flag

PARAMETER_FLAGS = {field.name: config_flag(field.name) for field in dataclasses.fields(RunConfig)}
PARAMETER_FLAGS.update({alias: PARAMETER_FLAGS[field] for alias, field in PARAMETER_ALIASES.items()})
# a settings file's keys beside the fields, and the training commands' own flags
PARAMETER_FLAGS.update(strategies="--strategies", out="--out", resume="--resume", workers="--workers")
# The true/false fields, whose flags are switches (--amp / --no-amp) rather than --amp=True.
SWITCHES = frozenset({"resume", *(name for name, kind in FLAG_TYPES.items() if kind is bool)})


def flag_word(name: str, value=NAMED_ALONE) -> str:
    """Return how the command line names setting ``name`` (a field or a library parameter), with its value.

    Examples
    --------
    >>> flag_word("num_classes_per_partition", 11), flag_word("amp", True), flag_word("fused", False)
    ('`--classes-per-partition`=11', '`--amp`', '`--no-fused`')
    >>> flag_word("strategy")
    '`--strategy`'
    """
    flag = PARAMETER_FLAGS.get(name)
    if flag is None:  # a parameter no flag sets (`labels` of a library function)
        return parameter_word(name, value)
    if value is NAMED_ALONE:
        return f"`{flag}`"
    if name in SWITCHES and isinstance(value, bool):
        return f"`{flag}`" if value else f"`--no-{flag[2:]}`"
    return f"`{flag}`={value!r}"


def flag_message(error) -> str:
    """Return an error's or warning's message with each setting it names worded as its flag (`flag_word`).

    ``error`` is an exception, a warning or a message; one that carries no settings reads as it is.
    """
    return error.worded(flag_word) if isinstance(error, Worded) else str(error)

