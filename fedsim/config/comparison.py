"""The configs of a comparison: settings given once, each handed to the strategies that read it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields

from ..checks import SettingError, check_choice
from .run_config import FIELD_NAMES, RunConfig, setting_defaults
from .validation import WEIGHT_RULES
from .keys import field_values
from .strategies import check_strategy_names, get_strategy, rule_for
from .strategy_settings import check_option_meant, unread_message
from .timing import ASYNC_SETTINGS, ONLY_FOR, reads_asynchronous_setting


def comparison_configs(mapping: Mapping, strategies: Iterable[str], source: str = "settings") -> dict:
    """Return one config per strategy of a comparison, from settings given once for all of them.

    Each setting goes to the strategies that read it and the others keep its default, so
    ``fraction`` reaches fedavg and ``uneven`` allreduce and reweighted. ``weights``, when
    given, is the rule of every listed strategy that has a choice of rules (reweighted,
    fedavg); allreduce keeps ``equal``.

    Parameters
    ----------
    mapping : mapping
        Field -> value, as in `from_mapping`; ``strategy`` is refused (the list names them).
    strategies : iterable of str
        The strategies compared, each once.
    source : str
        Where the settings come from, for error messages.

    Returns
    -------
    dict
        Strategy name -> `RunConfig`, in the order of ``strategies``.

    Raises
    ------
    ValueError
        For a ``strategy`` key, a setting that no listed strategy reads, a setting that a user's
        algorithm listed declares as an option of its own (`check_option_meant`), or a
        ``weights`` rule that a listed strategy cannot take.

    Examples
    --------
    >>> configs = comparison_configs({"fraction": 0.5}, ["allreduce", "fedavg"])
    >>> configs["allreduce"].fraction, configs["fedavg"].fraction
    (1.0, 0.5)
    """
    names = check_strategy_names(strategies)
    values = field_values(mapping, source, FIELD_NAMES)
    if "strategy" in values:
        raise SettingError("{strategy} does not apply to a comparison, which runs each strategy in {strategies:name}; "
                           "remove it and list the strategies in {strategies:name}", strategy=values["strategy"],
                           strategies=names)
    weights = values.pop("weights", None)
    if weights is not None:
        check_choice("weights", weights, WEIGHT_RULES)
        for name in names:
            rules = get_strategy(name).weight_rules
            if len(rules) > 1 and weights not in rules:
                raise SettingError("{weights} does not apply to {listed:text} in {strategies:name}, which takes "
                                   "{rules:text}; use one of those or remove {listed:text} from {strategies:name}",
                                   weights=weights, strategies=names, listed=repr(name), rules=", ".join(rules))
    rules = {name: rule_for(name, weights) for name in names}
    defaults = setting_defaults()
    options = values.get("algorithm_options") or {}

    def reads(name: str, field: str) -> bool:
        strategy = get_strategy(name)
        if not strategy.reads(field, rules[name]):
            return False
        # fedbuff's and fedasync's settings reach the asynchronous ones (those named so, or all with `asynchronous`),
        # a round's deadline and over-selection the others
        asynchronous = dict(strategy.named_settings).get("asynchronous") or \
            (values.get("asynchronous") if strategy.reads("asynchronous", rules[name]) else None)
        return reads_asynchronous_setting(field, asynchronous)

    for field, value in values.items():
        if field not in defaults or value == defaults[field]:
            continue
        if field in ASYNC_SETTINGS and not any(reads(name, field) for name in names):
            server = ONLY_FOR.get(field, "fedbuff or fedasync")
            raise SettingError("{setting} is read by {server:text} alone, which {strategies:name} does not list (nor "
                               "{asynchronous:name} make); list it or remove {setting:name}", fields={"setting": field},
                               setting=value, server=server, strategies=names)
        if not any(reads(name, field) for name in names):
            raise unread_message(field, value, rules, comparison=True)
        check_option_meant(field, value, rules, options)
    unread = [option for option in options if not any(get_strategy(name).own_options({option: 0}) for name in names)]
    if unread:
        raise SettingError("{algorithm_options:name} sets {option:text}, which no strategy in {strategies} declares; "
                           "remove it", algorithm_options=options, option=repr(unread[0]), strategies=",".join(names))
    configs = {}
    for name in names:
        strategy = get_strategy(name)
        own = {field: value for field, value in values.items() if reads(name, field)}
        if "algorithm_options" in own:
            own["algorithm_options"] = strategy.own_options(own["algorithm_options"])
        configs[name] = RunConfig(**own, strategy=name, weights=rules[name])
    return configs


def comparison_settings(configs: Mapping[str, RunConfig]) -> dict:
    """Return the settings, given once, from which `comparison_configs` makes ``configs``: its inverse.

    Each field takes its value in the configs of the strategies that read it (the others hold
    its default); ``weights`` is the rule chosen for the strategies that have a choice of rules,
    ``None`` when each keeps its default. This is what a comparison's ``config.json`` records, so
    that ``fedsim compare --resume`` and ``--config DIR/config.json`` rebuild the same configs.

    Examples
    --------
    >>> configs = comparison_configs({"fraction": 0.5, "uneven": "cycle"}, ["allreduce", "fedavg"])
    >>> settings = comparison_settings(configs)
    >>> settings["fraction"], settings["uneven"], settings["weights"]
    (0.5, 'cycle', None)
    >>> comparison_configs(settings, ["allreduce", "fedavg"]) == configs
    True
    """
    settings = {}
    for field in fields(RunConfig):
        if field.name in ("strategy", "weights"):
            continue
        readers = [config for config in configs.values() if get_strategy(config.strategy).reads(field.name, config.weights)
                   and reads_asynchronous_setting(field.name, config.asynchronous)]
        source = readers[0] if readers else next(iter(configs.values()))
        settings[field.name] = getattr(source, field.name)
        if field.name == "algorithm_options":  # each algorithm holds its own options
            settings[field.name] = {name: value for config in readers for name, value in config.algorithm_options.items()}
    chosen = [config.weights for config in configs.values() if len(rules := get_strategy(config.strategy).weight_rules) > 1
              and config.weights != rules[0]]
    settings["weights"] = chosen[0] if chosen else None
    return settings


def check_same_strategies(out, saved: list[str] | None, given: list[str]) -> None:
    """Refuse to resume the comparison in ``out``, which compares ``saved``, with other strategies ``given``."""
    if saved is not None and list(saved) != list(given):
        raise SettingError("cannot resume {out:text}: it compares {strategies:text}, not {given:text}; resume with "
                           "{strategies} (or leave it out), or choose another {out:name}", out=out,
                           strategies=",".join(saved), given=",".join(given))
