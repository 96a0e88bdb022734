"""Learning curves of several strategies: accuracy against rounds and against bytes communicated."""

from __future__ import annotations

import math
from pathlib import Path

from partitions.plot import save_figure


def learning_curves(rows_by_strategy: dict, *, path=None, title: str | None = None, dpi: int = 100):
    """Draw test accuracy against round and against bytes communicated, one line per strategy.

    Parameters
    ----------
    rows_by_strategy : dict
        Strategy name -> the per-round rows of its run (``metrics.csv`` rows).
    path : str or Path, optional
        Where to write the figure (atomically), in the format its extension names (.png, .pdf, .svg, ...).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), layout="constrained")
    by_round, by_bytes = figure.subplots(1, 2)
    for strategy, rows in rows_by_strategy.items():
        evaluated = [row for row in rows if not math.isnan(row["test_accuracy"])]
        rounds = [row["round"] for row in evaluated]
        accuracy = [row["test_accuracy"] for row in evaluated]
        megabytes = [row["bytes_communicated"] / 1e6 for row in evaluated]
        by_round.plot(rounds, accuracy, marker="o", markersize=3, label=strategy)
        by_bytes.plot(megabytes, accuracy, marker="o", markersize=3, label=strategy)
    by_round.set(xlabel="round (a FedAvg round's worth of samples)", ylabel="test accuracy")
    by_bytes.set(xlabel="MB communicated (all ranks, up + down)", ylabel="test accuracy", xscale="log")
    from matplotlib.ticker import MaxNLocator, NullFormatter

    by_round.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    by_bytes.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks of a log axis run into each other
    for axes in (by_round, by_bytes):
        axes.grid(alpha=0.3)
        axes.legend()
    if title:
        figure.suptitle(title)
    if path is not None:
        save_figure(figure, Path(path), dpi)
    return figure
