"""What a config's strategy-specific settings mean to its strategies: a method's own options, and the errors for a
setting that no strategy of a run reads (`fedsim.config.strategies.SETTINGS`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..checks import SettingError, SettingTypeError
from ..references import shown
from .strategies import SETTINGS, Strategy, get_strategy


def check_algorithm_options(strategy: Strategy, options) -> dict:
    """Return ``options`` (name -> value) checked against the options ``strategy``'s algorithm declares.

    Examples
    --------
    >>> check_algorithm_options(get_strategy("fedavg"), {"alpha": 0.1})
    Traceback (most recent call last):
    partitions.SettingError: `algorithm_options` sets 'alpha', but `strategy`='fedavg' declares no options; remove it
    """
    if not isinstance(options, dict):
        raise SettingTypeError("{algorithm_options:name} must be a table of option = value, got {got:text}",
                               algorithm_options=options, got=repr(options))
    declared = strategy.options
    checked = {}
    for name, value in options.items():
        if name not in declared:
            known = f"its options: {', '.join(sorted(declared))}" if declared else "declares no options"
            raise SettingError("{algorithm_options:name} sets {option:text}, but {strategy} {known:text}; remove it",
                               algorithm_options=options, option=repr(name), strategy=strategy.label,
                               known="has no such option; " + known if declared else known)
        checked[name] = declared[name].check(name, value)
    return checked


def unread_message(field: str, value, rules: Mapping[str, str], comparison: bool) -> SettingError:
    """Return the error (unraised) for ``field`` set to ``value`` where no strategy in ``rules`` (name -> weight rule)
    reads it; the callers raise it, or give it as their reason.

    Where a user's algorithm among them declares an option of that name, the way out is that option.

    Examples
    --------
    >>> print(unread_message("mu", 0.1, {"allreduce": "equal"}, comparison=False))
    `mu`=0.1 does nothing with `strategy`='allreduce' (it is FedAvg's FedProx weight); remove it or use `strategy`='fedavg'
    """
    setting = SETTINGS[field]
    names = list(rules)
    shown_names = [shown(name) for name in names]
    # {context} is what the setting meets: the strategies, or the weight rule they run with
    fields = {"setting": field, "context": "strategies" if comparison else "strategy", "rule": "weights"}
    values = dict(setting=value, context=",".join(shown_names) if comparison else shown_names[0], rule=setting.weights)
    does_nothing = "{setting} does nothing with {context} (it is " + setting.purpose + "); "
    if (owner := option_owner(field, names)) is not None:
        return SettingError(does_nothing + "{owner:text}'s own option {option:text} is set with "
                            "{algorithm_options:name} {option:text}={given:text}", fields=fields,
                            owner=owner.algorithm.__name__, option=field, given=repr(value), **values)
    listed = [name for name in names if name in setting.strategies]
    if listed:  # a strategy that reads it is there, but under another weight rule
        fields["context"], values["context"] = "weights", rules[listed[0]]
        return SettingError(does_nothing + "remove it or use {rule}", fields=fields, **values)
    readers = " or ".join(repr(name) for name in sorted(setting.strategies))
    way_out = "add {readers:text} to {strategies:name}" if comparison else "use {strategy:name}={readers:text}"
    if setting.weights:
        way_out += " with {rule}"
    return SettingError(does_nothing + "remove it or " + way_out, fields=fields, readers=readers, **values)


def option_owner(field: str, names: Iterable[str]) -> Strategy | None:
    """Return the first strategy of ``names`` whose user algorithm declares an option called ``field``, or ``None``."""
    for name in names:
        strategy = get_strategy(name)
        if field in strategy.options:
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
    default = owner.options[field].default
    raise SettingError("{setting} is " + SETTINGS[field].purpose + ", which {owner:text} does not read: {readers:text} "
                       "would take it while its own option {option:text} stayed {default:text}; set that option with "
                       "{algorithm_options:name} {option:text}={given:text}, and give {setting:name} too only if "
                       "{readers:text} should take it", fields={"setting": field}, setting=value,
                       owner=repr(shown(owner.name)), readers=readers, option=field, default=repr(default),
                       given=repr(value), algorithm_options=options)
