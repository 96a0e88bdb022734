"""The tables and figures of a strategies x partitions grid (`compare_strategies.py`), from its finished runs.

Writes, in the grid's folder: ``results.csv`` (one row per run), ``table.csv`` and ``table.md``
(mean ± std over seeds of final and best accuracy, the round that first reached the target
accuracy, MB communicated and wall time, beside each partition's heterogeneity), ``heatmap.png``
(strategies x partitions, final accuracy), ``curves/<partition>.png`` (accuracy against round and
against MB, the mean over seeds with a ± std band) and ``partitions/<partition>-stacked.png`` /
``-bubbles.png`` (seed 0's partition); on a grid with a DP axis (`privacy_axis`), each row's epsilon
and ``privacy/<partition>.png`` (accuracy against epsilon, one curve per strategy). A strategy has one colour in
every figure. A run that
diverged is marked (``diverged`` in results.csv, a count in table.csv, "diverged" in table.md) and
left out of the means, curves and boxes, which are the finished seeds'.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
from privacy_axis import epsilon_text, mean_epsilon, privacy_figure
from schemes import slug

from fedsim.results.plots import accuracy_heatmap, client_accuracy_boxes, learning_curves, strategy_colors
from fedsim.results.folder import read_rows, write_atomic
from fedsim.results.summary import last_rounds_note
from partitions import Partition
from partitions.metrics import heterogeneity
from partitions.plot import bubbles, stacked_bars

COLUMNS = ("partition", "emd", "js", "strategy", "seeds", "final_acc", "final_acc_std", "best_acc", "best_acc_std",
           "rounds_to_target", "time_to_target", "reached", "mb_communicated", "wall_s")


#: The grid's measures of the clients' local test sets, the summary entry each comes from, and its header.
CLIENT_HEADERS = {"client_acc": "clients' mean acc", "worst10_acc": "worst 10% acc", "personal_acc": "personalized acc"}
CLIENT_MEASURES = {"client_acc": "client_acc_mean", "worst10_acc": "client_acc_worst10",
                   "personal_acc": "personal_acc_mean"}


def write_report(out: Path, plan: dict, runs: list[dict]) -> list[Path]:
    """Write the grid's tables and figures from ``runs`` (`compare_strategies.finished_runs`); return their paths."""
    if not runs:
        return []
    labels = load_labels(runs[0]["folder"])
    for run in runs:
        run.update(measure(run, plan["target"]))
        run["heterogeneity"] = heterogeneity(Partition.load(run["folder"] / "partition.json"), labels)
    rows = table_rows(plan, runs)
    written = [write_csv(out / "results.csv", [run_row(run) for run in runs]), write_csv(out / "table.csv", rows)]
    write_atomic(out / "table.md", markdown(plan, rows) + "\n")
    written.append(out / "table.md")
    colors = strategy_colors(plan["strategies"])
    written.append(heatmap(out / "heatmap.png", plan, rows))
    for scheme in plan["partitions"]:
        cell = [run for run in runs if run["partition"] == scheme]
        if not cell:
            continue
        finished = [run for run in cell if not run.get("diverged")]  # a diverged run's curve stops short of the rest
        if finished:
            written.append(curves(out / "curves" / f"{slug(scheme)}.png", plan, scheme, finished, colors))
        if finished and plan.get("time"):
            written.append(curves(out / "time" / f"{slug(scheme)}.png", plan, scheme, finished, colors,
                                  against=("round", "time")))
        if finished and all((run["folder"] / "clients.csv").exists() for run in finished):
            written.append(client_boxes(out / "clients" / f"{slug(scheme)}.png", plan, scheme, finished, colors))
        written.extend(partition_figures(out / "partitions", scheme, cell, labels))
        if plan.get("dp"):
            written.append(privacy_figure(out / "privacy" / f"{slug(scheme)}.png", plan,
                                          [row for row in rows if row["partition"] == scheme], colors,
                                          f"{scheme}: {title(plan)}, clip {plan['dp']['clip']:g}"))
    return written


def load_labels(folder: Path) -> np.ndarray:
    """Return the training labels of the grid's dataset, loaded as the run in ``folder`` loaded them."""
    from fedsim.config.run_config import RunConfig
    from fedsim.results.folder import read_json

    return RunConfig.from_mapping(read_json(folder / "config.json")).load_dataset().train_labels.numpy()


def measure(run: dict, target: float) -> dict:
    """Return a run's final, best (and its round) and last-5 mean test accuracy (with the evaluated rounds it
    averages, fewer than 5 in a short run), the first round at ``target`` (NaN if never), MB and wall s."""
    summary, rows = run["summary"], run["rows"]
    reached = [row["round"] for row in rows if row["test_accuracy"] >= target]
    best_round = summary.get("best_round")
    return {"final_acc": summary["final_test_accuracy"], "best_acc": summary["best_test_accuracy"],
            "best_round": math.nan if best_round is None else best_round,
            "last5_acc": summary.get("last_5_mean_test_accuracy", math.nan),
            "last5_rounds": summary.get("last_5_mean_rounds", math.nan),
            # on the clients' local test sets (``--local-test-fraction``): their mean, the worst 10%'s
            # mean, and the fine-tuned models' mean (``--personalize-steps``); NaN without them (and for
            # the worst 10% in a summary older than the statistic)
            **{key: summary.get(f"final_{name}", math.nan) for key, name in CLIENT_MEASURES.items()},
            "rounds_to_target": reached[0] if reached else math.nan,
            # on the simulated clock (`fedsim.clock`): the seconds to the target, NaN if never or without a clock
            "time_to_target": next((row.get("sim_time_s", math.nan) for row in rows if row["test_accuracy"] >= target),
                                   math.nan),
            "mb_communicated": summary["bytes_communicated"] / 1e6, "wall_s": summary["wall_s"]}


def run_row(run: dict) -> dict:
    return {"partition": run["partition"], "seed": run["seed"], "strategy": run["strategy"],
            **{key: run[key] for key in ("final_acc", "best_acc", "best_round", "last5_acc", "last5_rounds",
                                         *CLIENT_MEASURES, "rounds_to_target", "time_to_target",
                                         "mb_communicated", "wall_s")},
            "emd": run["heterogeneity"]["mean_emd"], "js": run["heterogeneity"]["mean_jensen_shannon"],
            # a diverged run's numbers are those of the rounds before it diverged
            "diverged": bool(run.get("diverged")), "diverged_round": run["summary"].get("diverged_round")}


def table_rows(plan: dict, runs: list[dict]) -> list[dict]:
    """Return one row per (partition, strategy): means and standard deviations over the seeds that finished.

    ``seeds`` counts those, ``diverged`` the seeds whose run diverged (NaN numbers where all did).
    """
    rows = []
    for scheme in plan["partitions"]:
        for arm in plan["strategies"]:
            done = [run for run in runs if run["partition"] == scheme and run["strategy"] == arm]
            if not done:
                continue
            cell = [run for run in done if not run.get("diverged")]  # a diverged run has no result to average
            mean = lambda key: float(np.mean([run[key] for run in cell])) if cell else math.nan  # noqa: E731
            std = lambda key: float(np.std([run[key] for run in cell])) if cell else math.nan  # noqa: E731
            reached = [run["rounds_to_target"] for run in cell if not math.isnan(run["rounds_to_target"])]
            rows.append({"partition": scheme, "emd": float(np.mean([run["heterogeneity"]["mean_emd"] for run in done])),
                         "js": float(np.mean([run["heterogeneity"]["mean_jensen_shannon"] for run in done])),
                         "strategy": arm, "base": done[0].get("base", arm), "noise": done[0].get("noise"),
                         "epsilon": mean_epsilon(done) if plan.get("dp") else math.nan, "seeds": len(cell), "diverged": len(done) - len(cell),
                         "final_acc": mean("final_acc"),
                         "final_acc_std": std("final_acc"), "best_acc": mean("best_acc"),
                         "best_acc_std": std("best_acc"), "best_round": mean("best_round"),
                         "last5_acc": mean("last5_acc"), "last5_acc_std": std("last5_acc"),
                         "last5_rounds": float(np.min([run["last5_rounds"] for run in cell])) if cell else math.nan,
                         **{key: value for name in CLIENT_MEASURES
                            for key, value in ((name, mean(name)), (f"{name}_std", std(name)))},
                         "rounds_to_target": float(np.mean(reached)) if reached else math.nan,
                         "time_to_target": float(np.mean([run["time_to_target"] for run in cell
                                                          if not math.isnan(run.get("time_to_target", math.nan))]
                                                         or [math.nan])),
                         "reached": len(reached), "mb_communicated": mean("mb_communicated"), "wall_s": mean("wall_s")})
    return rows


def write_csv(path: Path, rows: list[dict]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue())
    return path


def title(plan: dict) -> str:
    s = plan["settings"]
    return (f"{s['dataset']}, {s['model']}, {s['num_partitions']} clients, {s['rounds']} rounds of "
            f"E={s['local_epochs']}, "
            f"B={s['batch_size']}, lr {s['lr']}; {plan['seeds']} seed(s), {plan['engine']}")


def spread(row: dict, key: str) -> str:
    """Return ``key``'s mean over the seeds with its std, or the value alone for one seed (whose std says nothing).

    Examples
    --------
    >>> spread({"seeds": 1, "acc": 0.6841, "acc_std": 0.0}, "acc"), spread({"seeds": 3, "acc": 0.7, "acc_std": 0.01}, "acc")
    ('0.684', '0.700 ± 0.010')
    """
    if math.isnan(row[key]):  # no seed finished (all diverged), or not measured
        return "—"
    value = f"{row[key]:.3f}"
    return value if row["seeds"] == 1 else f"{value} ± {row[key + '_std']:.3f}"


def final_accuracy(row: dict) -> str:
    """Return a cell's final accuracy as the tables show it, saying how many of its seeds diverged.

    Examples
    --------
    >>> final_accuracy({"seeds": 1, "diverged": 1, "final_acc": 0.7}), final_accuracy({"seeds": 0, "diverged": 2})
    ('0.700 (1 diverged)', 'diverged')
    """
    if not row["seeds"]:
        return "diverged"
    diverged = row.get("diverged", 0)
    return spread(row, "final_acc") + (f" ({diverged} diverged)" if diverged else "")


def markdown(plan: dict, rows: list[dict]) -> str:
    """Return the grid as Markdown: final accuracy by partition and strategy, then every column."""
    strategies = plan["strategies"]
    by_cell = {(row["partition"], row["strategy"]): row for row in rows}
    several = plan["seeds"] > 1
    # the clients' columns the runs measured (with local test sets; personalized with fine-tuning)
    client_keys = [key for key in CLIENT_MEASURES if any(not math.isnan(row.get(key, math.nan)) for row in rows)]
    lines = [f"# The grid: {title(plan)}", "",  # the page's title on the site
             f"Final test accuracy{', mean ± std over seeds' if several else ''} ({title(plan)})", "",
             "| partition | EMD | " + " | ".join(strategies) + " |", "|---|---:|" + "---:|" * len(strategies)]
    for scheme in plan["partitions"]:
        cells = [by_cell.get((scheme, arm)) for arm in strategies]
        if not any(cells):
            continue
        emd = next(cell for cell in cells if cell)["emd"]
        values = [final_accuracy(cell) if cell else "" for cell in cells]
        lines.append(f"| {scheme} | {emd:.2f} | " + " | ".join(values) + " |")
    target = plan["target"]
    private = bool(plan.get("dp"))  # the epsilon each row's runs spent, at the grid's delta
    timed = bool(plan.get("time"))  # the simulated seconds to the target, mean over the seeds that reached it
    lines += ["", f"Every strategy and partition (rounds to {target:.2f}: the mean over the seeds that reached it, "
              "with how many did)", "",
              "| partition | EMD | JS | strategy | " + ("epsilon | " if private else "")
              + "final acc | best acc (round) | last-5 mean acc | "
              + "".join(f"{CLIENT_HEADERS[key]} | " for key in client_keys) + "rounds to target | "
              + ("simulated s to target | " if timed else "") + "MB sent | wall s |",
              "|---|---:|---:|---|" + "---:|" * private + "---:|---:|---:|" + "---:|" * len(client_keys)
              + "---:|" * timed + "---:|---:|---:|"]
    for row in rows:
        reached = "—" if math.isnan(row["rounds_to_target"]) else f"{row['rounds_to_target']:.1f}"
        best_round = "" if math.isnan(row["best_round"]) else f" ({row['best_round']:.{1 if several else 0}f})"
        lines.append(f"| {row['partition']} | {row['emd']:.2f} | {row['js']:.3f} | {row['strategy']} | "
                     + (f"{epsilon_text(row['epsilon'])} | " if private else "") + f"{final_accuracy(row)} | {spread(row, 'best_acc')}{best_round} | "
                     f"{spread(row, 'last5_acc')}{last_rounds_note(row.get('last5_rounds'))} | "
                     + "".join(f"{spread(row, key)} | " for key in client_keys)
                     + f"{reached} ({row['reached']}/{row['seeds']}) | "
                     + (("—" if math.isnan(row["time_to_target"]) else f"{row['time_to_target']:.2f}") + " | "
                        if timed else "")
                     + (f"{row['mb_communicated']:,.0f} | {row['wall_s']:.1f} |" if row["seeds"] else "— | — |"))
    return "\n".join(lines)


def heatmap(path: Path, plan: dict, rows: list[dict]) -> Path:
    by_cell = {(row["partition"], row["strategy"]): row for row in rows}
    schemes = [scheme for scheme in plan["partitions"] if any((scheme, arm) in by_cell for arm in plan["strategies"])]
    cell = lambda arm, scheme, key: by_cell[(scheme, arm)][key] if (scheme, arm) in by_cell else math.nan  # noqa: E731
    values = [[cell(arm, scheme, "final_acc") for scheme in schemes] for arm in plan["strategies"]]
    stds = [[cell(arm, scheme, "final_acc_std") for scheme in schemes] for arm in plan["strategies"]]
    accuracy_heatmap(values, plan["strategies"], schemes, spread=stds if plan["seeds"] > 1 else None, path=path,
                     title=f"Final test accuracy: {title(plan)}")
    return path


def curves(path: Path, plan: dict, scheme: str, cell: list[dict], colors: dict,
           against=("round", "bytes")) -> Path:
    """Draw accuracy against round and MB (or ``against`` other axes of `fedsim.results.plots.CURVE_AXES`) for one
    partition: each strategy's mean over seeds, ± std."""
    mean_rows = {}
    for arm in plan["strategies"]:
        seeds = [run["rows"] for run in cell if run["strategy"] == arm]
        if not seeds:
            continue
        rounds = min(len(rows) for rows in seeds)
        mean_rows[arm] = [{"round": seeds[0][i]["round"],
                           "test_accuracy": float(np.mean([rows[i]["test_accuracy"] for rows in seeds])),
                           "test_accuracy_std": float(np.std([rows[i]["test_accuracy"] for rows in seeds])),
                           "bytes_communicated": float(np.mean([rows[i]["bytes_communicated"] for rows in seeds])),
                           "sim_time_s": float(np.mean([rows[i].get("sim_time_s", math.nan) for rows in seeds]))}
                          for i in range(rounds)]
    learning_curves(mean_rows, path=path, colors=colors, title=f"{scheme}: {title(plan)}", against=against)
    return path


def client_boxes(path: Path, plan: dict, scheme: str, cell: list[dict], colors: dict) -> Path:
    """Draw each strategy's per-client accuracy after the last round, the seeds' clients pooled, as a box."""
    accuracies = {}
    for arm in plan["strategies"]:
        for run in (run for run in cell if run["strategy"] == arm):
            clients = read_rows(run["folder"] / "clients.csv")
            last = max(row["round"] for row in clients)
            accuracies.setdefault(arm, []).extend(row["accuracy"] for row in clients if row["round"] == last)
    client_accuracy_boxes(accuracies, path=path, colors=colors,
                          title=f"{scheme}: each client's accuracy after the last round ({title(plan)})")
    return path


def partition_figures(folder: Path, scheme: str, cell: list[dict], labels) -> list[Path]:
    """Draw seed 0's partition of ``scheme`` as stacked bars and as bubbles."""
    first = min(cell, key=lambda run: run["seed"])
    partition = Partition.load(first["folder"] / "partition.json")
    paths = [folder / f"{slug(scheme)}-stacked.png", folder / f"{slug(scheme)}-bubbles.png"]
    stacked_bars(partition, labels, path=paths[0], title=f"{scheme} (seed {first['seed']})")
    bubbles(partition, labels, path=paths[1], title=f"{scheme} (seed {first['seed']})")
    return paths
