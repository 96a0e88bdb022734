"""Run several strategies on the same data, partition, initial model and seeds, and compare them."""

from __future__ import annotations

import warnings

from partitions._io import write_atomic

from .engines.inprocess import run
from .results.outcome import RunResult
from .checks import SettingError, SettingWarning
from .clock import rules_the_run
from .interrupts import RunDiverged
from .config.partitioning import partition_for
from .config.comparison import check_same_strategies, comparison_settings
from .results.recorder import extra_record, run_title
from .results.folder import RunFolder, read_json
from .results.table import comparison_table
from .schedule import SampleGrid
from .config.strategies import canonical_names, check_strategy_names, get_strategy


#: Where `compare` runs the strategies: this process, or Flower's simulation engine.
ENGINES = ("inprocess", "flower")


def compare(config, strategies, out, *, resume: bool = False, quiet: bool = True, configs: dict | None = None,
            data=None, partition=None, engine: str = "inprocess", verbose: bool = False) -> dict:
    """Run each strategy in ``strategies`` under ``config`` and write the comparison to ``out``.

    Every strategy sees the same dataset, the same partition (made once from ``config``) and the
    same initial model (seeded by ``config.seed``), and reports on FedAvg's samples grid (the
    ``fraction``, ``local_epochs`` and ``local_steps`` of fedavg's config). ``config.strategy``
    itself is not run unless listed; each strategy's config is ``config`` with the settings it
    does not read reset (`fedsim.config.RunConfig.for_strategy`), keeping a ``weights`` rule
    chosen in ``config`` where it applies.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        The shared settings (data, partition, model, seed, FedAvg's grid).
    strategies : list of str
    out : str or Path
        A new or empty folder, or the comparison to continue with ``resume``.
    resume : bool, default False
    quiet : bool, default True
    configs : dict, optional
        Strategy -> its own config, instead of deriving each from ``config``
        (`fedsim.config.comparison.comparison_configs` builds them from command-line settings).
    data, partition : optional
        Already-loaded data and already-made partition (the in-process engine reuses them; a
        Flower run makes its own, the same, from the config).
    engine : {"inprocess", "flower"}, default "inprocess"
        Run each strategy in this process, or as a Flower app on Flower's simulation engine
        (`fedsim.engines.flower.simulate`), one virtual SuperNode per partition.
    verbose : bool, default False
        Under ``engine="flower"``, show Flower's and Ray's log rather than keep it in each
        strategy folder's ``flower.log``.

    Writes ``out/<strategy>/`` (a full run folder each), ``out/metrics.csv`` (all rows),
    ``out/summary.json`` (keyed by strategy), ``out/comparison.txt`` and ``out/learning_curves.png``.

    A strategy that diverges (`fedsim.interrupts.RunDiverged`) is reported in a warning and the
    comparison goes on: its result holds the rounds before, its summary says ``diverged``, and
    the table marks it.

    Returns
    -------
    dict
        Strategy -> `fedsim.results.outcome.RunResult`.
    """
    strategies = check_strategy_names(strategies)
    configs = list(configs.values()) if configs is not None else [strategy_config(config, name) for name in strategies]
    configs = labelled(configs)
    run_strategy = engine_runner(engine, configs, resume=resume, verbose=verbose)
    folder = check_comparison(out, config, configs, strategies, resume=resume)  # a bad `--out` is reported before any work
    data = data or config.load_dataset()
    if partition is None:
        partition = partition_for(config, data.train_labels.numpy(), data.train_client_ids)
    folder.open(resume=resume)
    out = folder.path
    # the settings as given once (each strategy's folder checks its own on resume); rewritten on resume, so that
    # config.json says the rounds the comparison now runs to, and a resume from it needs only `--out`
    resumed_from = min(RunFolder(out / name).checkpoint_round() for name in configs) if resume else None
    folder.write_config({**comparison_settings(configs), "strategies": canonical_names(strategies)},
                        from_round=resumed_from)
    if not resume:
        partition.save(out / "partition.json")
    # every strategy reports on FedAvg's samples grid
    grid = SampleGrid.from_config(configs.get("fedavg", config))
    results = {}
    for name, run_config in configs.items():
        # a resumed comparison starts afresh the strategies it had not reached
        started = RunFolder(out / name).holds_run()
        try:
            results[name] = run_strategy(run_config, out / name, resume=resume and started, quiet=quiet, data=data,
                                         partition=partition, grid=grid)
        except RunDiverged as diverged:
            warnings.warn(SettingWarning("{label:text} {diverged:text}; the comparison goes on without it", label=name,
                                         diverged=diverged), stacklevel=2)
            results[name] = RunResult(diverged.rows, diverged.summary, [])

    folder.write_rows([row for result in results.values() for row in result.rows])
    folder.write_summary({name: result.summary for name, result in results.items()})
    title = run_title(config, partition)  # the table alone would not say what was compared
    write_atomic(out / "comparison.txt", f"{title}\n\n{comparison_table(results)}\n")
    from .results.plots import learning_curves

    timed = any(rules_the_run(run_config) for run_config in configs.values())
    learning_curves({name: result.rows for name, result in results.items()}, path=out / "learning_curves.png",
                    title=title, against=("round", "bytes", "time") if timed else ("round", "bytes"))
    return results


def labelled(configs: list) -> dict:
    """Return the configs by what each runs (`fedsim.config.RunConfig.label`), refusing two that run alike."""
    labels = [run_config.label for run_config in configs]
    repeated = next((label for i, label in enumerate(labels) if label in labels[:i]), None)
    if repeated is not None:
        raise SettingError("two of {strategies:name} both run {label:text} under these settings; name each method once",
                           label=repr(repeated))
    return dict(zip(labels, configs))


def check_engine(engine: str, configs: dict, *, resume: bool = False) -> None:
    """Refuse an unknown ``engine``, or a strategy's config it does not run (or resume)."""
    if engine not in ENGINES:
        raise ValueError(f"`engine`={engine!r} is not one of {', '.join(ENGINES)}")
    if engine == "flower":
        from .engines.flower import check_flower_config

        for run_config in configs.values():
            check_flower_config(run_config, resume=resume)


def engine_runner(engine: str, configs: dict, *, resume: bool = False, verbose: bool = False):
    """Return the function that runs one strategy on ``engine`` (`fedsim.engines.inprocess.run`'s signature).

    ``verbose`` shows Flower's log of each run (``engine="flower"``).
    """
    check_engine(engine, configs, resume=resume)
    if engine == "inprocess":
        return run
    from .engines.flower import simulate

    def run_on_flower(run_config, out, *, resume, quiet, data, partition, grid):
        # it makes its own data and partition
        return simulate(run_config, out, resume=resume, quiet=quiet, verbose=verbose, grid=grid)

    return run_on_flower


def check_comparison(out, config, configs: dict, strategies: list[str], *, resume: bool) -> RunFolder:
    """Check, changing nothing, that ``out`` can take this comparison, or holds it to resume; return its folder.

    Resuming needs the same strategies and the same settings of each (each strategy's own run
    folder is checked as `fedsim.results.folder.RunFolder.check` checks a run).
    """
    folder = RunFolder(out, kind="comparison")
    folder.check(resume=resume)
    if not resume:
        return folder
    check_same_strategies(folder.path, read_json(folder.path / "config.json").get("strategies"),
                          canonical_names(strategies))
    grid = SampleGrid.from_config(configs.get("fedavg", config))
    for run_config in configs.values():
        strategy_folder = RunFolder(folder.path / run_config.label)
        if strategy_folder.holds_run():
            strategy_folder.check(resume=True, config=run_config, extra=extra_record(run_config, grid))
    return folder


def strategy_config(config, name: str):
    """Return ``config`` for strategy ``name``: the settings it does not read reset, a chosen ``weights`` rule kept."""
    return config.for_strategy(name, keep_weights=config.weights != get_strategy(config.strategy).weight_rules[0])
