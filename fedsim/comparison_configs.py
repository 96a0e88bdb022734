"""The configs of a comparison: settings given once, each handed to the strategies that read it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .checks import check_choice
from .config import WEIGHT_RULES, RunConfig, setting_defaults
from .config_file import field_values
from .strategies import check_strategy_names, get_strategy, rule_for, unread_message


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
        For a ``strategy`` key, a setting that no listed strategy reads, or a ``weights``
        rule that a listed strategy cannot take.

    Examples
    --------
    >>> configs = comparison_configs({"fraction": 0.5}, ["allreduce", "fedavg"])
    >>> configs["allreduce"].fraction, configs["fedavg"].fraction
    (1.0, 0.5)
    """
    names = check_strategy_names(strategies)
    values = field_values(mapping, source)
    if "strategy" in values:
        raise ValueError(
            f"`strategy`={values['strategy']!r} does not apply to a comparison, which runs each strategy in "
            f"`strategies`; remove it and list the strategies in `strategies`"
        )
    weights = values.pop("weights", None)
    if weights is not None:
        check_choice("weights", weights, WEIGHT_RULES)
        for name in names:
            rules = get_strategy(name).weight_rules
            if len(rules) > 1 and weights not in rules:
                raise ValueError(
                    f"`weights`={weights!r} does not apply to {name!r} in `strategies`, which takes "
                    f"{', '.join(rules)}; use one of those or remove {name!r} from `strategies`"
                )
    rules = {name: rule_for(name, weights) for name in names}
    defaults = setting_defaults()
    for field, value in values.items():
        if field in defaults and value != defaults[field] and not any(
                get_strategy(name).reads(field, rules[name]) for name in names):
            raise ValueError(unread_message(field, value, rules, comparison=True))
    configs = {}
    for name in names:
        strategy = get_strategy(name)
        own = {field: value for field, value in values.items() if strategy.reads(field, rules[name])}
        configs[name] = RunConfig(**own, strategy=name, weights=rules[name])
    return configs
