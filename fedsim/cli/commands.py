"""The ``fedsim`` command line: ``run``, ``compare``, ``ddp``, ``flower``, ``partition``, ``datasets``, ``models``,
``strategies``.

Training flags are generated from `fedsim.config.RunConfig`'s fields (`fedsim.cli.flags`); the
commands that start processes, ``ddp`` and ``flower``, are in `fedsim.cli.launch`.
Precedence: the field's default, then (on ``--resume``) the run's own ``config.json``, then the ``--config``
file, then flags given on the command line.

Every setting is checked, the data loaded, the partition made, the model built and the outputs
checked before anything is printed, so a bad input ends with one error line that names the flag
to fix, and exit status 2. Ctrl-C or SIGTERM ends a run with one line that says what is saved and
how to continue, and exit status 130 or 143 (128 + the signal's number, as a shell reports it). A
run whose loss or model stops being finite ends with one line naming the round and the setting to
lower, and exit status 3 (`fedsim.interrupts.DIVERGED`), so that a script can tell it from bad input.
A bug in the user's own code (a method's hook that returns what its contract forbids,
`fedsim.user_code.UserCodeError`) ends with one line naming the function and its file, and exit
status 1 (`USER_CODE_FAILED`): no flag fixes it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import warnings
from pathlib import Path

from .. import __version__
from .flag_messages import flag_message
from .flags import PARTITION_FIELDS, OneLineParser, add_config_flags, add_training_command, add_verbose_flag
from ..config.comparison import comparison_configs
from ..config.files import strategy_list
from .settings import DEFAULT_STRATEGIES, config_from_args, prepare, settings_from_args

#: The exit status of a run stopped by a bug in the user's code: Python's for an error, neither bad input (2) nor
#: divergence (3).
USER_CODE_FAILED = 1


def command_run(args) -> None:
    """Run one strategy and print a one-screen summary."""
    config = config_from_args(args)  # before importing torch, so that a bad setting fails at once
    from ..results.table import comparison_table
    from ..engines.inprocess import run
    from ..engines.inprocess.parallel import check_workers
    from ..results.folder import RunFolder
    from ..config.strategies import get_strategy

    check_workers(args.workers, config)
    RunFolder(args.out).check(resume=args.resume, config=config)
    data, partition = prepare(config)
    print(get_strategy(config.strategy).describe(config))
    result = run(config, args.out, resume=args.resume, quiet=args.quiet, data=data, partition=partition,
                 workers=args.workers)
    print()
    print(comparison_table({config.label: result}))
    if "client_training" in result.summary:  # FedAvg's round: as cohorts, or the loop and why
        print(f"\nclients trained: {result.summary['client_training']}")
    clients = ", clients.csv" if partition.local_test is not None else ""
    print(f"\nresults in {args.out}/ (metrics.csv{clients}, summary.json, learning_curves.png, config.json, "
          "partition.json, checkpoint.pt, model.pt, log.txt)")


def command_compare(args) -> None:
    """Run several strategies on the same partition and initial model; print the comparison."""
    settings, source = settings_from_args(args)
    names = strategy_list(args.strategies)
    configs = comparison_configs(settings, names, source=source)  # before importing torch
    from ..comparison import check_comparison, check_engine, compare, comparison_table
    from ..config.strategies import get_strategy

    check_engine(args.engine, configs, resume=args.resume)
    if args.verbose and args.engine != "flower":
        raise ValueError("`--verbose` shows Flower's and Ray's log: it applies with `--engine flower` only")
    check_comparison(args.out, configs.get("fedavg", next(iter(configs.values()))), configs, names,
                     resume=args.resume)
    shared = configs.get("fedavg", next(iter(configs.values())))  # FedAvg's settings make the samples grid
    data, partition = prepare(shared)
    for config in configs.values():
        print(get_strategy(config.strategy).describe(config))
    results = compare(shared, names, args.out, resume=args.resume, quiet=args.quiet, configs=configs, data=data,
                      partition=partition, engine=args.engine, verbose=args.verbose)
    print()
    print(comparison_table(results))
    print(f"\ntable: {args.out}/comparison.txt   curves: {args.out}/learning_curves.png   "
          f"rows: {args.out}/metrics.csv   summary: {args.out}/summary.json")


def command_partition(args) -> None:
    """Partition a dataset's training labels, save the partition and print its heterogeneity."""
    from partitions.metrics import summary

    from ..config.partitioning import partition_for

    config = config_from_args(args)
    if not str(args.out).lower().endswith(".json"):
        raise ValueError(f"`--out` {args.out} must end in .json: the partition is written as JSON")
    if args.plot and Path(args.plot).resolve() == Path(args.out).resolve():
        raise ValueError(f"`--plot` and `--out` name the same file {args.out}; give the figure its own name")
    outputs = [args.out] + ([args.plot] if args.plot else [])
    for path in outputs:  # before any work: nothing is overwritten unasked, and the plot can be written
        check_new_file(path, "--out" if path == args.out else "--plot", force=args.force)
    if args.plot:
        from partitions.plot import check_figure_path

        try:
            check_figure_path(args.plot)
        except (ValueError, OSError) as error:
            raise type(error)(str(error).replace("`path`", "`--plot`")) from None
    dataset = config.load_dataset()
    labels = dataset.train_labels.numpy()
    partition = partition_for(config, labels, dataset.train_client_ids)
    name = partition.describe()
    if args.plot:
        from partitions.plot import stacked_bars

        stacked_bars(partition, labels, path=args.plot, title=config.dataset, class_names=dataset.class_names)
    path = partition.save(args.out)
    print(summary({f"{config.dataset} {name}": partition}, labels))
    print(f"partition written to {path}" + (f", plot to {args.plot}" if args.plot else ""))


def check_new_file(path, flag: str, *, force: bool) -> None:
    """Refuse a path that cannot be written, and an existing file unless ``--force``: nothing is overwritten unasked."""
    from partitions._io import check_writable

    if check_writable(path, flag).exists() and not force:
        raise ValueError(f"`{flag}` {path} exists; pass `--force` to overwrite it, or choose another path")


def command_datasets(args) -> None:
    """List the registered datasets: embedded, on disk under the data root, or missing."""
    from ..data.where import dataset_table

    print(dataset_table(args.data_root))


def command_models(args) -> None:
    """List the registered classifiers."""
    from ..models import list_models

    print("\n".join(list_models()))


def command_strategies(args) -> None:
    """Print which strategy runs on which engine, and why not where it does not (`fedsim.support`)."""
    from ..config.strategies import check_strategy_names, list_strategies
    from ..support import format_support_table, support_table

    names = check_strategy_names([*list_strategies(), *args.references])
    print(format_support_table(support_table(names), wording=flag_message))


def build_parser() -> argparse.ArgumentParser:
    """Return the ``fedsim`` argument parser."""
    from .launch import add_launch_commands

    parser = OneLineParser(prog="fedsim", description="Federated / Non-IID simulation for image classification")
    parser.add_argument("--version", action="version", version=f"fedsim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    run_command = add_training_command(commands, "run", "train one strategy", command_run)
    run_command.add_argument("--workers", type=int, default=1, help="processes that train a round's clients in "
                             "parallel, this one included, one core each (fedavg, fednova; CPU; default 1)")
    compare = add_training_command(commands, "compare", "compare strategies on one partition", command_compare,
                                    hidden=("strategy",))  # --strategies names them; --strategy gets its own error
    compare.add_argument("--strategies", default=None,
                         help="comma-separated strategies, each run on the same partition and initial model "
                              f"(default: strategies in the --config file, or {DEFAULT_STRATEGIES})")
    compare.add_argument("--engine", choices=("inprocess", "flower"), default="inprocess",
                         help="run the strategies in this process (default), or as a Flower app on Flower's "
                              "simulation engine, one virtual SuperNode per partition")
    add_verbose_flag(compare)

    add_launch_commands(commands)

    partition = commands.add_parser("partition", help="partition a dataset and print its heterogeneity")
    add_config_flags(partition, PARTITION_FIELDS)
    partition.add_argument("--out", required=True, help="where to write the partition, a JSON file (required)")
    partition.add_argument("--plot", default=None, help="also draw the label distribution to this file; its "
                           "extension (.png, .pdf, .svg, ...) sets the format")
    partition.add_argument("--force", action="store_true", help="overwrite --out and --plot if they exist")
    partition.set_defaults(handler=command_partition)

    datasets = commands.add_parser("datasets", help="list the datasets and where each is read from")
    datasets.add_argument("--data-root", default=None, help="folder the on-disk datasets are read from "
                          "(default $FEDSIM_DATA or ~/.cache/fedsim/data)")
    datasets.set_defaults(handler=command_datasets)
    commands.add_parser("models", help="list the classifiers").set_defaults(handler=command_models)
    strategies = commands.add_parser("strategies", help="which strategy runs on which engine, and why not")
    strategies.add_argument("references", nargs="*", metavar="FILE.py:CLASS",
                            help="your own methods, by reference, as more rows of the table")
    strategies.set_defaults(handler=command_strategies)
    return parser


def main(argv=None) -> int:
    """Run the command line; bad input ends with one error line, naming the flag at fault, and exit status 2."""
    from .launch import LaunchInterrupted
    from ..interrupts import DIVERGED, RunDiverged, RunInterrupted, exit_status, ignore_stop_signals, stop_on_sigterm
    from ..interrupts import stop_signal, stopped_by
    from ..user_code import UserCodeError

    stop_on_sigterm()  # SIGTERM then stops a run as Ctrl-C does, through the same handlers
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    name, rank = f"fedsim {args.command}", None
    if args.command == "flower":
        name = f"fedsim flower {args.flower_command}"
    if args.command == "ddp":
        from ..engines.distributed import under_torchrun

        rank = int(os.environ["RANK"]) if under_torchrun() else None
    # A torchrun rank other than 0 on a single node sees what rank 0 sees: rank 0 alone reports bad
    # input, warnings, Ctrl-C and divergence. Failures of its own (a lost peer) it reports, with its rank.
    follower = bool(rank) and os.environ.get("LOCAL_WORLD_SIZE") == os.environ.get("WORLD_SIZE")
    if rank:
        name = f"fedsim ddp rank {rank}"
    warnings.showwarning = (lambda *_, **__: None) if follower else (lambda message, *_, **__: print(
        f"{name}: warning: {flag_message(message)}", file=sys.stderr))
    try:
        args.handler(args)
    except (ValueError, TypeError) as error:
        parser.exit(2, "" if follower else f"{name}: error: {flag_message(error)}\n")
    except (RuntimeError, OSError) as error:
        parser.exit(2, f"{name}: error: {flag_message(error)}\n")
    except RunDiverged as error:
        parser.exit(DIVERGED, "" if follower else f"{name}: error: {flag_message(error)}\n")
    except UserCodeError as error:  # the user's code at fault, named as it is written: no flag to swap in
        parser.exit(USER_CODE_FAILED, "" if follower else f"{name}: error: {error}\n")
    except (RunInterrupted, LaunchInterrupted) as stop:
        ignore_stop_signals()  # a second Ctrl-C or SIGTERM must not turn the one line into a traceback
        # a rank's own command line is not the user's: the launcher, or the user's torchrun line, resumes
        advice = "" if rank is not None else resume_advice(stop, argv)
        parser.exit(exit_status(stop.signum), "" if follower else f"{name}: {stop}{advice}\n")
    except KeyboardInterrupt as stop:
        ignore_stop_signals()
        signum = stop_signal(stop)
        parser.exit(exit_status(signum), "" if follower else
                    f"{name}: {stopped_by(signum)} before the first round; nothing was saved\n")
    return 0


def resume_advice(stop, argv) -> str:
    """Return "; continue with: fedsim ... --resume" when a checkpoint holds something to continue."""
    if stop.checkpoint_round is None:
        return ""
    words = list(sys.argv[1:] if argv is None else argv)
    return "; continue with: fedsim " + shlex.join(words + ([] if "--resume" in words else ["--resume"]))


if __name__ == "__main__":
    sys.exit(main())
