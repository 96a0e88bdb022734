"""The strategies, each one configuration of the FedOpt round loop (Reddi et al., ICLR 2021).

=============  ===========================  ==========================================  ========================
strategy       local work per round         weights                                     server optimizer
=============  ===========================  ==========================================  ========================
``allreduce``  one step per rank, repeated  equal (1/K)                                 SGD(lr, momentum, wd)
``reweighted`` one step per rank, repeated  size, class-balanced, dynamic (or equal)    SGD(lr, momentum, wd)
``fedavg``     E local epochs (or tau)      n_k / n (or equal)                          SGD(server_lr, server_momentum)
                                                                                        or FedAdagrad/Adam/Yogi
``scaffold``   as fedavg, drift-corrected   as fedavg                                   as fedavg
``fednova``    as fedavg                    as fedavg, normalised by local steps        as fedavg
``moon``       as fedavg, contrastive loss  as fedavg                                   as fedavg
=============  ===========================  ==========================================  ========================

With plain SGD, tau = 1 and equal weights, fedavg's arithmetic equals allreduce's. What
scaffold, fednova and moon change in FedAvg's round is `fedsim.algorithms.base`.

Most `fedsim.config.RunConfig` fields mean the same to every strategy. The few that do not are
listed once, in `SETTINGS`: which strategies read each, under which weight rule, and what it is.
A config that sets one of them for a strategy that does not read it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..checks import SettingError, SettingTypeError
from ..references import Wanted, canonical, did_you_mean, is_reference, shown
from ..registry import Registry


@dataclass(frozen=True)
class Setting:
    """A config field that only some strategies read.

    Attributes
    ----------
    strategies : frozenset of str
        The strategies that read it.
    purpose : str
        What it is, for error messages ("FedAvg's FedProx weight"): a piece of their template, where a
        setting it names is a placeholder (``{compression:name}``) and a literal brace is doubled.
    weights : str, optional
        The weight rule it belongs to: read only when ``weights`` is this rule.
    """

    strategies: frozenset[str]
    purpose: str
    weights: str | None = None

    def read_by(self, strategy: Strategy, weights: str | None) -> bool:
        """Return whether ``strategy`` with weight rule ``weights`` reads this setting.

        A user's algorithm reads the settings every local-training strategy reads (``LOCAL``).
        """
        read = strategy.base in self.strategies or (strategy.algorithm is not None and LOCAL <= self.strategies)
        return read and self.weights in (None, weights)


_FEDAVG = frozenset({"fedavg"})
#: The strategies that train clients locally for a round: FedAvg and the algorithms built on its round.
LOCAL = frozenset({"fedavg", "scaffold", "fednova", "moon"})
_GRADIENT = frozenset({"allreduce", "reweighted"})
_CLIENT_DP = "client-level DP's {what}; allreduce and reweighted's privacy unit would be a sample: DP-SGD"

#: The strategy-specific fields of `fedsim.config.RunConfig`; every other field is read by every strategy.
SETTINGS: dict[str, Setting] = {
    "fraction": Setting(LOCAL, "FedAvg's fraction C of clients sampled per round"),
    "client_dropout": Setting(LOCAL, "the chance that a sampled client fails to return"),
    "stragglers": Setting(LOCAL, "the share of a round's clients that do partial work"),
    "client_sampling": Setting(LOCAL, "how FedAvg's round samples its clients"),
    **{name: Setting(LOCAL, _CLIENT_DP.format(what=what)) for name, what in (
        ("dp_clip", "clip of each client's update"), ("dp_noise", "noise multiplier"),
        ("dp_target_epsilon", "target epsilon"), ("dp_delta", "delta"), ("dp_accountant", "accountant"),
        ("dp_adaptive_quantile", "adaptive clip's quantile"), ("dp_clip_lr", "adaptive clip's learning rate"),
        ("dp_count_noise", "noise on the count of unclipped updates"))},
    "client_speed": Setting(LOCAL, "the simulated clock's client speeds"),
    "bandwidth": Setting(LOCAL, "the simulated clock's client links"),
    "sample_seconds": Setting(LOCAL, "the simulated clock's seconds per sample"),
    "round_deadline": Setting(LOCAL, "FedAvg's round deadline on the simulated clock"),
    "over_select": Setting(LOCAL, "FedAvg's over-selection of a round's clients"),
    "asynchronous": Setting(LOCAL, "FedAvg's clients run without rounds"),
    "buffer": Setting(LOCAL, "FedBuff's buffer of updates"),
    "concurrency": Setting(LOCAL, "the clients an asynchronous server keeps training"),
    "staleness": Setting(LOCAL, "an asynchronous server's weight of a stale update"),
    "async_alpha": Setting(LOCAL, "FedAsync's mixing weight"),
    "local_epochs": Setting(LOCAL, "FedAvg's local epochs E per round"),
    "local_steps": Setting(LOCAL, "FedAvg's local steps tau per round"),
    "mu": Setting(_FEDAVG, "FedAvg's FedProx weight"),
    "server_lr": Setting(LOCAL, "FedAvg's server learning rate"),
    "server_momentum": Setting(LOCAL, "FedAvg's server momentum, FedAvgM"),
    "server_optimizer": Setting(LOCAL, "FedAvg's server optimizer (FedOpt)"),
    "server_beta1": Setting(LOCAL, "FedOpt's first-moment decay"),
    "server_beta2": Setting(LOCAL, "FedOpt's second-moment decay"),
    "server_tau": Setting(LOCAL, "FedOpt's adaptivity bound"),
    "moon_mu": Setting(frozenset({"moon"}), "MOON's contrastive-loss weight"),
    "client_state_memory": Setting(LOCAL, "the memory the clients' states may take before they spill to disk"),
    "moon_temperature": Setting(frozenset({"moon"}), "MOON's contrastive-loss temperature"),
    "uneven": Setting(_GRADIENT, "how allreduce and reweighted treat shards of different sizes"),
    "fused": Setting(_GRADIENT | {"fedavg", "fednova"}, "the one forward over all ranks (allreduce, reweighted) "
                     "or over the clients that take one step (fedavg, fednova)"),
    "vectorize": Setting(LOCAL, "the clients trained as cohorts (in-process)"),
    "vectorize_chunk": Setting(LOCAL, "the most clients a cohort trains at once"),
    "compression": Setting(_GRADIENT, "allreduce and reweighted's gradient compression"),
    "powersgd_rank": Setting(_GRADIENT, "PowerSGD's rank, with {compression:name}='powersgd'"),
    "sync_bn": Setting(_GRADIENT, "allreduce and reweighted's BatchNorm over all ranks' batches"),
    "dynamic_rule": Setting(frozenset({"reweighted"}), "the dynamic weights' score", weights="dynamic"),
    "temperature": Setting(frozenset({"reweighted"}), "the dynamic weights' softmax temperature", weights="dynamic"),
}


#: FedAvg's round under the names of the methods that are settings of it: FedProx (Li et al., MLSys 2020),
#: FedAvgM (Hsu et al. 2019), FedAdagrad, FedAdam and FedYogi (Reddi et al., ICLR 2021), and its asynchronous
#: servers FedBuff (Nguyen et al., AISTATS 2022) and FedAsync (Xie et al. 2019). The name sets
#: these fields where a config leaves them at their defaults (the values of Flower's and NIID-Bench's
#: baselines); the run itself is fedavg with them, and it records the name of what ran (`run_label`).
NAMED_SETTINGS = {
    "fedprox": {"mu": 0.01},
    "fedavgm": {"server_momentum": 0.9},
    "fedadagrad": {"server_optimizer": "adagrad", "server_lr": 0.01},
    "fedadam": {"server_optimizer": "adam", "server_lr": 0.01},
    "fedyogi": {"server_optimizer": "yogi", "server_lr": 0.01},
    "fedbuff": {"asynchronous": "fedbuff"},
    "fedasync": {"asynchronous": "fedasync"},
}


@dataclass(frozen=True)
class Strategy:
    """How a strategy fills in the round loop.

    Attributes
    ----------
    name : str
    local_training : bool
        Clients train locally and send deltas (fedavg), rather than ranks sending one gradient per step.
    weight_rules : tuple of str
        The ``weights`` rules it accepts; the first is its default.
    algorithm : type, optional
        A user's `fedsim.algorithms.Algorithm` subclass, for a strategy named by reference
        (``path/to/file.py:Name``); the built-in strategies' algorithms are `fedsim.algorithms`'.
    """

    name: str
    local_training: bool
    weight_rules: tuple[str, ...]
    algorithm: type | None = None
    named_settings: tuple[tuple[str, object], ...] = ()

    @property
    def base(self) -> str:
        """The strategy that runs: fedavg for FedAvg's named settings (`NAMED_SETTINGS`), else the name."""
        return "fedavg" if self.named_settings else self.name

    @property
    def label(self) -> str:
        """The strategy's own name: the name, or a user's algorithm's ``name`` (a run's is `run_label`)."""
        return self.name if self.algorithm is None else self.algorithm.name

    def reads(self, setting: str, weights: str | None) -> bool:
        """Return whether this strategy, with weight rule ``weights``, reads config field ``setting``.

        Examples
        --------
        >>> get_strategy("allreduce").reads("mu", "equal"), get_strategy("fedavg").reads("mu", "size")
        (False, True)
        >>> get_strategy("reweighted").reads("temperature", "size")
        False
        """
        if setting == "algorithm_options":
            return bool(self.options)
        return setting not in SETTINGS or SETTINGS[setting].read_by(self, weights)

    @property
    def options(self) -> dict:
        """Return the options of a user's algorithm that ``algorithm_options`` sets (name -> `Option`).

        An option that a setting of its own gives (`fedsim.algorithms.Option`'s ``setting``, FedProx's
        ``mu``) is set by that setting's flag, not here.
        """
        declared = {} if self.algorithm is None else self.algorithm.options
        return {name: option for name, option in declared.items() if option.setting is None}

    def own_options(self, options: Mapping) -> dict:
        """Return the entries of ``options`` (name -> value) that this strategy's algorithm declares."""
        return {name: value for name, value in options.items() if name in self.options}

    def describe(self, config) -> str:
        """Return a one-line description of this strategy under ``config``, named as its row and folder (``config.label``).

        fedavg with a proximal term runs as fedprox, and the line says so, as the table does. A run
        with client-level DP has a second line: its mechanism and the epsilon the run will spend.
        """
        if self.local_training:
            work = f"tau={config.local_steps} steps" if config.local_steps else f"E={config.local_epochs} epochs"
            prox = f", FedProx mu={config.mu}" if config.mu else ""
            if self.name == "moon":
                prox = f", contrastive mu={config.moon_mu} T={config.moon_temperature}"
            if config.algorithm_options:
                prox = ", " + ", ".join(f"{name}={value}" for name, value in sorted(config.algorithm_options.items()))
            line = (f"{config.label}: C={config.fraction}, {work} of B={config.batch_size} at lr={config.lr}{prox}, "
                    f"{config.weights} weights, server {server_step(config)}{clock_text(config)}")
            if config.dp_clip is None:
                return line
            from ..privacy.plan import PrivacyPlan  # the accountant: only where a run has DP
            from .partitioning import training_client_count

            return f"{line}\n  {PrivacyPlan.for_config(config, training_client_count(config)).describe()}"
        rule = f"{config.weights} ({config.dynamic_rule}, T={config.temperature})" if config.weights == "dynamic" \
            else config.weights
        return (f"{self.name}: 1 step of B={config.batch_size} per rank, {rule} weights, "
                f"SGD(lr={config.lr}, momentum={config.momentum}, weight_decay={config.weight_decay})")


def is_algorithm_class(value) -> bool:
    """Return whether ``value`` is a subclass of `fedsim.algorithms.Algorithm`, by its bases' names (no torch here)."""
    bases = {f"{base.__module__}.{base.__qualname__}" for base in getattr(value, "__mro__", ())}
    return isinstance(value, type) and "fedsim.algorithms.base.Algorithm" in bases


def user_strategy(algorithm, reference: str) -> Strategy:
    """Return the strategy of a user's algorithm class (the object ``reference`` names); refuse anything else."""
    if not is_algorithm_class(algorithm):
        raise SettingTypeError("{strategy} is {kind:text}, not a subclass of fedsim.algorithms.Algorithm",
                               strategy=shown(reference), kind=_kind(algorithm))
    if algorithm.name in _BUILT_IN:
        raise SettingError("{strategy} is called {called:text}, a built-in strategy's name; give the class a `name` "
                           "of its own", strategy=shown(reference), called=repr(algorithm.name))
    return Strategy(reference, local_training=True, weight_rules=("size", "equal"), algorithm=algorithm)


def named_values(strategy: Strategy, config, defaults: Mapping) -> dict:
    """Return the fields a named variant (fedadam, fedprox...) sets in ``config``: those at their ``defaults``, and
    ``strategy`` itself, the base that runs. A ``server_optimizer`` other than the name's is refused."""
    values = {"strategy": strategy.base}
    for name, value in strategy.named_settings:
        current = getattr(config, name)
        if current == defaults[name]:
            values[name] = value
        elif name in _NAMING and current != value:
            raise SettingError("{strategy} is fedavg with {setting}; it cannot take {given}: use {named}",
                               fields={"setting": name, "given": name, "named": "strategy"}, strategy=strategy.name,
                               setting=value, given=current, named=_NAMING[name].format(current))
    return values


#: The settings whose value is a named strategy's whole identity: the strategy each other value is.
_NAMING = {"server_optimizer": "fed{}", "asynchronous": "{}"}


def server_label(config) -> str | None:
    """Return the name of FedAvg's server step under ``config``: None for plain SGD, fedavgm, fedadam and the like."""
    if config.server_optimizer != "sgd":
        return f"fed{config.server_optimizer}"
    return "fedavgm" if config.server_momentum > 0 else None


def run_label(config) -> str:
    """Return what ``config`` runs, as its rows, tables and folders name it.

    The strategy's name, FedProx's where fedavg has a proximal term, the asynchronous server's,
    and the server step's where it is not plain SGD: each alone over fedavg (fedbuff, fedadam),
    after ``+`` over what precedes it (fedprox+fedbuff, scaffold+fedadam).

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> [RunConfig(strategy=name).label for name in ("fedavg", "fedadam", "fedprox", "scaffold", "allreduce")]
    ['fedavg', 'fedadam', 'fedprox', 'scaffold', 'allreduce']
    >>> RunConfig(strategy="scaffold", server_optimizer="yogi").label, RunConfig(strategy="fedprox", server_momentum=0.5).label
    ('scaffold+fedyogi', 'fedprox+fedavgm')
    >>> RunConfig(strategy="fedbuff").label, RunConfig(strategy="fedprox", asynchronous="fedasync").label
    ('fedbuff', 'fedprox+fedasync')
    """
    strategy = get_strategy(config.strategy)
    name = strategy.label
    if not strategy.local_training:
        return name
    if name == "fedavg" and config.mu > 0:
        name = "fedprox"
    for part in (config.asynchronous, server_label(config)):
        if part is not None:
            name = part if name == "fedavg" else f"{name}+{part}"
    return name


def _kind(value) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else f"a {type(value).__name__}"


STRATEGIES: Registry[Strategy] = Registry("strategy", "strategy", from_reference=user_strategy,
                                          wanted=Wanted("fedsim.algorithms.Algorithm subclasses", is_algorithm_class))
for _strategy in (
    Strategy("allreduce", local_training=False, weight_rules=("equal",)),
    Strategy("reweighted", local_training=False, weight_rules=("size", "class-balanced", "dynamic", "equal")),
    Strategy("fedavg", local_training=True, weight_rules=("size", "equal")),
    Strategy("scaffold", local_training=True, weight_rules=("size", "equal")),
    Strategy("fednova", local_training=True, weight_rules=("size", "equal")),
    Strategy("moon", local_training=True, weight_rules=("size", "equal")),
    *(Strategy(name, local_training=True, weight_rules=("size", "equal"), named_settings=tuple(settings.items()))
      for name, settings in NAMED_SETTINGS.items()),
):
    STRATEGIES.register(_strategy.name)(_strategy)
_BUILT_IN = frozenset(STRATEGIES.names())


def canonical_names(names: Iterable[str]) -> list[str]:
    """Return strategy names with each file reference's path absolute, as a comparison records them."""
    return [canonical(name, "strategies") if is_reference(name) else name for name in names]


def get_strategy(name: str) -> Strategy:
    """Return the strategy called ``name``, or of the algorithm a reference names; an unknown name lists the known ones."""
    return STRATEGIES.get(name)


def list_strategies() -> list[str]:
    """Return the strategy names."""
    return STRATEGIES.names()


def check_strategy_names(strategies: Iterable[str]) -> list[str]:
    """Return ``strategies`` as a list after checking it is non-empty, known and without repeats.

    Examples
    --------
    >>> check_strategy_names(["fedavg", "fedavg"])
    Traceback (most recent call last):
    partitions.SettingError: `strategies` names 'fedavg' twice; name each strategy once
    """
    names = list(strategies)
    if not names:
        raise SettingError("{strategies:name} is empty: name at least one of {known:text}", strategies=names,
                           known=", ".join(list_strategies()))
    for name in names:
        if name not in STRATEGIES and not is_reference(name):
            raise SettingError("unknown strategy {unknown:text} in {strategies:name}; known: {known:text}{close:text}",
                               strategies=names, unknown=repr(name), known=", ".join(list_strategies()),
                               close=did_you_mean(name, list_strategies()))
    labels = [get_strategy(name).label for name in names]
    repeated = next((label for i, label in enumerate(labels) if label in labels[:i]), None)
    if repeated is not None:
        raise SettingError("{strategies:name} names {repeated:text} twice; name each strategy once", strategies=names,
                           repeated=repr(repeated))
    return names


def rule_for(strategy: str, weights: str | None) -> str:
    """Return the weight rule ``strategy`` runs with when ``weights`` is asked for: it, if it applies."""
    rules = get_strategy(strategy).weight_rules
    return weights if weights in rules else rules[0]


def clock_text(config) -> str:
    """Return what a run's description adds for the simulated clock: its asynchronous server, deadline and
    over-selection ("" for synchronous rounds without them).

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> clock_text(RunConfig(strategy="fedbuff", concurrency=20)), clock_text(RunConfig(round_deadline=2.5))
    ('; fedbuff: 20 clients training, K=10, staleness polynomial:0.5', '; deadline 2.5 s')
    """
    parts = []
    if config.asynchronous is not None:
        training = "a round's clients" if config.concurrency is None else f"{config.concurrency} clients"
        own = f"K={config.buffer}" if config.asynchronous == "fedbuff" else f"alpha={config.async_alpha}"
        parts.append(f"{config.asynchronous}: {training} training, {own}, staleness {config.staleness}")
    if config.round_deadline is not None:
        parts.append(f"deadline {config.round_deadline:g} s")
    if config.over_select:
        parts.append(f"over-selected by {config.over_select:g}")
    return "".join(f"; {part}" for part in parts)


def server_step(config) -> str:
    """Return FedAvg's server optimizer under ``config`` as a short text: SGD(...) or FedAdam(...) and the like."""
    if config.server_optimizer == "sgd":
        return f"SGD(lr={config.server_lr}, momentum={config.server_momentum})"
    betas = f"beta1={config.server_beta1}" + ("" if config.server_optimizer == "adagrad"
                                              else f", beta2={config.server_beta2}")
    name = {"adagrad": "FedAdagrad", "adam": "FedAdam", "yogi": "FedYogi"}[config.server_optimizer]
    return f"{name}(lr={config.server_lr}, {betas}, tau={config.server_tau})"
