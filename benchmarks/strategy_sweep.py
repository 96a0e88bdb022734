"""Compare allreduce, reweighted and FedAvg across the standard partitions; write a table and figures.

Run ``python benchmarks/strategy_sweep.py --out results/sweep``. For every partition in
`schemes.STANDARD_SCHEMES` (IID, Dir(0.5), Dir(0.1), #C=2, McMahan shards) it runs
`fedsim.compare.compare` with the same model, initial weights, seeds and sample budget, then
writes ``sweep.txt`` / ``sweep.json`` (final accuracy and bytes per strategy and partition),
``sweep.png`` (grouped bars of final test accuracy) and each partition's own comparison folder.
A rerun with ``--resume`` finishes a sweep that was interrupted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from schemes import STANDARD_SCHEMES, slug

from fedsim.compare import compare
from fedsim.config import RunConfig
from partitions._io import write_atomic
from partitions.plot import save_figure


def sweep_table(results: dict, strategies: list[str]) -> str:
    """Return a plain-text table: one row per partition, final accuracy and MB sent per strategy."""
    header = ["partition", *[f"{s} acc" for s in strategies], *[f"{s} MB" for s in strategies]]
    rows = [[name, *[f"{by[s]['final_test_accuracy']:.4f}" for s in strategies],
             *[f"{by[s]['bytes_communicated'] / 1e6:,.0f}" for s in strategies]] for name, by in results.items()]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
                     for line in lines)


def sweep_figure(results: dict, strategies: list[str], path: Path, title: str) -> None:
    """Draw grouped bars of final test accuracy, one group per partition."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 4), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / len(strategies)
    for i, strategy in enumerate(strategies):
        positions = [p + (i - (len(strategies) - 1) / 2) * width for p in range(len(results))]
        values = [by[strategy]["final_test_accuracy"] for by in results.values()]
        bars = axes.bar(positions, values, width, label=strategy)
        axes.bar_label(bars, fmt="%.2f", fontsize=7)
    axes.set_xticks(range(len(results)), list(results))
    axes.set(ylabel="final test accuracy", ylim=(0, 1), title=title)
    figure.legend(*axes.get_legend_handles_labels(), loc="outside lower center", ncols=len(strategies))
    axes.grid(axis="y", alpha=0.3)
    save_figure(figure, path, 100)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/sweep")
    parser.add_argument("--strategies", default="allreduce,reweighted,fedavg")
    parser.add_argument("--dataset", default="mnist-5k")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--num-partitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--weights", default="class-balanced", help="reweighted's rule")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)

    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    # FedAvg's settings make every strategy's samples grid; reweighted gets its own rule
    base = RunConfig(strategy="fedavg", dataset=args.dataset, model=args.model, num_partitions=args.num_partitions,
                     rounds=args.rounds, local_epochs=args.local_epochs, batch_size=args.batch_size, lr=args.lr,
                     seed=args.seed)
    out = Path(args.out)
    results = {}
    for name, settings in STANDARD_SCHEMES.items():
        print(f"== {name}", flush=True)
        shared = base.replace(**settings)
        configs = {strategy: shared.for_strategy(strategy) for strategy in strategies}
        if "reweighted" in configs:
            configs["reweighted"] = configs["reweighted"].replace(weights=args.weights)
        runs = compare(shared, strategies, out / slug(name), resume=args.resume, configs=configs)
        results[name] = {strategy: run.summary for strategy, run in runs.items()}

    title = (f"{args.dataset}, {args.model}, K={args.num_partitions}, {args.rounds} rounds of "
             f"E={args.local_epochs}, B={args.batch_size}")
    table = sweep_table(results, strategies)
    print(f"\n{title}\n{table}")
    write_atomic(out / "sweep.txt", f"{title}\n{table}\n")
    write_atomic(out / "sweep.json", json.dumps(results, indent=2))
    sweep_figure(results, strategies, out / "sweep.png", title)
    print(f"\nwritten: {out}/sweep.txt, sweep.json, sweep.png and one comparison folder per partition")


if __name__ == "__main__":
    main()
