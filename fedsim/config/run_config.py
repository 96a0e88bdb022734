"""`RunConfig`: everything that determines a run, frozen, validated, and saved beside its results."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

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

    Parameters
    ----------
    strategy : {"allreduce", "reweighted", "fedavg", "scaffold", "fednova", "moon"} or reference
        `fedsim.config.strategies`; scaffold, fednova and moon are FedAvg's round changed by `fedsim.algorithms.base`.
        A reference ``package.module:Name`` or ``path/to/file.py:Name`` names a user's
        `fedsim.algorithms.Algorithm` subclass (a file's path is stored absolute).
    dataset, model : str
        Registry names (`fedsim datasets`, `fedsim models`), or references to a user's dataset
        loader or model factory, as for ``strategy``.
    data_root : str, optional
        Folder of the dataset files (`fedsim.data.load_dataset`'s ``root``).
    dataset_options : dict
        The dataset's own options, e.g. ``{"label_granularity": "coarse"}`` for cifar100 or
        ``{"image_size": 28}`` for digits (``--dataset-option KEY=VALUE`` on the command line).
    download : bool
        Let torchvision download a dataset's missing files (needs a network); a run may turn it
        on when resumed.
    partition_file : str, optional
        A saved `partitions.Partition` (JSON) to train on instead of making one from the
        partition settings, which must then stay at their defaults; ``num_partitions`` must
        match the file's.
    norm : str, optional
        Normalisation layers of the model ('batch', 'group', 'none'); the model's default if unset.
    partition : str
        Partition scheme: iid, dirichlet, pathological, shards, quantity, extended-dirichlet (#C=k with
        Dir(alpha) among a partition's classes), balanced-dirichlet (Dir(alpha) with equal sizes) or
        natural (one client per id of the dataset's ``train_client_ids``, such as an npz file's
        ``client_train``; ``num_partitions`` must be the number of ids).
    alpha, classes_per_partition, num_partitions, min_partition_size, shards_per_partition
        The partition's parameters, as `fedsim partition` takes them.
    class_assignment_mode : {"first-deterministic", "random", "deterministic"}
        How pathological #C=k picks each partition's classes. The default, NIID-Bench's
        ``"first-deterministic"``, gives partition ``i`` class ``i mod C`` first, so every class is
        held once there are as many partitions as classes; ``"random"`` (the default of
        `partitions.pathological` and flwr-datasets) with 10 partitions, 10 classes and k = 2
        leaves some class held by no one in three draws out of four.
    self_balancing : bool
        Dirichlet partition: NIID-Bench's balance step (`partitions.dirichlet`).
    max_tries : int
        Dirichlet, extended-Dirichlet and quantity partitions: draws made to meet ``min_partition_size``.
    rounds : int
        Rounds to run; every strategy reports once per round, after a FedAvg round's worth of
        samples (``fraction * local_epochs * N``, or ``fraction * K * local_steps * batch_size``).
    local_epochs, local_steps : int
        FedAvg's local work per round; ``local_steps`` (tau), when set, replaces the epochs.
    batch_size, lr, momentum, weight_decay : number
        The training optimizer (SGD). For allreduce/reweighted it is the one global optimizer, as
        in a DDP script; for fedavg it is each client's, started fresh every round.
    micro_batches : int
        Gradient accumulation: each batch of a rank or client in this many forward/backward
        passes before its one optimizer step (DDP's ``no_sync()`` for all but the last).
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
        FedAvg's FedProx proximal weight.
    moon_mu, moon_temperature : float
        MOON's contrastive-loss weight and temperature (Li et al.'s mu and tau; defaults 1 and 0.5).
    client_state_memory : float
        MiB the clients' states (SCAFFOLD's control variates, MOON's previous models) may take in
        memory in a ``fedsim run``; beyond it the least recently used spill to a file in the run
        folder (`fedsim.algorithms.client_state`). It changes no result, so a resumed run may change it.
    algorithm_options : dict
        A user's algorithm's own settings, name -> value, as its class declares them
        (`fedsim.algorithms.Option`; ``--algorithm-option NAME=VALUE`` on the command line).
    feature_noise : float
        NIID-Bench's feature-noise skew: partition ``i`` of ``K`` gets Gaussian input noise of
        standard deviation ``feature_noise * i / (K - 1)`` (`partitions.feature_noise_levels`).
    server_lr, server_momentum : float
        FedAvg's server optimizer (plain averaging is lr 1, momentum 0; FedAvgM sets momentum).
    server_optimizer : {"sgd", "adagrad", "adam", "yogi"}
        FedAvg's server optimizer: SGD, or FedOpt's FedAdagrad, FedAdam, FedYogi (`fedsim.algorithms.fedopt`).
    server_beta1, server_beta2, server_tau : float
        FedOpt's moment decays and adaptivity bound (Reddi et al.'s beta1, beta2, tau; defaults
        0.9, 0.99, 1e-3); beta2 is read by adam and yogi only.
    uneven : {"join", "cycle"}
        allreduce/reweighted with shards of different sizes: ``join`` lets a rank that has run out
        sit out the rest of the epoch (the sum is still divided by K, as DDP's ``Join`` does);
        ``cycle`` restarts it on its reshuffled shard.
    seed : int
    device : {"cpu", "cuda", "auto"}
    dtype : {"float32", "float64"}
        The number type of the model, its updates and the server state. float64 makes every
        engine's arithmetic exact enough to compare engines to ~1e-10; float32 is the fast default.
    amp : bool
    eval_every, checkpoint_every : int
        Evaluate and checkpoint every that many rounds (and always after the last).
    local_test_fraction : float, optional
        In (0, 1): each client's share of samples held back, stratified, to evaluate on (``clients.csv``).
    eval_clients_every : int, optional
        Evaluate on the local test sets every that many rounds (and after the last); default ``eval_every``.
    client_target : float
        The accuracy in [0, 1] whose share of clients at or above it ``metrics.csv`` reports.
    client_dropout, stragglers : float
        FedAvg's round: each sampled client fails to return with chance ``client_dropout`` in [0, 1);
        a share ``stragglers`` of a round's clients does partial work (epochs or steps from 1 to E).
    tensorboard : str, optional
        A folder to write every row as TensorBoard scalars into, one TensorBoard run per strategy
        (``pip install 'fedsim[tensorboard]'``); runs that write a results folder.
    holdout_clients : float, optional
        In (0, 1): a seeded share of clients never trains, evaluated as unseen clients; FedAvg's round.
    personalize_steps : int, optional
        FedAvg-FT: each client fine-tunes the global model this many steps before its local test.
    label_smoothing : float
    compression : {"none", "fp16", "bf16", "int8", "powersgd"}
        allreduce/reweighted: how each rank's gradient travels (`fedsim.comm.compression`); bytes are
        counted at the compressed size. ``powersgd`` runs on ``fedsim ddp`` only.
    powersgd_rank : int
        PowerSGD's matrix approximation rank.
    fused : bool
        allreduce/reweighted: one forward of K x B samples with per-sample loss weights where that
        keeps per-rank semantics (no BatchNorm, no dropout, no cosine
        rule); otherwise a loop over ranks. FedAvg's round: the clients whose round is one SGD
        step on one batch train in one forward and backward
        (`fedsim.engines.inprocess.one_step`); otherwise a loop over clients.
    vectorize : bool, optional
        FedAvg's round in-process: train a round's clients in cohorts with torch.func
        (`fedsim.engines.inprocess.vectorized`). ``None``: where it applies; ``True``: refused where not.
    vectorize_chunk : int
        The most clients a cohort trains at once (three model copies each: parameters, gradients, state).
    sync_bn : bool
        allreduce/reweighted: BatchNorm statistics over every rank's batch at once
        (`fedsim.comm.sync_batchnorm`), rather than each rank's own. The weighted rules then weigh each
        rank's loss, not its gradient, so that the sum is the gradient of the weighted loss.

    Examples
    --------
    >>> RunConfig(strategy="allreduce", mu=5.0)
    Traceback (most recent call last):
    ValueError: `mu`=5.0 does nothing with `strategy`='allreduce' (it is FedAvg's FedProx weight); remove it or use `strategy`='fedavg'
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
    personalize_steps: int | None = None
    holdout_clients: float | None = None
    client_dropout: float = 0.0
    stragglers: float = 0.0
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
        strategy = resolve_strategy(self, _FIELD_DEFAULTS)
        check_settings(self, strategy, _FIELD_DEFAULTS, setting_defaults())

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
        weights = self.weights if keep_weights and self.weights in strategy.weight_rules else strategy.weight_rules[0]
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
        ``weights``, return to their defaults unless ``changes`` sets them.
        """
        config = self
        if "strategy" in changes and changes["strategy"] != self.strategy:
            config = self.for_strategy(changes.pop("strategy"))
        return dataclasses.replace(config, **changes)


_FIELD_DEFAULTS = {field.name: field.default for field in fields(RunConfig) if field.default is not dataclasses.MISSING}
#: Every setting's name: the keys a ``config.json`` or a settings file may hold (besides a file's own).
FIELD_NAMES = frozenset(field.name for field in fields(RunConfig))


def setting_defaults() -> dict:
    """Return the default of every strategy-specific field (`fedsim.config.strategies.SETTINGS`)."""
    return {field.name: field.default for field in fields(RunConfig) if field.name in SETTINGS}
