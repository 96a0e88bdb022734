"""`RunConfig`: everything that determines a run, frozen, validated, and saved beside its results."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from .field_docs import with_parameters
from .keys import field_values
from .partitioning import CLASS_ASSIGNMENT_MODE
from .strategies import SETTINGS, get_strategy, run_label
from .validation import check_settings, resolve_paths, resolve_strategy


@dataclass(frozen=True)
class RunConfig:
    """Settings of one run; `fedsim run` flags and ``--config FILE.toml`` keys map onto these fields.

    Most fields mean the same to every strategy. These belong to some strategies only
    (`fedsim.config.strategies.SETTINGS` is the table), and setting one away from its default under a
    strategy that does not read it is an error, not a silent no-op:

    ===================  ==========================================================
    strategy             its own fields
    ===================  ==========================================================
    ``fedavg``           fraction, local_epochs, local_steps, mu, server_lr, server_momentum, server_optimizer,
                         server_beta1, server_beta2, server_tau, fused
    ``scaffold``         as fedavg without mu and fused
    ``fednova``          as fedavg without mu (it reads ``momentum`` into its normalisation)
    ``moon``             as fedavg without mu and fused; moon_mu, moon_temperature
    ``allreduce``        uneven, fused, compression, powersgd_rank, sync_bn
    ``reweighted``       uneven, fused, compression, powersgd_rank, sync_bn; dynamic_rule, temperature with
                         ``weights="dynamic"``
    ===================  ==========================================================

    `for_strategy` switches a config to another strategy, resetting the fields it does not read.

    Every field's meaning is in the Parameters section below, made from
    `fedsim.config.field_docs.FIELD_DOCS`, the text the command line's help shows too.

    Examples
    --------
    >>> RunConfig(strategy="allreduce", mu=5.0)
    Traceback (most recent call last):
    partitions.SettingError: `mu`=5.0 does nothing with `strategy`='allreduce' (it is FedAvg's FedProx weight); remove it or use `strategy`='fedavg'
    >>> RunConfig(strategy="fedavg", mu=5.0).for_strategy("allreduce").mu
    0.0
    """

    strategy: str = "fedavg"
    dataset: str = "mnist-5k"
    data_root: str | None = None
    dataset_options: dict = dataclasses.field(default_factory=dict)
    download: bool = False
    partition_file: str | None = None
    model: str = "cnn"
    norm: str | None = None
    partition: str = "dirichlet"
    partition_options: dict = dataclasses.field(default_factory=dict)
    alpha: float = 0.5
    classes_per_partition: int = 2
    class_assignment_mode: str = CLASS_ASSIGNMENT_MODE
    num_partitions: int = 10
    min_partition_size: int = 10
    self_balancing: bool = False
    max_tries: int = 10
    shards_per_partition: int = 2
    rounds: int = 10
    local_epochs: int = 1
    local_steps: int | None = None
    batch_size: int = 10
    micro_batches: int = 1
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    fraction: float = 1.0
    weights: str | None = None
    dynamic_rule: str = "loss"
    temperature: float = 1.0
    mu: float = 0.0
    moon_mu: float = 1.0
    moon_temperature: float = 0.5
    algorithm_options: dict = dataclasses.field(default_factory=dict)
    client_state_memory: float = 4096.0
    feature_noise: float = 0.0
    server_lr: float = 1.0
    server_momentum: float = 0.0
    server_optimizer: str = "sgd"
    server_beta1: float = 0.9
    server_beta2: float = 0.99
    server_tau: float = 1e-3
    uneven: str = "join"
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    amp: bool = False
    eval_every: int = 1
    checkpoint_every: int = 1
    local_test_fraction: float | None = None
    eval_clients_every: int | None = None
    client_target: float = 0.8
    target_accuracy: float | None = None
    personalize_steps: int | None = None
    holdout_clients: float | None = None
    client_dropout: float = 0.0
    stragglers: float = 0.0
    client_sampling: str = "fixed"
    client_speed: str = "constant"
    bandwidth: str | None = None
    sample_seconds: float = 8e-4
    round_deadline: float | None = None
    over_select: float = 0.0
    asynchronous: str | None = None
    buffer: int = 10
    concurrency: int | None = None
    staleness: str = "polynomial:0.5"
    async_alpha: float = 0.6
    dp_clip: float | None = None
    dp_noise: float | None = None
    dp_target_epsilon: float | None = None
    dp_delta: float = 1e-5
    dp_accountant: str = "rdp"
    dp_adaptive_quantile: float | None = None
    dp_clip_lr: float = 0.2
    dp_count_noise: float | None = None
    tensorboard: str | None = None
    label_smoothing: float = 0.0
    fused: bool = True
    vectorize: bool | None = None
    vectorize_chunk: int = 128
    compression: str = "none"
    powersgd_rank: int = 2
    sync_bn: bool = False

    def __post_init__(self):
        # Three steps, each in `fedsim.config.validation`: file paths made absolute; a strategy that names
        # its settings (fedadam) resolved to its base with them; then every value and combination checked.
        resolve_paths(self)
        strategy = resolve_strategy(self, FIELD_DEFAULTS)
        check_settings(self, strategy, FIELD_DEFAULTS, setting_defaults())

    @property
    def label(self) -> str:
        """What this config runs, as rows, tables and folders name it (`fedsim.config.strategies.run_label`)."""
        return run_label(self)

    @property
    def torch_dtype(self):
        """The `torch.dtype` of ``dtype`` (torch is imported here, so that this module loads without it)."""
        import torch

        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    def for_strategy(self, name: str, *, keep_weights: bool = False) -> RunConfig:
        """Return this config for strategy ``name``: the fields ``name`` does not read back at their defaults.

        Parameters
        ----------
        name : str
            A strategy (`fedsim.config.strategies.list_strategies`).
        keep_weights : bool, default False
            Keep this config's ``weights`` rule when ``name`` accepts it; otherwise, and by
            default, ``weights`` becomes ``name``'s default rule.

        Returns
        -------
        RunConfig
            Every field ``name`` reads is kept; every strategy-specific field it does not read
            (`fedsim.config.strategies.SETTINGS`, judged under the new ``weights``) is reset to its default.

        Examples
        --------
        >>> shared = RunConfig(strategy="reweighted", weights="dynamic", temperature=0.5, uneven="cycle")
        >>> fedavg = shared.for_strategy("fedavg", keep_weights=True)
        >>> fedavg.weights, fedavg.temperature, fedavg.uneven
        ('size', 1.0, 'join')
        >>> shared.for_strategy("reweighted").temperature  # the default rule, size, has no temperature
        1.0
        """
        strategy = get_strategy(name)
        weights = self.weights if keep_weights and self.weights in strategy.weight_rules else None  # its default
        resets = {field: default for field, default in setting_defaults().items()
                  if not strategy.reads(field, weights)}
        return dataclasses.replace(self, strategy=name, weights=weights,
                                   algorithm_options=strategy.own_options(self.algorithm_options), **resets)

    @classmethod
    def from_mapping(cls, mapping, source: str = "config") -> RunConfig:
        """Build a config from a mapping (a ``config.json``'s, less its environment record), rejecting other keys."""
        from ..provenance import ENVIRONMENT_KEY

        settings = {key: value for key, value in mapping.items() if key != ENVIRONMENT_KEY}
        return cls(**field_values(settings, source, FIELD_NAMES))

    def to_dict(self) -> dict:
        """Return every field as plain data (what ``config.json`` holds)."""
        return dataclasses.asdict(self)

    def load_dataset(self):
        """Load the dataset this config names, with its root and options."""
        from ..data import load_dataset

        return load_dataset(self.dataset, root=self.data_root, download=self.download, **self.dataset_options)

    def replace(self, **changes) -> RunConfig:
        """Return a copy with ``changes`` applied (and validated).

        A new ``strategy`` goes through `for_strategy` first: the fields it does not read, and
        ``weights``, return to their defaults unless ``changes`` sets them. Turning client-level DP
        on (``dp_clip``) turns the strategy's default ``weights`` into DP's, equal.
        """
        config = self
        if "strategy" in changes and changes["strategy"] != self.strategy:
            config = self.for_strategy(changes.pop("strategy"))
        if changes.get("dp_clip") is not None and "weights" not in changes \
                and config.weights == get_strategy(config.strategy).weight_rules[0]:
            changes["weights"] = None  # the default rule of a run that turns client-level DP on: equal
        return dataclasses.replace(config, **changes)


RunConfig.__doc__ = with_parameters(RunConfig)
#: Every field's default (the fields with a default factory, the option tables, are left out).
FIELD_DEFAULTS = {field.name: field.default for field in fields(RunConfig) if field.default is not dataclasses.MISSING}
#: Every setting's name: the keys a ``config.json`` or a settings file may hold (besides a file's own).
FIELD_NAMES = frozenset(field.name for field in fields(RunConfig))


def setting_defaults() -> dict:
    """Return the default of every strategy-specific field (`fedsim.config.strategies.SETTINGS`)."""
    return {field.name: field.default for field in fields(RunConfig) if field.name in SETTINGS}
