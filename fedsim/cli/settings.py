"""What every ``fedsim`` command does with its arguments: the settings they give, checked, and the report.

The training commands of `fedsim.cli.commands` and the launchers of `fedsim.cli.launch` both build
on this module, which imports neither.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..checks import SettingError
from ..config.comparison import check_same_strategies
from ..config.files import merge_settings, read_settings, strategy_list, with_source
from ..config.run_config import RunConfig
from ..config.strategies import canonical_names

# What `fedsim compare` compares when neither `--strategies` nor the settings file names strategies.
DEFAULT_STRATEGIES = "allreduce,reweighted,fedavg"


def settings_from_args(args) -> tuple[dict, str]:
    """Return the run's settings and where they come from, setting ``args.out`` (and compare's ``args.strategies``).

    Precedence, lowest first: the fields' defaults; on ``--resume``, the settings the run in
    ``--out`` recorded in its ``config.json`` (so resuming needs only ``--out``, and ``--rounds``
    to extend); the ``--config`` file; the flags. With ``--partition-file`` and no
    ``--num-partitions``, the file's number of partitions is taken; with ``--partition natural``,
    the number of client ids of the dataset.
    """
    names = {field.name for field in dataclasses.fields(RunConfig)}
    flags = {key: value for key, value in vars(args).items() if key in names}
    config_file = getattr(args, "config", None)
    from_file = read_settings(config_file, command=args.command) if config_file else {}
    saved = {}
    if hasattr(args, "resume"):  # a command that trains into a results folder
        args.out = args.out or from_file.get("out")  # the flag wins
        if not args.out:
            raise SettingError("`--out` is required: name the results folder (or set {out:name} in the `--config` "
                               "file)", out=args.out)
        saved = recorded_settings(Path(args.out), args.command) if args.resume else {}
    from_file.pop("out", None)
    if args.command == "compare":
        compared = saved.pop("strategies", None)
        listed = (args.strategies, from_file.pop("strategies", None), compared)
        given = next((strategies for strategies in listed if strategies), DEFAULT_STRATEGIES)
        args.strategies = ",".join(strategy_list(given))
        if compared:  # before the settings meet the other list, which would blame one of them
            check_same_strategies(args.out, strategy_list(compared), canonical_names(strategy_list(given)))
    settings = merge_settings(merge_settings(saved, from_file), flags)
    sources = [f"{args.out}/config.json"] * bool(saved) + [str(config_file)] * bool(config_file)
    source = " and ".join(sources) or "the flags"
    if settings.get("partition_file") and "num_partitions" not in settings:
        from ..config.partitioning import load_partition_file

        settings["num_partitions"] = load_partition_file(settings["partition_file"]).num_partitions
    if settings.get("partition") == "natural" and "num_partitions" not in settings:
        settings["num_partitions"] = count_client_ids(settings)
    return settings, source


def count_client_ids(settings: dict) -> int:
    """Return the number of distinct client ids in the dataset ``settings`` name, the clients of a natural partition.

    Data without ids gives the default count: making the partition then says what is missing.
    """
    import numpy as np

    from ..data import load_dataset

    defaults = {field.name: field.default for field in dataclasses.fields(RunConfig)}
    dataset, root, download = (settings.get(name, defaults[name]) for name in ("dataset", "data_root", "download"))
    data = load_dataset(dataset, root=root, download=download, **settings.get("dataset_options", {}))
    if data.train_client_ids is None:
        return defaults["num_partitions"]
    return len(np.unique(data.train_client_ids))


def recorded_settings(out: Path, command: str) -> dict:
    """Return the settings a run (or, for ``compare``, a comparison) recorded in ``out/config.json``.

    Nothing when ``out`` holds no such run: `fedsim.results.folder.RunFolder.check` then says what it lacks.
    A comparison of an earlier format recorded FedAvg's config; its ``strategy`` is left out.
    """
    from ..results.folder import RunFolder

    path = out / "config.json"
    if not path.is_file() or not RunFolder(out, "comparison" if command == "compare" else "run").holds_run():
        return {}
    settings = read_settings(path, command="compare" if command == "compare" else "run")
    if command == "compare":
        settings.pop("strategy", None)
    return settings


def config_from_args(args) -> RunConfig:
    """Return the `RunConfig` of the parsed flags on top of ``--config`` (if given) and the defaults."""
    settings, source = settings_from_args(args)
    try:
        return RunConfig.from_mapping(settings, source=source)
    except (ValueError, TypeError) as error:
        if source == "the flags":
            raise
        raise with_source(error, "{reason:text} (settings from {source:text} and the flags)", source=source) from None


def prepare(config: RunConfig):
    """Load the data, make the partition, build the model and train it on a tiny batch once, so that a bad
    setting fails before any output (`fedsim.build.check_model_fits`).

    Returns the data and the partition, for the run to reuse.
    """
    from ..build import build_model, check_model_fits
    from ..config.partitioning import partition_for

    data = config.load_dataset()
    partition = partition_for(config, data.train_labels.numpy(), data.train_client_ids)
    check_model_fits(build_model(config, data), config, data, partition)
    return data, partition


def report(config, result, out) -> None:
    """Print a finished run's one-line table and where its folder is."""
    from ..results.table import comparison_table

    print()
    print(comparison_table({config.label: result}))
    print(f"\nresults in {out}/ (as `fedsim run` writes them)")


