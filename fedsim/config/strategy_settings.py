"""What a config's strategy-specific settings mean to its strategies: a method's own options, and the errors for a
setting that no strategy of a run reads (`fedsim.config.strategies.SETTINGS`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..references import shown
from .strategies import SETTINGS, Strategy, get_strategy


def check_algorithm_options(strategy: Strategy, options) -> dict:
    """Return ``options`` (name -> value) checked against the options ``strategy``'s algorithm declares.

    Examples
    --------
    >>> check_algorithm_options(get_strategy("fedavg"), {"alpha": 0.1})
    Traceback (most recent call last):
    ValueError: `algorithm_options` sets 'alpha', but `strategy`='fedavg' declares no options; remove it
    """
    if not isinstance(options, dict):
        raise TypeError(f"`algorithm_options` must be a table of option = value, got {options!r}")
    declared = {} if strategy.algorithm is None else strategy.algorithm.options
    checked = {}
    for name, value in options.items():
        if name not in declared:
            known = f"its options: {', '.join(sorted(declared))}" if declared else "declares no options"
            raise ValueError(f"`algorithm_options` sets {name!r}, but `strategy`={strategy.label!r} "
                             f"{'has no such option; ' + known if declared else known}; remove it")
        checked[name] = declared[name].check(name, value)
    return checked


def unread_message(field: str, value, rules: Mapping[str, str], comparison: bool) -> str:
    """Return the error for ``field`` set to ``value`` where no strategy in ``rules`` (name -> weight rule) reads it.

    Where a user's algorithm among them declares an option of that name, the way out is that option.
    """
    setting = SETTINGS[field]
    names = list(rules)
    shown_names = [shown(name) for name in names]
    context = f"`strategies`={','.join(shown_names)!r}" if comparison else f"`strategy`={shown_names[0]!r}"
    if (owner := option_owner(field, names)) is not None:
        return (f"`{field}`={value!r} does nothing with {context} (it is {setting.purpose}); "
                f"{owner.algorithm.__name__}'s own option {field} is set with `algorithm_options` {field}={value!r}")
    listed = [name for name in names if name in setting.strategies]
    if listed:  # a strategy that reads it is there, but under another weight rule
        context, way_out = f"`weights`={rules[listed[0]]!r}", f"use `weights`={setting.weights!r}"
    else:
        readers = " or ".join(repr(name) for name in sorted(setting.strategies))
        way_out = f"add {readers} to `strategies`" if comparison else f"use `strategy`={readers}"
        if setting.weights:
            way_out += f" with `weights`={setting.weights!r}"
    return f"`{field}`={value!r} does nothing with {context} (it is {setting.purpose}); remove it or {way_out}"


def option_owner(field: str, names: Iterable[str]) -> Strategy | None:
    """Return the first strategy of ``names`` whose user algorithm declares an option called ``field``, or ``None``."""
    for name in names:
        strategy = get_strategy(name)
        if strategy.algorithm is not None and field in strategy.algorithm.options:
            return strategy
    return None


def check_option_meant(field: str, value, rules: Mapping[str, str], options: Mapping) -> None:
    """Refuse a comparison's ``field`` that a user's algorithm in it declares as an option, unset in ``options``.

    ``rules`` maps each strategy of the comparison to its weight rule. Where the algorithm does not
    read the field, the field would reach the strategies that do (``mu`` makes fedavg run as
    fedprox) while the algorithm ran with its option's default: surely not what was meant.
    """
    names = list(rules)
    owner = option_owner(field, [name for name in names if not get_strategy(name).reads(field, rules[name])])
    if owner is None or field in options:
        return
    readers = " and ".join(repr(shown(name)) for name in names if get_strategy(name).reads(field, rules[name]))
    default = owner.algorithm.options[field].default
    raise ValueError(f"`{field}`={value!r} is {SETTINGS[field].purpose}, which {shown(owner.name)!r} does not read: "
                     f"{readers} would take it while its own option {field} stayed {default!r}; set that option with "
                     f"`algorithm_options` {field}={value!r}, and give `{field}` too only if {readers} should take it")
