"""Compare the aggregation strategies across Non-IID partitions and seeds: tables, a heatmap, learning curves.

Which strategy holds up under which kind of Non-IID data, at what communication cost::

    python benchmarks/compare_strategies.py --preset quick --out results/grid
    python benchmarks/compare_strategies.py --preset niid-bench --rounds 10 --out results/niid-bench

Every cell of the grid (partition x seed) runs every strategy from the same partition and initial
model, with equal local work: each reports on FedAvg's samples grid. Each run is a `fedsim run`
folder under ``OUT/runs/<partition>/seed-<k>/<strategy>/``; a finished run is not run again, and
a run stopped part-way resumes from its checkpoint, so rerunning the command continues an
interrupted grid. A run whose loss or model stopped being finite (`fedsim.interrupts.RunDiverged`)
is done too: its summary says ``diverged``, the grid goes on, and a rerun neither trains it again
nor counts it as a result. The tables mark it (``diverged`` in results.csv and table.csv,
"diverged" in table.md) and average the runs that finished; every invocation lists the diverged
runs. The tables and figures (`grid_report`) are written from the done runs at the end of every
invocation. Uses only the public API of ``fedsim`` and ``partitions``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from grid_report import write_report
from privacy_axis import noise_arms, noise_label, split_arm
from schemes import GRID_SCHEMES, slug

from fedsim.comparison import ENGINES, engine_runner
from fedsim.config.run_config import RunConfig
from fedsim.config.partitioning import partition_for
from fedsim.engines.inprocess.parallel import MAX_WORKERS, check_workers
from fedsim.interrupts import RunDiverged
from fedsim.results.folder import RunFolder, read_json, read_rows, write_atomic
from fedsim.schedule import SampleGrid

#: The strategies of the grid: fedsim's strategy and the settings that make the variant. FedProx's
#: mu is 0.01 (NIID-Bench's and Flower's baseline for FMNIST); FedOpt's three server optimizers
#: share a server learning rate of 0.01; MOON's mu is 1 and its temperature 0.5.
ARMS = {
    "allreduce": {"strategy": "allreduce"},
    "reweighted-size": {"strategy": "reweighted", "weights": "size"},
    "reweighted-class-balanced": {"strategy": "reweighted", "weights": "class-balanced"},
    "reweighted-dynamic": {"strategy": "reweighted", "weights": "dynamic"},
    **{name: {"strategy": name} for name in ("fedavg", "fedprox", "scaffold", "fednova", "moon", "fedadagrad",
                                            "fedadam", "fedyogi", "fedavgm", "fedbuff", "fedasync")},
    "fedavg-deadline": {"strategy": "fedavg"},  # with the grid's --round-deadline (`time_settings`)
}
#: The arms on the simulated clock, which the time preset runs.
TIME_ARMS = ("fedavg-deadline", "fedbuff", "fedasync")
#: The quick preset's strategies: every arm but FedAvgM (server momentum 0.9), which the DP grid adds, and the clock's.
QUICK_ARMS = [arm for arm in ARMS if arm != "fedavgm" and arm not in TIME_ARMS]


def arm_settings(arm: str) -> dict:
    """Return the settings of ``arm``: an arm of `ARMS`, or a user's algorithm by reference (``path/to/file.py:Name``),
    at its noise multiplier on the DP axis (`privacy_axis`)."""
    base, noise = split_arm(arm)
    return {**(ARMS.get(base) or {"strategy": base}), **({} if noise is None else {"dp_noise": noise})}


def arm_name(arm: str) -> str:
    """Return the name tables and folders give ``arm``: its own, or a user's algorithm's ``name``, and its noise."""
    base, noise = split_arm(arm)
    return noise_label(base if base in ARMS else RunConfig(strategy=base).label, noise)


def grid_arms(plan: dict) -> list[str]:
    """Return the arms a grid runs in each cell: its strategies, each at each noise multiplier of its DP axis."""
    return noise_arms(plan["strategies"], (plan.get("dp") or {}).get("noises"))

#: quick: the embedded mnist-5k, about 12 minutes on 2 CPU cores (21 with --no-vectorize). niid-bench: NIID-Bench's
#: published setting (10 parties, all in every round, simple-cnn, batch 64, SGD lr 0.01 momentum
#: 0.9 weight decay 1e-5, 10 local epochs, 50 rounds; 3 seeds; best accuracy over rounds) on
#: Fashion-MNIST, with NIID-Bench's four algorithms (FedAvg, FedProx, SCAFFOLD, FedNova). time: synchronous FedAvg,
#: FedAvg with a deadline, FedBuff and FedAsync on the simulated clock (`fedsim.clock`), 100 clients of mnist-5k
#: whose speeds spread tenfold (lognormal, sigma 0.7), 10 clients' updates a row.
PRESETS = {
    "quick": {"settings": {"dataset": "mnist-5k", "model": "mlp", "num_partitions": 10, "rounds": 15,
                           "batch_size": 10, "lr": 0.05, "local_epochs": 1},
              "seeds": 3, "target": 0.85, "arms": QUICK_ARMS, "schemes": list(GRID_SCHEMES)},
    "niid-bench": {"settings": {"dataset": "fashion-mnist", "model": "simple-cnn", "num_partitions": 10,
                                "rounds": 50, "batch_size": 64, "lr": 0.01, "momentum": 0.9, "weight_decay": 1e-5,
                                "local_epochs": 10},
                   "seeds": 3, "target": 0.8, "arms": ["fedavg", "fedprox", "scaffold", "fednova"],
                   "schemes": list(GRID_SCHEMES)},
    "time": {"settings": {"dataset": "mnist-5k", "model": "cnn", "num_partitions": 100, "fraction": 0.1,
                          "rounds": 60, "batch_size": 10, "lr": 0.05, "local_epochs": 1,
                          "client_speed": "lognormal:0,0.7"},
             "time": {"round_deadline": 0.05, "concurrency": 20, "buffer": 10},
             "seeds": 2, "target": 0.85, "arms": ["fedavg", "fedavg-deadline", "fedbuff", "fedasync"],
             "schemes": ["Dir(0.5)"]},
}
#: The settings of the grid's deadline and asynchronous arms (`time_settings` gives each arm those it reads).
TIME_SETTINGS = ("round_deadline", "concurrency", "buffer")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=list(PRESETS), default="quick")
    parser.add_argument("--out", required=True, help="the grid's folder: new, or a grid to continue")
    parser.add_argument("--strategies", help=f"comma-separated, of {', '.join(ARMS)}, or your own algorithm as "
                        "package.module:Name or path/to/file.py:Name (default: the preset's)")
    parser.add_argument("--partitions", help=f"comma-separated, of {', '.join(GRID_SCHEMES)} (default: all)")
    parser.add_argument("--seeds", type=int, help="how many seeds, 0..N-1 (default: the preset's)")
    parser.add_argument("--rounds", type=int, help="shorten (or lengthen) the preset's rounds")
    parser.add_argument("--local-epochs", type=int, help="change the preset's local epochs")
    parser.add_argument("--dataset", help="change the preset's dataset")
    parser.add_argument("--model", help="change the preset's model")
    parser.add_argument("--target", type=float, help="the accuracy whose first round the table reports")
    parser.add_argument("--local-test-fraction", type=float, help="hold back this share of each client's samples "
                        "and report the clients' mean and worst-10%% accuracy, with a box of them per partition")
    parser.add_argument("--personalize-steps", type=int, help="with --local-test-fraction: also report the "
                        "clients' accuracy after this many fine-tuning steps (FedAvg-FT)")
    parser.add_argument("--workers", type=int, default=1, help="in-process: processes that train a round's "
                        "clients in parallel, one core each, for the strategies that can (fedavg, fednova); the "
                        "results differ only by the order of a sum")
    parser.add_argument("--no-vectorize", action="store_true", help="in-process: train each round's clients one "
                        "after another, never as cohorts (`fedsim run --no-vectorize`); the grid keeps the choice")
    parser.add_argument("--num-partitions", type=int, help="change the preset's number of clients")
    parser.add_argument("--fraction", type=float, help="the share of clients a round samples")
    parser.add_argument("--client-sampling", choices=("fixed", "poisson"), help="how a round samples them")
    parser.add_argument("--dp-noise", help="client-level DP: comma-separated noise multipliers z, each an axis value "
                        "that every strategy runs at (0 clips without noise)")
    parser.add_argument("--dp-clip", type=float, default=1.0, help="with --dp-noise: the clip norm C of each "
                        "client's update")
    parser.add_argument("--dp-delta", type=float, default=1e-5, help="with --dp-noise: the delta of the epsilon "
                        "reported")
    parser.add_argument("--client-speed", help="the simulated clock's client speeds (fedsim run --client-speed)")
    parser.add_argument("--bandwidth", help="the simulated clock's client links in Mbit/s (fedsim run --bandwidth)")
    parser.add_argument("--sample-seconds", type=float, help="the simulated clock's seconds per sample at speed 1")
    parser.add_argument("--round-deadline", type=float, help="fedavg-deadline's deadline in simulated seconds")
    parser.add_argument("--concurrency", type=int, help="fedbuff's and fedasync's clients in flight")
    parser.add_argument("--buffer", type=int, help="fedbuff's updates per server step")
    parser.add_argument("--engine", choices=ENGINES, default="inprocess")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--docs", help="also copy the table and three figures (heatmap, #C=2's curves and "
                        "partition) into this folder, as the site's results page shows them")
    return parser.parse_args(argv)


def grid_plan(args) -> dict:
    """Return the grid the arguments ask for: settings, strategies, partitions, seeds, target accuracy."""
    preset = PRESETS[args.preset]
    settings = dict(preset["settings"])
    for name in ("rounds", "local_epochs", "dataset", "model", "local_test_fraction", "personalize_steps",
                 "num_partitions", "fraction", "client_sampling", "client_speed", "bandwidth", "sample_seconds"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    time = {**preset.get("time", {}), **{name: getattr(args, name) for name in TIME_SETTINGS
                                         if getattr(args, name) is not None}}
    if args.no_vectorize:
        settings["vectorize"] = False
    arms = chosen(args.strategies, preset["arms"], ARMS, "--strategies", references=True)
    schemes = chosen(args.partitions, preset["schemes"], GRID_SCHEMES, "--partitions")
    seeds = preset["seeds"] if args.seeds is None else args.seeds
    if seeds < 1:
        raise SystemExit(f"error: --seeds {seeds} must be at least 1")
    target = preset["target"] if args.target is None else args.target
    if not 0.0 < target <= 1.0:
        raise SystemExit(f"error: --target {target} must be in (0, 1]")
    shared = RunConfig(strategy="fedavg", **settings)  # a bad setting is one clear error before any work
    plan = {"preset": args.preset, "settings": settings, "strategies": arms, "partitions": schemes,
            "seeds": seeds, "target": target, "engine": args.engine}
    if time:
        plan["time"] = time
    if "fedavg-deadline" in arms and "round_deadline" not in time:
        raise SystemExit("error: fedavg-deadline needs --round-deadline (the deadline in simulated seconds)")
    if args.dp_noise is not None or time:
        if args.dp_noise is not None:
            plan["dp"] = privacy_axis(args)
        for arm in grid_arms(plan):  # a gradient strategy, or a method DP cannot bound, stops here
            try:
                arm_config(shared, plan, arm)
            except (ValueError, TypeError) as error:
                raise SystemExit(f"error: {arm_name(arm)}: {error}") from None
    return plan


def privacy_axis(args) -> dict:
    """Return the grid's DP axis: the clip, the delta and the noise multipliers every strategy runs at."""
    try:
        noises = [float(noise) for noise in args.dp_noise.split(",") if noise.strip()]
    except ValueError:
        raise SystemExit(f"error: --dp-noise {args.dp_noise!r} must be comma-separated numbers") from None
    if not noises:
        raise SystemExit("error: --dp-noise is empty: give one noise multiplier or more")
    return {"clip": args.dp_clip, "delta": args.dp_delta, "noises": noises}


def arm_config(shared: RunConfig, plan: dict, arm: str) -> RunConfig:
    """Return ``arm``'s config in a cell whose FedAvg config is ``shared``: the arm's settings, its DP and its clock."""
    settings = {**arm_settings(arm), **time_settings(plan, arm)}
    if settings.get("dp_noise") is not None:
        settings.update(dp_clip=plan["dp"]["clip"], dp_delta=plan["dp"]["delta"])
    return shared.for_strategy(settings.pop("strategy")).replace(**settings)


def time_settings(plan: dict, arm: str) -> dict:
    """Return the grid's settings of `TIME_SETTINGS` that ``arm`` reads: fedavg-deadline's deadline, fedbuff's
    buffer, the asynchronous arms' concurrency."""
    time = plan.get("time", {})
    wanted = {"fedavg-deadline": ("round_deadline",), "fedbuff": ("concurrency", "buffer"),
              "fedasync": ("concurrency",)}.get(split_arm(arm)[0], ())
    return {name: time[name] for name in wanted if name in time}


def chosen(text: str | None, default: list[str], known: dict, flag: str, references: bool = False) -> list[str]:
    """Return the names ``text`` lists (the default when ``None``), each checked against ``known``.

    With ``references``, a user's algorithm by reference is taken too (its file's path made absolute).
    """
    if text is None:
        return list(default)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if references:
        try:
            names = [RunConfig(strategy=name).strategy if ":" in name else name for name in names]
        except (ValueError, TypeError) as error:
            raise SystemExit(f"error: {flag}: {error}") from None
    unknown = [name for name in names if name not in known and not (references and ":" in name)]
    if unknown or not names:
        raise SystemExit(f"error: {flag} {text!r}: {'unknown ' + repr(unknown[0]) if unknown else 'empty'}; "
                         f"choose from {', '.join(known)}")
    return names


def open_grid(out: Path, plan: dict) -> None:
    """Start the grid folder, or check that ``out`` holds this very grid to continue; never touch another folder."""
    marker = out / "grid.json"
    if marker.exists():
        saved = read_json(marker)
        if saved != plan:
            changed = sorted(key for key in plan if saved.get(key) != plan[key])
            raise SystemExit(f"error: {out} holds a grid with other {', '.join(changed)}; continue it with "
                             "the same arguments, or choose another --out")
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SystemExit(f"error: --out {out} is not empty and holds no grid; nothing in it is overwritten: "
                         "choose a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, json.dumps(plan, indent=2))


def cell_configs(plan: dict, scheme: str, seed: int) -> tuple[dict[str, RunConfig], SampleGrid]:
    """Return each strategy's config in the cell (``scheme``, ``seed``), and the samples grid they share.

    Every config is FedAvg's settings with the arm's own on top; every strategy reports on
    FedAvg's grid, so that all do equal local work.
    """
    shared = RunConfig(strategy="fedavg", **plan["settings"], **GRID_SCHEMES[scheme], seed=seed)
    configs = {arm: arm_config(shared, plan, arm) for arm in grid_arms(plan)}
    return configs, SampleGrid.from_config(shared)


def run_grid(out: Path, plan: dict, *, quiet: bool = False, workers: int = 1) -> None:
    """Run every strategy of every cell that is not done; resume those stopped part-way.

    A run is done when its folder holds its summary: it finished, or it diverged (the summary
    says ``diverged``), which a line on stderr reports as it happens. ``workers`` (in-process)
    trains a round's clients in that many processes where the strategy can
    (`fedsim.engines.inprocess.parallel.check_workers`); the others run in this one.
    """
    from tqdm import tqdm

    cells = [(scheme, seed, arm) for scheme in plan["partitions"] for seed in range(plan["seeds"])
             for arm in grid_arms(plan)]
    pending = [cell for cell in cells if not (run_folder(out, *cell) / "summary.json").exists()]
    bar = tqdm(total=len(cells), initial=len(cells) - len(pending), unit="run", disable=quiet, smoothing=0.1,
               desc="grid")
    data = None
    for scheme, seed in dict.fromkeys((scheme, seed) for scheme, seed, _ in pending):
        configs, grid = cell_configs(plan, scheme, seed)
        first = next(iter(configs.values()))
        data = data or first.load_dataset()
        partition = partition_for(first, data.train_labels.numpy())
        run_strategy = engine_runner(plan["engine"], configs)
        for arm, config in configs.items():
            folder = run_folder(out, scheme, seed, arm)
            if (folder / "summary.json").exists():
                continue
            bar.set_postfix_str(f"{scheme}, seed {seed}, {arm}")
            resume = (folder / "checkpoint.pt").exists()
            try:
                run_strategy(config, folder, resume=resume, quiet=True, data=data, partition=partition, grid=grid,
                             **({"workers": workers} if can_use_workers(plan, config, workers) else {}))
            except RunDiverged as diverged:  # its summary, written, marks it done and diverged
                run = describe_divergence(scheme, seed, arm_name(arm), diverged.round, diverged.where)
                bar.write(f"grid: {run}: {diverged.what}; the grid goes on", file=sys.stderr)
            bar.update(1)
    bar.close()


def can_use_workers(plan: dict, config: RunConfig, workers: int) -> bool:
    """Whether ``config``'s run takes ``workers`` > 1 processes (in-process, a strategy that trains locally)."""
    if workers == 1 or plan["engine"] != "inprocess":
        return False
    try:
        check_workers(workers, config)
    except ValueError:
        return False
    return True


def run_folder(out: Path, scheme: str, seed: int, arm: str) -> Path:
    return out / "runs" / slug(scheme) / f"seed-{seed}" / arm_name(arm)


def finished_runs(out: Path, plan: dict) -> list[dict]:
    """Return every done run of the grid: its cell, summary, rows and whether it diverged.

    A diverged run holds the rows of the rounds before its divergence (none if it diverged in
    its first round).
    """
    runs = []
    for scheme in plan["partitions"]:
        for seed in range(plan["seeds"]):
            for arm in grid_arms(plan):
                folder = run_folder(out, scheme, seed, arm)
                if (folder / "summary.json").exists():
                    (summary,) = read_json(folder / "summary.json").values()  # a run's one strategy
                    rows = folder / "metrics.csv"
                    base, noise = split_arm(arm)
                    runs.append({"partition": scheme, "seed": seed, "strategy": arm_name(arm), "folder": folder,
                                 "base": arm_name(base), "noise": noise,
                                 "summary": summary, "diverged": bool(summary.get("diverged")),
                                 "rows": read_rows(rows) if rows.exists() else []})
    return runs


def describe_divergence(scheme: str, seed: int, name: str, round_: int, where: str | None) -> str:
    """Return how the grid names a diverged run: "fedadam on #C=2, seed 1, diverged in round 4 (client 3)"."""
    return f"{name} on {scheme}, seed {seed}, diverged in round {round_}" + (f" ({where})" if where else "")


def diverged_lines(runs: list[dict]) -> list[str]:
    """Return a line per diverged run of ``runs`` (`finished_runs`), for the invocation's report."""
    return [describe_divergence(run["partition"], run["seed"], run["strategy"], run["summary"]["diverged_round"],
                                run["summary"].get("diverged_where")) for run in runs if run["diverged"]]


#: What `--docs` copies: the grid's table and figures (those it drew), renamed for the site's results page.
DOCS_FILES = {"table.md": "table.md", "heatmap.png": "heatmap.png", "curves/c2.png": "curves-c2.png",
              "partitions/c2-stacked.png": "partition-c2.png", "clients/c2.png": "clients-c2.png",
              "clients/dir-0.1.png": "clients-dir-0.1.png", "privacy/dir-0.5.png": "privacy-dir-0.5.png",
              "time/dir-0.5.png": "time-dir-0.5.png"}


def copy_for_docs(out: Path, docs: Path) -> list[Path]:
    """Copy `DOCS_FILES` from the grid into ``docs`` (atomically, each replacing the copy of a previous grid)."""
    docs.mkdir(parents=True, exist_ok=True)
    copied = []
    for source, name in DOCS_FILES.items():
        if (out / source).exists():
            write_atomic(docs / name, (out / source).read_bytes())
            copied.append(docs / name)
    return copied


def main(argv=None) -> None:
    args = parse_args(argv)
    plan = grid_plan(args)
    if not 1 <= args.workers <= MAX_WORKERS:
        raise SystemExit(f"error: --workers {args.workers} must be in 1..{MAX_WORKERS}")
    out = Path(args.out)
    if RunFolder(out).holds_run() or RunFolder(out, kind="comparison").holds_run():
        raise SystemExit(f"error: --out {out} holds a fedsim run; choose another folder for the grid")
    open_grid(out, plan)
    started = time.perf_counter()
    run_grid(out, plan, quiet=args.quiet, workers=args.workers)
    named = {**plan, "strategies": [arm_name(arm) for arm in grid_arms(plan)]}  # a user's algorithm by its name
    runs = finished_runs(out, plan)
    written = write_report(out, named, runs)
    if args.docs:
        written += copy_for_docs(out, Path(args.docs))
    print(f"\n{(out / 'table.md').read_text()}")
    diverged = diverged_lines(runs)
    if diverged:  # every invocation says so, the first and any rerun alike
        print(f"{len(diverged)} run(s) diverged, done and left out of the averages:\n  " + "\n  ".join(diverged))
    print(f"grid done in {time.perf_counter() - started:.0f} s this invocation; {len(written)} tables and figures "
          f"in {out}" + (f", the site's copies in {args.docs}" if args.docs else ""))


if __name__ == "__main__":
    main()
