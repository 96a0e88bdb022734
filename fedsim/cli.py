"""The ``fedsim`` command line: ``fedsim partition``, ``fedsim datasets``, ``fedsim models``."""

from __future__ import annotations

import argparse
import sys

from .partitioning import SCHEMES


def add_partition_flags(parser: argparse.ArgumentParser) -> None:
    """Add the flags that choose a partition; ``fedsim partition`` and the training commands share them."""
    group = parser.add_argument_group("partition")
    group.add_argument("--dataset", default="mnist-5k", help="dataset name (see `fedsim datasets`)")
    group.add_argument("--data-root", default=None, help="folder holding downloaded datasets")
    group.add_argument("--scheme", "--partition", dest="scheme", choices=SCHEMES, default="dirichlet")
    group.add_argument("--num-partitions", type=int, default=10, help="clients or ranks (default 10)")
    group.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration (default 0.5)")
    group.add_argument("--classes-per-partition", type=int, default=2, help="k of pathological #C=k (default 2)")
    group.add_argument(
        "--class-assignment-mode", choices=("random", "deterministic", "first-deterministic"), default="random",
        help="how pathological partitions pick their classes (default random)",
    )
    group.add_argument("--min-partition-size", type=int, default=10, help="smallest partition (default 10)")
    group.add_argument("--shards-per-partition", type=int, default=2, help="McMahan shards per partition")
    group.add_argument("--seed", type=int, default=0)


def partition_from_args(args, labels):
    """Return the partition the shared flags describe."""
    from .partitioning import make_partition

    return make_partition(
        labels,
        args.scheme,
        num_partitions=args.num_partitions,
        alpha=args.alpha,
        classes_per_partition=args.classes_per_partition,
        class_assignment_mode=args.class_assignment_mode,
        min_partition_size=args.min_partition_size,
        shards_per_partition=args.shards_per_partition,
        seed=args.seed,
    )


def command_partition(args) -> None:
    """Partition a dataset's training labels, save the partition and print its heterogeneity."""
    from partitions.metrics import summary

    from .data import load_dataset

    dataset = load_dataset(args.dataset, root=args.data_root)
    labels = dataset.train_labels.numpy()
    partition = partition_from_args(args, labels)
    path = partition.save(args.out)
    name = f"{args.dataset} {args.scheme}"
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


def build_parser() -> argparse.ArgumentParser:
    """Return the ``fedsim`` argument parser."""
    parser = argparse.ArgumentParser(prog="fedsim", description="Federated / Non-IID simulation for image classification")
    commands = parser.add_subparsers(dest="command", required=True)

    partition = commands.add_parser("partition", help="partition a dataset and print its heterogeneity")
    add_partition_flags(partition)
    partition.add_argument("--out", required=True, help="where to write the partition (JSON)")
    partition.add_argument("--plot", default=None, help="also draw the label distribution to this PNG")
    partition.set_defaults(handler=command_partition)

    commands.add_parser("datasets", help="list the datasets").set_defaults(handler=command_datasets)
    commands.add_parser("models", help="list the classifiers").set_defaults(handler=command_models)
    return parser


def main(argv=None) -> int:
    """Run the command line; bad input ends with one error line and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.handler(args)
    except (ValueError, RuntimeError, FileNotFoundError) as error:
        parser.exit(2, f"fedsim {args.command}: error: {error}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
