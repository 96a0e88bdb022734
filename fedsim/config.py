"""`RunConfig`: everything that determines a run, frozen, validated, and saved beside its results."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from partitions.pathological import CLASS_ASSIGNMENT_MODES

from .checks import check_choice, check_integer, check_number
from .partitioning import SCHEMES
from .strategies import get_strategy

WEIGHT_RULES = ("equal", "size", "class-balanced", "dynamic")
DYNAMIC_RULES = ("loss", "cosine")
UNEVEN_MODES = ("join", "cycle")
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class RunConfig:
    """Settings of one run; `fedsim run` flags and ``--config FILE.toml`` keys map onto these fields.

    Parameters
    ----------
    strategy : {"allreduce", "reweighted", "fedavg"}
    dataset, model : str
        Registry names (`fedsim datasets`, `fedsim models`).
    dataset_options : dict
        The dataset's own options, e.g. ``{"label_granularity": "coarse"}`` for cifar100 or
        ``{"image_size": 28}`` for digits (``--dataset-option KEY=VALUE`` on the command line).
    norm : str, optional
        Normalisation layers of the model ('batch', 'group', 'none'); the model's default if unset.
    partition : str
        Partition scheme: iid, dirichlet, pathological, shards or quantity.
    alpha, classes_per_partition, class_assignment_mode, num_partitions, min_partition_size, shards_per_partition
        The partition's parameters, as `fedsim partition` takes them.
    rounds : int
        Rounds to run; every strategy reports once per round, after a FedAvg round's worth of
        samples (``fraction * local_epochs * N``, or ``fraction * K * local_steps * batch_size``).
    local_epochs, local_steps : int
        FedAvg's local work per round; ``local_steps`` (tau), when set, replaces the epochs.
    batch_size, lr, momentum, weight_decay : number
        The training optimizer (SGD). For allreduce/reweighted it is the one global optimizer, as
        in a DDP script; for fedavg it is each client's, started fresh every round.
    fraction : float
        FedAvg's fraction C of clients sampled each round, in (0, 1].
    weights : {"equal", "size", "class-balanced", "dynamic"}
        How ranks or clients are weighted: allreduce uses ``equal``; reweighted any; fedavg
        ``size`` (n_k / n, its default) or ``equal``. ``class-balanced`` weights each sample's
        loss by `fedsim.aggregate.class_balance_weights` and the ranks equally.
    dynamic_rule, temperature
        For ``weights="dynamic"``: weights ``softmax(score_k / temperature)`` with the score the
        rank's mean loss (``"loss"``) or the cosine of its gradient to the mean gradient (``"cosine"``).
    mu : float
        FedProx proximal weight.
    feature_noise : float
        NIID-Bench's feature-noise skew: partition ``i`` of ``K`` gets Gaussian input noise of
        standard deviation ``feature_noise * i / (K - 1)`` (`partitions.feature_noise_levels`).
    server_lr, server_momentum : float
        FedAvg's server optimizer (plain averaging is lr 1, momentum 0; FedAvgM sets momentum).
    uneven : {"join", "cycle"}
        allreduce/reweighted with shards of different sizes: ``join`` lets a rank that has run out
        sit out the rest of the epoch (the sum is still divided by K, as DDP's ``Join`` does);
        ``cycle`` restarts it on its reshuffled shard.
    seed : int
    device : {"cpu", "cuda", "auto"}
    amp : bool
    eval_every, checkpoint_every : int
        Evaluate and checkpoint every that many rounds (and always after the last).
    label_smoothing : float
    fused : bool
        allreduce/reweighted: one forward of K x B samples with per-sample loss weights where that
        keeps per-rank semantics (no BatchNorm, no cosine rule); otherwise a loop over ranks.
    """

    strategy: str = "fedavg"
    dataset: str = "mnist-5k"
    data_root: str | None = None
    dataset_options: dict = dataclasses.field(default_factory=dict)
    model: str = "cnn"
    norm: str | None = None
    partition: str = "dirichlet"
    alpha: float = 0.5
    classes_per_partition: int = 2
    class_assignment_mode: str = "random"
    num_partitions: int = 10
    min_partition_size: int = 10
    shards_per_partition: int = 2
    rounds: int = 10
    local_epochs: int = 1
    local_steps: int | None = None
    batch_size: int = 10
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    fraction: float = 1.0
    weights: str | None = None
    dynamic_rule: str = "loss"
    temperature: float = 1.0
    mu: float = 0.0
    feature_noise: float = 0.0
    server_lr: float = 1.0
    server_momentum: float = 0.0
    uneven: str = "join"
    seed: int = 0
    device: str = "cpu"
    amp: bool = False
    eval_every: int = 1
    checkpoint_every: int = 1
    label_smoothing: float = 0.0
    fused: bool = True
    dtype: str = "float32"

    def __post_init__(self):
        strategy = get_strategy(self.strategy)
        check_choice("partition", self.partition, SCHEMES)
        if not isinstance(self.dataset_options, dict):
            raise TypeError(f"`dataset_options` must be a table of option = value, got {self.dataset_options!r}")
        check_choice("dynamic_rule", self.dynamic_rule, DYNAMIC_RULES)
        check_choice("uneven", self.uneven, UNEVEN_MODES)
        check_choice("device", self.device, DEVICES)
        check_choice("dtype", self.dtype, ("float32", "float64"))
        check_choice("class_assignment_mode", self.class_assignment_mode, CLASS_ASSIGNMENT_MODES)
        for name in ("rounds", "local_epochs", "batch_size", "num_partitions", "eval_every", "checkpoint_every",
                     "classes_per_partition", "shards_per_partition"):
            check_integer(name, getattr(self, name), minimum=1)
        for name in ("amp", "fused"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"`{name}` must be true or false, got {getattr(self, name)!r}")
        check_integer("seed", self.seed, minimum=0)
        check_integer("min_partition_size", self.min_partition_size, minimum=0)
        if self.local_steps is not None:
            check_integer("local_steps", self.local_steps, minimum=1)
        check_number("fraction", self.fraction, low=0.0, high=1.0, low_open=True, high_closed=True)
        check_number("lr", self.lr, low=0.0, low_open=True)
        check_number("server_lr", self.server_lr, low=0.0, low_open=True)
        check_number("momentum", self.momentum, low=0.0, high=1.0)
        check_number("server_momentum", self.server_momentum, low=0.0, high=1.0)
        check_number("weight_decay", self.weight_decay, low=0.0)
        check_number("mu", self.mu, low=0.0)
        check_number("feature_noise", self.feature_noise, low=0.0)
        check_number("temperature", self.temperature, low=0.0, low_open=True)
        check_number("alpha", self.alpha, low=0.0, low_open=True)
        check_number("label_smoothing", self.label_smoothing, low=0.0, high=1.0)
        object.__setattr__(self, "weights", self.weights or strategy.weight_rules[0])
        allowed = strategy.weight_rules
        if self.weights not in allowed:
            raise ValueError(
                f"`weights`={self.weights!r} does not apply to `strategy`={self.strategy!r}; "
                f"use one of {', '.join(allowed)}"
                + ("" if self.weights in WEIGHT_RULES else f" (known rules: {', '.join(WEIGHT_RULES)})")
            )

    @classmethod
    def from_mapping(cls, mapping, source: str = "config") -> RunConfig:
        """Build a config from a mapping, rejecting keys that are not fields (dashes read as underscores)."""
        known = {field.name for field in fields(cls)}
        values = {str(key).replace("-", "_"): value for key, value in mapping.items()}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} in {source}; known keys: {', '.join(sorted(known))}")
        return cls(**values)

    @classmethod
    def from_toml(cls, path, **overrides) -> RunConfig:
        """Read a TOML file of fields (flat, or under a ``[run]`` table), then apply ``overrides``."""
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"no config file at {path}") from None
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path} is not valid TOML: {error}") from None
        if "run" in data:
            if not isinstance(data["run"], dict):
                raise ValueError(f"`run` in {path} must be a table ([run]), got {data['run']!r}")
            stray = sorted(set(data) - {"run"})
            if stray:
                raise ValueError(f"{path} has key {stray[0]!r} outside its [run] table; put every setting in [run]")
            data = data["run"]
        if "dataset_options" in overrides and isinstance(data.get("dataset_options"), dict):
            overrides = {**overrides, "dataset_options": {**data["dataset_options"], **overrides["dataset_options"]}}
        return cls.from_mapping({**data, **overrides}, source=str(path))

    def to_dict(self) -> dict:
        """Return every field as plain data (what ``config.json`` holds)."""
        return dataclasses.asdict(self)

    def load_dataset(self):
        """Load the dataset this config names, with its root and options."""
        from .data import load_dataset

        return load_dataset(self.dataset, root=self.data_root, **self.dataset_options)

    def replace(self, **changes) -> RunConfig:
        """Return a copy with ``changes`` applied (and validated)."""
        if "strategy" in changes and "weights" not in changes:
            changes["weights"] = None  # the new strategy's default rule
        return dataclasses.replace(self, **changes)
