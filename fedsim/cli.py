"""The ``fedsim`` command line: ``run``, ``compare``, ``partition``, ``datasets``, ``models``.

Training flags are generated from `fedsim.config.RunConfig`'s fields (``--local-epochs`` sets
``local_epochs``), so the flags, ``--config FILE.toml`` keys and ``config.json`` always agree.
Precedence: the field's default, then the TOML file, then flags given on the command line.

Every setting is checked, the data loaded, the partition made and the model built before
anything is printed, so a bad input ends with one error line that names the flag to fix.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys

from partitions.pathological import CLASS_ASSIGNMENT_MODES

from .config import DEVICES, DTYPES, DYNAMIC_RULES, UNEVEN_MODES, WEIGHT_RULES, RunConfig, merge_settings
from .partitioning import SCHEMES

PARTITION_FIELDS = (
    "dataset", "data_root", "dataset_options", "partition", "num_partitions", "alpha", "classes_per_partition",
    "class_assignment_mode", "min_partition_size", "self_balancing", "max_tries", "shards_per_partition", "seed",
)
HELP = {
    "strategy": "allreduce, reweighted or fedavg",
    "dataset": "dataset name (see `fedsim datasets`)",
    "model": "classifier name (see `fedsim models`)",
    "norm": "normalisation layers: batch, group or none (the model's default if unset)",
    "partition": "partition scheme",
    "num_partitions": "clients or ranks K",
    "alpha": "Dirichlet concentration (dirichlet, quantity)",
    "classes_per_partition": "k of pathological #C=k",
    "class_assignment_mode": "how #C=k picks classes; first-deterministic is NIID-Bench's",
    "self_balancing": "dirichlet: NIID-Bench's balance step",
    "max_tries": "dirichlet, quantity: draws made to meet --min-partition-size",
    "rounds": "rounds; every strategy reports after a FedAvg round's worth of samples",
    "local_epochs": "FedAvg local epochs E",
    "local_steps": "FedAvg local steps tau (replaces --local-epochs)",
    "fraction": "FedAvg client fraction C in (0, 1]",
    "weights": "rank/client weights: equal, size, class-balanced, dynamic",
    "dynamic_rule": "reweighted with --weights dynamic: score by loss or gradient cosine",
    "temperature": "reweighted with --weights dynamic: softmax temperature",
    "mu": "FedAvg's FedProx proximal weight",
    "feature_noise": "NIID-Bench feature-noise skew: input noise sigma * i / (K - 1) on partition i",
    "server_lr": "FedAvg server learning rate",
    "server_momentum": "FedAvgM server momentum",
    "uneven": "allreduce/reweighted with uneven shards: join (DDP Join) or cycle",
    "dtype": "float64 makes engines comparable to ~1e-10; float32 is fast",
    "fused": "allreduce/reweighted: one fused forward of K x B samples where per-rank semantics allow",
}
CHOICES = {
    "partition": SCHEMES, "weights": WEIGHT_RULES, "dynamic_rule": DYNAMIC_RULES, "uneven": UNEVEN_MODES,
    "device": DEVICES, "dtype": DTYPES, "class_assignment_mode": CLASS_ASSIGNMENT_MODES,
}
# Library parameters whose names differ from the RunConfig field a flag sets.
PARAMETER_ALIASES = {
    "num_classes_per_partition": "classes_per_partition",  # partitions.pathological
    "scheme": "partition",  # fedsim.partitioning.make_partition
    "root": "data_root",  # fedsim.data.load_dataset
}


def config_flag(field: str) -> str:
    """Return the command-line flag that sets `RunConfig` field ``field``."""
    return "--dataset-option" if field == "dataset_options" else "--" + field.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser, names=None) -> None:
    """Add a flag for each `RunConfig` field in ``names`` (all by default); unset flags stay absent."""
    for field in dataclasses.fields(RunConfig):
        if names is not None and field.name not in names:
            continue
        flag = config_flag(field.name)
        if field.name == "dataset_options":
            parser.add_argument(flag, dest="dataset_options", action=DatasetOption, metavar="KEY=VALUE",
                                default=argparse.SUPPRESS, help="a dataset option, e.g. label_granularity=coarse "
                                "(repeatable)")
            continue
        aliases = [flag, "--scheme"] if field.name == "partition" else [flag]
        help_text = f"{HELP.get(field.name, field.name.replace('_', ' '))} (default {field.default})"
        if "bool" in str(field.type):
            parser.add_argument(*aliases, dest=field.name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)
            continue
        kind = int if "int" in str(field.type) else float if "float" in str(field.type) else str
        parser.add_argument(*aliases, dest=field.name, type=kind, choices=CHOICES.get(field.name),
                            default=argparse.SUPPRESS, help=help_text, metavar=None if field.name in CHOICES else
                            field.name.upper())


# Library parameter -> the flag that sets it: every RunConfig field, the aliases, and compare's list.
PARAMETER_FLAGS = {field.name: config_flag(field.name) for field in dataclasses.fields(RunConfig)}
PARAMETER_FLAGS.update({alias: PARAMETER_FLAGS[field] for alias, field in PARAMETER_ALIASES.items()})
PARAMETER_FLAGS["strategies"] = "--strategies"


def flag_message(message: str) -> str:
    """Return an error message with each backticked library parameter replaced by the flag that sets it.

    A registry's ``name`` takes the flag of the field its kind names ("unknown dataset
    `name`" -> ``--dataset``); the keys of dataset options (after "option") stay as they are.

    Examples
    --------
    >>> flag_message("`num_classes_per_partition`=11 exceeds the 10 classes in `labels`")
    '`--classes-per-partition`=11 exceeds the 10 classes in `labels`'
    >>> flag_message("unknown dataset `name`='imagenet'")
    "unknown dataset `--dataset`='imagenet'"
    """

    def swap(match: re.Match) -> str:
        word, name = match.group(1), match.group(2)
        if word == "option":
            return match.group(0)
        flag = PARAMETER_FLAGS.get(word if name == "name" else name)
        return match.group(0) if flag is None else f"{word + ' ' if word else ''}`{flag}`"

    return re.sub(r"(?:\b(\w+) )?`(\w+)`", swap, message)


class DatasetOption(argparse.Action):
    """Collect ``--dataset-option KEY=VALUE`` into a dict, reading VALUE as TOML would (numbers, booleans)."""

    def __call__(self, parser, namespace, value, option_string=None):
        import tomllib

        key, separator, text = value.partition("=")
        if not separator or not key:
            parser.error(f"--dataset-option needs KEY=VALUE, got {value!r}")
        try:
            parsed = tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError:
            parsed = text  # a bare word such as `coarse` is a string
        options = dict(getattr(namespace, self.dest, None) or {})
        options[key.replace("-", "_")] = parsed
        setattr(namespace, self.dest, options)


def settings_from_args(args) -> tuple[dict, str]:
    """Return the settings of the ``--config`` file (if given) overridden by the flags, and their source."""
    names = {field.name for field in dataclasses.fields(RunConfig)}
    flags = {key: value for key, value in vars(args).items() if key in names}
    if getattr(args, "config", None):
        return merge_settings(RunConfig.read_toml(args.config), flags), str(args.config)
    return flags, "the flags"


def config_from_args(args) -> RunConfig:
    """Return the `RunConfig` of the parsed flags on top of ``--config`` (if given) and the defaults."""
    settings, source = settings_from_args(args)
    return RunConfig.from_mapping(settings, source=source)


def prepare(config: RunConfig):
    """Load the data, make the partition and build the model once, so that a bad setting fails before any output.

    Returns the data and the partition, for the run to reuse.
    """
    from .build import build_model
    from .partitioning import partition_for

    data = config.load_dataset()
    partition = partition_for(config, data.train_labels.numpy())
    build_model(config, data)
    return data, partition


def command_run(args) -> None:
    """Run one strategy and print a one-screen summary."""
    config = config_from_args(args)  # before importing torch, so that a bad setting fails at once
    from .compare import comparison_table
    from .engines.inprocess import run
    from .strategies import get_strategy

    from .results import RunFolder

    RunFolder(args.out).check(resume=args.resume)
    data, partition = prepare(config)
    print(get_strategy(config.strategy).describe(config))
    result = run(config, args.out, resume=args.resume, quiet=args.quiet, data=data, partition=partition)
    print()
    print(comparison_table({config.strategy: result}))
    print(f"\nresults in {args.out}/ (metrics.csv, summary.json, config.json, partition.json, checkpoint.pt)")


def command_compare(args) -> None:
    """Run several strategies on the same partition and initial model; print the comparison."""
    settings, source = settings_from_args(args)
    names = [name.strip() for name in args.strategies.split(",") if name.strip()]
    configs = RunConfig.for_comparison(settings, names, source=source)  # before importing torch
    from .compare import compare, comparison_table
    from .results import RunFolder
    from .strategies import get_strategy

    RunFolder(args.out, kind="comparison").check(resume=args.resume)
    shared = configs.get("fedavg", next(iter(configs.values())))  # FedAvg's settings make the samples grid
    data, partition = prepare(shared)
    for config in configs.values():
        print(get_strategy(config.strategy).describe(config))
    results = compare(shared, names, args.out, resume=args.resume, quiet=args.quiet, configs=configs, data=data,
                      partition=partition)
    print()
    print(comparison_table(results))
    print(f"\ntable: {args.out}/comparison.txt   curves: {args.out}/learning_curves.png   "
          f"rows: {args.out}/metrics.csv   summary: {args.out}/summary.json")


def command_partition(args) -> None:
    """Partition a dataset's training labels, save the partition and print its heterogeneity."""
    from partitions.metrics import summary

    from .partitioning import partition_for

    config = config_from_args(args)
    dataset = config.load_dataset()
    labels = dataset.train_labels.numpy()
    partition = partition_for(config, labels)
    path = partition.save(args.out)
    name = f"{config.dataset} {config.partition}"
    print(summary({name: partition}, labels))
    print(f"partition written to {path}")
    if args.plot:
        from partitions.plot import stacked_bars

        stacked_bars(partition, labels, path=args.plot, title=name, class_names=dataset.class_names)
        print(f"plot written to {args.plot}")


def command_datasets(args) -> None:
    """List the registered datasets."""
    from .data import list_datasets

    print("\n".join(list_datasets()))


def command_models(args) -> None:
    """List the registered classifiers."""
    from .models import list_models

    print("\n".join(list_models()))


def _add_training_command(commands, name, help_text, handler):
    parser = commands.add_parser(name, help=help_text, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--config", help="TOML file of settings (flags given here override it)")
    parser.add_argument("--out", required=True, help="results folder")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser)
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Return the ``fedsim`` argument parser."""
    parser = argparse.ArgumentParser(prog="fedsim", description="Federated / Non-IID simulation for image classification")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_training_command(commands, "run", "train one strategy", command_run)
    compare = _add_training_command(commands, "compare", "compare strategies on one partition", command_compare)
    compare.add_argument("--strategies", default="allreduce,reweighted,fedavg", help="comma-separated strategies")

    partition = commands.add_parser("partition", help="partition a dataset and print its heterogeneity")
    add_config_flags(partition, PARTITION_FIELDS)
    partition.add_argument("--out", required=True, help="where to write the partition (JSON)")
    partition.add_argument("--plot", default=None, help="also draw the label distribution to this PNG")
    partition.set_defaults(handler=command_partition)

    commands.add_parser("datasets", help="list the datasets").set_defaults(handler=command_datasets)
    commands.add_parser("models", help="list the classifiers").set_defaults(handler=command_models)
    return parser


def main(argv=None) -> int:
    """Run the command line; bad input ends with one error line, naming the flag at fault, and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.handler(args)
    except (ValueError, TypeError, RuntimeError, OSError) as error:
        parser.exit(2, f"fedsim {args.command}: error: {flag_message(str(error))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
