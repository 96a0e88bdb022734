"""Run several strategies on the same data, partition, initial model and seeds, and compare them."""

from __future__ import annotations

import json
from pathlib import Path

from partitions.partition import write_atomic

from .engines.inprocess import run
from .partitioning import partition_for
from .recorder import run_title
from .results import RunFolder
from .schedule import SampleGrid


def compare(config, strategies, out, *, resume: bool = False, quiet: bool = True) -> dict:
    """Run each strategy in ``strategies`` under ``config`` and write the comparison to ``out``.

    Every strategy sees the same dataset, the same partition (made once from ``config``) and the
    same initial model (seeded by ``config.seed``). ``config.strategy`` itself is not run unless
    listed; when it is ``reweighted``, its ``weights`` rule is the one ``reweighted`` uses, and the
    other strategies use their own default rule.

    Writes ``out/<strategy>/`` (a full run folder each), ``out/metrics.csv`` (all rows),
    ``out/summary.json`` (keyed by strategy), ``out/comparison.txt`` and ``out/learning_curves.png``.

    Returns
    -------
    dict
        Strategy -> `fedsim.engines.inprocess.RunResult`.
    """
    if not strategies:
        raise ValueError("`strategies` is empty: name at least one of allreduce, reweighted, fedavg")
    duplicates = sorted({s for s in strategies if list(strategies).count(s) > 1})
    if duplicates:
        raise ValueError(f"`strategies` names {duplicates[0]!r} twice")
    configs = {name: strategy_config(config, name) for name in strategies}  # validates every name first
    folder = RunFolder(out, kind="comparison")
    folder.check(resume=resume)  # a bad `--out` is reported before any work
    data = config.load_dataset()
    partition = partition_for(config, data.train_labels.numpy())
    folder.open(resume=resume)
    out = folder.path
    grid = SampleGrid.from_config(config)  # every strategy reports on FedAvg's samples grid
    results = {}
    for name, run_config in configs.items():
        # a resumed comparison starts afresh the strategies it had not reached
        started = RunFolder(out / name).holds_run()
        results[name] = run(run_config, out / name, resume=resume and started, quiet=quiet, data=data,
                            partition=partition, grid=grid)

    folder.write_rows([row for result in results.values() for row in result.rows])
    folder.write_summary({name: result.summary for name, result in results.items()})
    partition.save(out / "partition.json")
    write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=2))
    write_atomic(out / "comparison.txt", comparison_table(results) + "\n")
    from .curves import learning_curves

    learning_curves({name: result.rows for name, result in results.items()}, path=out / "learning_curves.png",
                    title=run_title(config, partition))
    return results


def strategy_config(config, name: str):
    """Return ``config`` for strategy ``name``, keeping a reweighted config's ``weights`` rule for reweighted."""
    keep = name == "reweighted" and config.strategy == "reweighted"
    return config.replace(strategy=name, weights=config.weights if keep else None)


def comparison_table(results: dict) -> str:
    """Return a plain-text table of the strategies' final numbers."""
    header = ("strategy", "final acc", "best acc", "final loss", "MB sent", "samples", "wall s", "rounds")
    lines = []
    for name, result in results.items():
        s = result.summary
        lines.append((name, f"{s['final_test_accuracy']:.4f}", f"{s['best_test_accuracy']:.4f}",
                      f"{s['final_test_loss']:.4f}", f"{s['bytes_communicated'] / 1e6:,.1f}", f"{s['samples_seen']:,}",
                      f"{s['wall_s']:.1f}", str(s["rounds"])))
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    render = lambda row: "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)  # noqa: E731
                                   for i, (cell, w) in enumerate(zip(row, widths)))
    return "\n".join([render(header), render(tuple("-" * w for w in widths)), *map(render, lines)])
