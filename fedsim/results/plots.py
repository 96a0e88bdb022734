"""Figures of runs and comparisons: learning curves, accuracy against communication, strategies x partitions.

Built on `partitions.plot` (its atomic `save_figure`); the partitions' own figures (stacked bars,
bubbles) are there. Every figure gives a strategy the colour `strategy_colors` assigns it, so one
strategy keeps its colour across all figures of a benchmark.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from partitions.figure_file import save_figure

#: The rows' column that `learning_curves` draws dashed beside the test accuracy: the worst 10% of clients.
WORST_CLIENTS = "client_acc_worst10"


def strategy_colors(names) -> dict[str, tuple]:
    """Return a colour for each of ``names``, in order: matplotlib's ten-colour cycle, then twenty more.

    Pass every strategy of a benchmark at once, so that each keeps its colour in every figure.
    """
    from matplotlib import colormaps

    names = list(names)
    palette = [*colormaps["tab10"].colors, *colormaps["tab20b"].colors]
    return {name: palette[index % len(palette)] for index, name in enumerate(names)}


#: The x axes `learning_curves` can draw accuracy against: each row's value, and the axis's label.
CURVE_AXES = {
    "round": (lambda row: row["round"], "round (a FedAvg round's worth of samples)"),
    "bytes": (lambda row: row["bytes_communicated"] / 1e6, "MB communicated (all ranks, up + down)"),
    "time": (lambda row: row["sim_time_s"], "simulated seconds"),
}


def learning_curves(rows_by_strategy: dict, *, path=None, title: str | None = None, colors: dict | None = None,
                    dpi: int = 100, against=("round", "bytes")):
    """Draw test accuracy against round, bytes communicated or simulated time, one line per strategy.

    Rows measured on the clients' local test sets (``local_test_fraction``) add a dashed line of
    the same colour: the worst 10% of clients' mean accuracy (``client_acc_worst10``), the clients
    a global accuracy hides.

    Parameters
    ----------
    rows_by_strategy : dict
        Strategy name -> the per-round rows of its run (``metrics.csv`` rows). A row may carry
        ``test_accuracy_std``, drawn as a band (a mean over seeds).
    path : str or Path, optional
        Where to write the figure (atomically), in the format its extension names (.png, .pdf, .svg, ...).
    title : str, optional
    colors : dict, optional
        Strategy -> colour (`strategy_colors`); matplotlib's cycle by default.
    against : sequence of str
        The x axes, one panel each, of `CURVE_AXES`: ``round``, ``bytes`` (log), ``time`` (the
        rows' ``sim_time_s``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    colors = colors or strategy_colors(rows_by_strategy)
    figure = Figure(figsize=(5.5 * len(against), 4), layout="constrained")
    panels = dict(zip(against, np.atleast_1d(figure.subplots(1, len(against)))))
    for strategy, rows in rows_by_strategy.items():
        evaluated = [row for row in rows if not math.isnan(row["test_accuracy"])]
        accuracy = np.array([row["test_accuracy"] for row in evaluated])
        spread = np.array([row.get("test_accuracy_std", 0.0) for row in evaluated])
        worst = [row for row in rows if not math.isnan(row.get(WORST_CLIENTS, math.nan))]
        for name, axes in panels.items():
            x_of = CURVE_AXES[name][0]
            x = [x_of(row) for row in evaluated]
            axes.plot(x, accuracy, marker="o", markersize=3, label=strategy, color=colors[strategy])
            if spread.any():
                axes.fill_between(x, accuracy - spread, accuracy + spread, color=colors[strategy], alpha=0.15)
            if worst:
                axes.plot([x_of(row) for row in worst], [row[WORST_CLIENTS] for row in worst], linestyle="--",
                          marker="v", markersize=3, label=f"{strategy}: worst 10% of clients", color=colors[strategy])
    for name, axes in panels.items():
        axes.set(xlabel=CURVE_AXES[name][1], ylabel="test accuracy")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    if "round" in panels:
        panels["round"].xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    if "bytes" in panels:
        panels["bytes"].set_xscale("log")
        label_log_axis(panels["bytes"].xaxis, [row["bytes_communicated"] / 1e6 for rows in rows_by_strategy.values()
                                               for row in rows if row["bytes_communicated"] > 0])
    if title:
        figure.suptitle(title)
    if path is not None:
        save_figure(figure, Path(path), dpi)
    return figure


def label_log_axis(axis, values) -> None:
    """Label a log axis at 1, 2 and 5 times the powers of ten where its ``values`` span two decades or less.

    Matplotlib labels the powers of ten alone, so data within one decade (3 to 8 MB) got one label,
    or none; minor ticks stay unlabelled, as their labels would run into each other.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = [value for value in values if value > 0]
    narrow = bool(values) and max(values) / min(values) <= 100
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow else (1.0,)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def accuracy_heatmap(values, strategies, partitions, *, spread=None, path=None, title: str | None = None,
                     label: str = "final test accuracy", dpi: int = 100):
    """Draw a strategies x partitions grid of accuracies, each cell annotated (with ± ``spread`` when given).

    Parameters
    ----------
    values : array_like, shape (len(strategies), len(partitions))
        NaN for a cell not run.
    strategies, partitions : list of str
        Row and column names.
    spread : array_like, optional
        Same shape: the standard deviation over seeds.
    path : str or Path, optional
        Where to write the figure (atomically).
    title : str, optional
    label : str
        The colour bar's label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    values = np.asarray(values, dtype=float)
    if values.shape != (len(strategies), len(partitions)):
        raise ValueError(f"`values` has shape {values.shape}, not (strategies, partitions) = "
                         f"({len(strategies)}, {len(partitions)})")
    figure = Figure(figsize=(1.1 * len(partitions) + 3, 0.5 * len(strategies) + 1.8), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for (row, column), value in np.ndenumerate(values):
        if math.isnan(value):
            continue
        text = f"{value:.3f}" if spread is None else f"{value:.3f}\n±{np.asarray(spread)[row, column]:.3f}"
        axes.text(column, row, text, ha="center", va="center", fontsize=7,
                  color="black" if value > 0.6 else "white")
    axes.set_xticks(range(len(partitions)), partitions, rotation=30, ha="right")
    axes.set_yticks(range(len(strategies)), strategies)
    axes.set(xlabel="partition", ylabel="strategy")
    figure.colorbar(image, ax=axes, label=label)
    if title:  # wrapped to the figure, which a few partitions make narrower than a grid's title
        axes.set_title(textwrap.fill(title, width=max(20, int(9 * figure.get_figwidth()))), fontsize=10)
    if path is not None:
        save_figure(figure, Path(path), dpi)
    return figure


def client_accuracy_boxes(accuracies_by_strategy: dict, *, path=None, title: str | None = None,
                          colors: dict | None = None, dpi: int = 100):
    """Draw each strategy's distribution of per-client accuracy as a box, one colour per strategy.

    Who is left behind under a skew: the whiskers reach the worst clients, which a mean hides.

    Parameters
    ----------
    accuracies_by_strategy : dict
        Strategy name -> the accuracies of its clients (on their local test sets; ``clients.csv``).
    path : str or Path, optional
        Where to write the figure (atomically).
    title : str, optional
    colors : dict, optional
        Strategy -> colour (`strategy_colors`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    names = list(accuracies_by_strategy)
    colors = colors or strategy_colors(names)
    figure = Figure(figsize=(max(4.0, 1.1 * len(names) + 2), 4), layout="constrained")
    axes = figure.subplots()
    boxes = axes.boxplot([list(accuracies_by_strategy[name]) for name in names], patch_artist=True, widths=0.6)
    for box, name in zip(boxes["boxes"], names):
        box.set(facecolor=colors[name], alpha=0.6)
    axes.set_xticks(range(1, len(names) + 1), names, rotation=30, ha="right")
    axes.set(ylabel="accuracy on the client's local test set", ylim=(0.0, 1.02))
    axes.grid(axis="y", alpha=0.3)
    if title:
        axes.set_title(textwrap.fill(title, width=max(20, int(9 * figure.get_figwidth()))), fontsize=10)
    if path is not None:
        save_figure(figure, Path(path), dpi)
    return figure
