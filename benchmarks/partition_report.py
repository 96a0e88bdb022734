"""Partition a dataset's labels under the standard Non-IID schemes; print a table, draw the figures.

Run ``python benchmarks/partition_report.py --dataset mnist-5k --out results/partitions``.
Writes ``summary.txt``, ``summary.json``, one stacked-bar PNG per scheme and a side-by-side
comparison figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from schemes import STANDARD_SCHEMES, slug

from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from fedsim.config.partitioning import partition_for
from partitions.metrics import heterogeneity, summary
from partitions._io import write_atomic
from partitions.plot import compare, stacked_bars


def standard_partitions(labels, num_partitions: int, seed: int) -> dict:
    """Return the schemes NIID-Bench compares: IID, Dir(0.5), Dir(0.1), #C=2 and McMahan shards."""
    return {name: partition_for(RunConfig(num_partitions=num_partitions, seed=seed, **settings), labels)
            for name, settings in STANDARD_SCHEMES.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist-5k")
    parser.add_argument("--num-partitions", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results/partitions")
    args = parser.parse_args(argv)

    dataset = load_dataset(args.dataset)
    labels = dataset.train_labels.numpy()
    schemes = standard_partitions(labels, args.num_partitions, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    table = summary(schemes, labels)
    print(f"{args.dataset}: {labels.size} training labels, {args.num_partitions} partitions, seed {args.seed}\n")
    print(table)
    write_atomic(out / "summary.txt", table + "\n")
    numbers = {name: heterogeneity(partition, labels) for name, partition in schemes.items()}
    write_atomic(out / "summary.json", json.dumps(numbers, indent=2))
    for name, partition in schemes.items():
        stacked_bars(partition, labels, path=out / f"{slug(name)}.png", title=args.dataset)
        partition.save(out / f"{slug(name)}.json")
    compare(schemes, labels, path=out / "comparison.png")
    print(f"\ntables and figures written to {out}/")


if __name__ == "__main__":
    main()
