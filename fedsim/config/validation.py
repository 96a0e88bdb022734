"""The steps that make a `RunConfig` of the values a user gave: paths, strategy, checks.

`RunConfig.__post_init__` runs them in order. `resolve_paths` makes a user's file absolute, so
that every process (a DDP rank, a Flower node started in another folder) finds the same file;
`resolve_strategy` turns a strategy that names its settings (``fedadam`` is FedAvg with Adam on
the server) into its base with those settings; `check_settings` checks every value and every
combination, each failure one error that names the field and the values it may take.
"""

from __future__ import annotations

from pathlib import Path

from partitions.pathological import CLASS_ASSIGNMENT_MODES

from ..checks import SettingError, SettingTypeError, check_choice, check_integer, check_number
from ..references import canonical, is_reference, split_format
from .client_evaluation import check_client_evaluation
from .combinations import check_gradient_settings, check_server_optimizer, check_vectorize
from .extras import check_tensorboard_installed
from .partitioning import SCHEMES, check_scheme_settings
from .privacy import check_privacy, privacy_weights
from .ranges import NUMBER_RANGES, check_float32_scalars
from .strategies import get_strategy, named_values
from .strategy_settings import check_algorithm_options, unread_message
from .timing import check_timing, resolve_distribution_files

WEIGHT_RULES = ("equal", "size", "class-balanced", "dynamic")
DYNAMIC_RULES = ("loss", "cosine")
UNEVEN_MODES = ("join", "cycle")
DEVICES = ("cpu", "cuda", "auto")
DTYPES = ("float32", "float64")
COMPRESSIONS = ("none", "fp16", "bf16", "int8", "powersgd")  # `fedsim.comm.compression` says what each is
#: FedAvg's server step; `fedsim.algorithms.fedopt` says what each is
SERVER_OPTIMIZERS = ("sgd", "adagrad", "adam", "yogi")


def resolve_paths(config) -> None:
    """Make ``config``'s references to a user's files (strategy, model, dataset) absolute paths."""
    for name in ("strategy", "model", "dataset", "partition"):  # a file's path absolute: every process finds it
        if is_reference(getattr(config, name)) or (name == "dataset" and split_format(config.dataset)):
            object.__setattr__(config, name, canonical(getattr(config, name), name))
    resolve_distribution_files(config)


def resolve_strategy(config, defaults: dict):
    """Turn a strategy that names its settings into its base with them; return the strategy that runs.

    Parameters
    ----------
    config : RunConfig
        Changed in place (its ``strategy`` and the named settings), as its fields are being set.
    defaults : dict
        Every field's default: a named setting the user changed is kept.
    """
    strategy = get_strategy(config.strategy)
    if strategy.named_settings:  # fedadam and the like: fedavg with their settings
        for name, value in named_values(strategy, config, defaults).items():
            object.__setattr__(config, name, value)
        strategy = get_strategy(strategy.base)
    return strategy


def check_settings(config, strategy, defaults: dict, strategy_defaults: dict) -> None:
    """Check every value of ``config`` and every combination, storing checked numbers as plain ``int``/``float``.

    Parameters
    ----------
    config : RunConfig
    strategy : fedsim.config.strategies.Strategy
        What `resolve_strategy` returned.
    defaults : dict
        Every field's default.
    strategy_defaults : dict
        The default of every strategy-specific field (`fedsim.config.run_config.setting_defaults`).

    Raises
    ------
    ValueError, TypeError
        Naming the field, its value and what it may be.
    """
    object.__setattr__(config, "algorithm_options", check_algorithm_options(strategy, config.algorithm_options))
    if not is_reference(config.partition):  # else a user's flwr-datasets partitioner, imported where it is used
        check_choice("partition", config.partition, SCHEMES)
    for name in ("dataset_options", "partition_options"):
        if not isinstance(value := getattr(config, name), dict):
            raise SettingTypeError("{setting:name} must be a table of option = value, got {got:text}",
                                   fields={"setting": name}, setting=value, got=repr(value))
    if config.partition_options and not is_reference(config.partition):
        raise SettingError("{partition_options} does nothing with {partition}: they are the arguments of a "
                           "partitioner named by reference (package.module:Name)",
                           partition_options=config.partition_options, partition=config.partition)
    check_choice("dynamic_rule", config.dynamic_rule, DYNAMIC_RULES)
    check_choice("uneven", config.uneven, UNEVEN_MODES)
    check_choice("compression", config.compression, COMPRESSIONS)
    check_choice("server_optimizer", config.server_optimizer, SERVER_OPTIMIZERS)
    check_choice("device", config.device, DEVICES)
    check_choice("dtype", config.dtype, DTYPES)
    check_choice("class_assignment_mode", config.class_assignment_mode, CLASS_ASSIGNMENT_MODES)
    for name in ("amp", "fused", "self_balancing", "download", "sync_bn"):
        if not isinstance(value := getattr(config, name), bool):
            raise SettingTypeError("{setting:name} must be true or false, got {got:text}", fields={"setting": name},
                                   setting=value, got=repr(value))
    # Store the checked values as plain int and float, so that NumPy scalars save to config.json too.
    integers = {name: 1 for name in ("rounds", "local_epochs", "batch_size", "num_partitions", "eval_every",
                                     "checkpoint_every", "classes_per_partition", "shards_per_partition",
                                     "max_tries", "powersgd_rank", "micro_batches", "vectorize_chunk")}
    integers.update(seed=0, min_partition_size=0, **({} if config.local_steps is None else {"local_steps": 1}),
                    **({} if config.eval_clients_every is None else {"eval_clients_every": 1}),
                    **({} if config.personalize_steps is None else {"personalize_steps": 1}))
    for name, minimum in integers.items():
        object.__setattr__(config, name, check_integer(name, getattr(config, name), minimum=minimum))
    for name, interval in NUMBER_RANGES.items():
        if getattr(config, name) is not None or defaults[name] is not None:
            object.__setattr__(config, name, check_number(name, getattr(config, name), **interval))
    if config.dtype == "float32":
        check_float32_scalars(config)
    object.__setattr__(config, "weights", privacy_weights(config) or strategy.weight_rules[0])
    allowed = strategy.weight_rules
    if config.weights not in allowed:
        known = "" if config.weights in WEIGHT_RULES else f" (known rules: {', '.join(WEIGHT_RULES)})"
        raise SettingError("{weights} does not apply to {strategy}; use one of {allowed:text}{known:text}",
                           weights=config.weights, strategy=config.strategy, allowed=", ".join(allowed), known=known)
    if config.micro_batches > config.batch_size:
        raise SettingError("{micro_batches} must be at most {batch_size}: each micro-batch needs a sample",
                           micro_batches=config.micro_batches, batch_size=config.batch_size)
    if config.local_steps is not None and config.local_epochs != 1:
        raise SettingError("{local_epochs} does nothing when {local_steps} sets the local work; give one of the two",
                           local_epochs=config.local_epochs, local_steps=config.local_steps)
    check_client_evaluation(config, defaults, strategy.local_training)
    check_vectorize(config, defaults)
    if config.tensorboard is not None:  # absolute: a Flower ServerApp runs in another folder
        check_tensorboard_installed()
        object.__setattr__(config, "tensorboard", str(Path(config.tensorboard).expanduser().resolve()))
    if config.amp and config.dtype == "float64":
        raise SettingError("{amp} computes in bfloat16/float16, which defeats {dtype}; use one of the two", amp=True,
                           dtype="float64")
    if config.data_root is not None and not isinstance(config.data_root, str):
        raise SettingTypeError("{data_root:name} must be a folder path (text), got {got:text}",
                               data_root=config.data_root, got=repr(config.data_root))
    for name, field in (("root", "data_root"), ("download", "download"), ("seed", "seed")):
        if name in config.dataset_options:
            raise SettingError("{dataset_options:name} may not set {option:text}: it is the setting {field:name}; "
                               "set that instead", fields={"field": field}, dataset_options=config.dataset_options,
                               option=repr(name), field=getattr(config, field))
    if config.partition_file is not None:
        if not isinstance(config.partition_file, str):
            raise SettingTypeError("{partition_file:name} must be a file path (text), got {got:text}",
                                   partition_file=config.partition_file, got=repr(config.partition_file))
        check_scheme_settings(None, config.to_dict(), defaults)
    check_scheme_settings(config.partition, config.to_dict(), defaults)
    for name, default in strategy_defaults.items():
        value = getattr(config, name)
        if value != default and not strategy.reads(name, config.weights):
            raise unread_message(name, value, {config.strategy: config.weights}, comparison=False)
    check_server_optimizer(config, defaults)
    check_gradient_settings(config)
    check_privacy(config, defaults)
    check_timing(config, defaults)
