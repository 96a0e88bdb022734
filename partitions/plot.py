"""Pictures of how the labels spread over the partitions: stacked bars, heatmaps and bubble charts.

matplotlib is imported inside the functions, so ``partitions`` never needs it otherwise. Figures are
`matplotlib.figure.Figure` objects made without pyplot: no global state, no display needed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._checks import check_class_labels, check_integer
from ._io import atomic_open
from .metrics import _check_partition

KINDS = ("stacked", "heatmap", "bubbles")
_MAX_TICKS = 30  # beyond this, tick labels overlap: label every n-th row or column
_MAX_ANNOTATED_CELLS = 400
_MAX_LEGEND_CLASSES = 40  # a legend of more swatches is unreadable; heatmaps and bubbles name classes on the axis
_BUBBLE_DIAMETER = 24.0  # points, of the largest bubble when cells are roomy


def stacked_bars(partition, labels, *, percent=False, path=None, max_partitions=50, class_names=None, title=None,
                 figsize=None, dpi=100):
    """Draw one bar per partition, stacked by class.

    Parameters
    ----------
    partition : Partition
    labels : array_like
        Class ids, one per sample, or a multi-hot (samples x classes) matrix.
    percent : bool, default False
        Plot each partition's class shares in percent instead of absolute counts.
    path : str or os.PathLike, optional
        Where to write the figure as a PNG (parent folders are created, the write is atomic).
    max_partitions : int, default 50
        Show only the first ``max_partitions`` partitions; the panel title says so.
    class_names : sequence of str, optional
        One name per class, for the legend (drawn for up to 40 classes); defaults to the class ids.
    title : str, optional
        Figure title.
    figsize : (float, float), optional
        Size in inches; chosen from the number of partitions and classes by default.
    dpi : int, default 100
        Resolution of the saved PNG: it is ``figsize * dpi`` pixels.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from partitions import dirichlet
    >>> labels = np.repeat(np.arange(3), 20)
    >>> fig = stacked_bars(dirichlet(labels, 4, alpha=1.0, min_partition_size=0, seed=0), labels)
    >>> len(fig.axes[0].patches)  # 4 partitions x 3 classes
    12
    """
    return _render("stacked", {None: partition}, labels, percent, path, max_partitions, class_names, title,
                   figsize, dpi)


def heatmap(partition, labels, *, percent=False, path=None, max_partitions=50, class_names=None, title=None,
            annotate=None, figsize=None, dpi=100):
    """Draw the partitions x classes table of counts as a heatmap.

    Parameters are those of `stacked_bars`, and:

    annotate : bool, optional
        Write the count in every cell; by default only when there are at most 400 cells.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from partitions import iid
    >>> fig = heatmap(iid(30, 3, seed=0), np.arange(30) % 2)
    >>> len(fig.axes), len(fig.axes[0].texts)  # heatmap + colour bar; 3 x 2 counts written
    (2, 6)
    """
    return _render("heatmap", {None: partition}, labels, percent, path, max_partitions, class_names, title,
                   figsize, dpi, annotate)


def bubbles(partition, labels, *, percent=False, path=None, max_partitions=50, class_names=None, title=None,
            figsize=None, dpi=100):
    """Draw a bubble per (partition, class) pair held, its area proportional to the count.

    Parameters are those of `stacked_bars`.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from partitions import Partition
    >>> p = Partition([[0, 1], [2]], num_samples=3, scheme="manual")
    >>> fig = bubbles(p, [0, 1, 1])
    >>> len(fig.axes[0].collections[0].get_offsets())  # three non-zero cells
    3
    """
    return _render("bubbles", {None: partition}, labels, percent, path, max_partitions, class_names, title,
                   figsize, dpi)


def compare(partitions, labels, *, kind="stacked", percent=True, path=None, max_partitions=50, class_names=None,
            title=None, figsize=None, dpi=100):
    """Draw several partitions of the same labels side by side, with one shared legend or colour scale.

    Parameters
    ----------
    partitions : mapping of str to Partition
        One panel per entry, titled with its name.
    labels : array_like
        Class ids or a multi-hot matrix, as in `stacked_bars`.
    kind : {"stacked", "heatmap", "bubbles"}, default "stacked"
        Which plot each panel is (see `stacked_bars`, `heatmap`, `bubbles`).
    percent : bool, default True
        Plot class shares in percent, which makes partitions of different sizes comparable.

    The other parameters are those of `stacked_bars`.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from partitions import iid, shards
    >>> labels = np.repeat(np.arange(4), 10)
    >>> fig = compare({"iid": iid(labels, 4, seed=0), "shards": shards(labels, 4, seed=0)}, labels)
    >>> [ax.get_title() for ax in fig.axes]
    ['iid', 'shards']
    """
    if not isinstance(partitions, Mapping):
        raise TypeError(f"`partitions` must be a mapping of names to Partitions, got {type(partitions).__name__}")
    if not partitions:
        raise ValueError("`partitions` is empty: give at least one Partition")
    return _render(kind, partitions, labels, percent, path, max_partitions, class_names, title, figsize, dpi)


# -- shared machinery --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Style:
    """What every panel of one figure shares, so that equal colours or areas mean equal values."""

    colors: np.ndarray  # one RGBA row per class
    vmax: float
    bubble_area: float  # marker area (points^2) of a bubble of value vmax
    percent: bool
    annotate: bool | None


def _render(kind, partitions, labels, percent, path, max_partitions, class_names, title, figsize, dpi, annotate=None):
    """Validate the arguments, draw one panel per partition, add the shared legend and save."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    max_partitions = check_integer("max_partitions", max_partitions)
    dpi = check_integer("dpi", dpi)
    labels = check_class_labels(labels)
    num_classes = labels.shape[1] if labels.ndim == 2 else int(labels.max()) + 1
    names = _class_names(class_names, num_classes)
    panels = [_panel(name, p, labels, len(names), percent, max_partitions) for name, p in partitions.items()]

    figure_class = _require_matplotlib()
    rows = max(values.shape[0] for _, values in panels)
    width, height = figsize or _auto_figsize(kind, rows, len(panels), len(names))
    # The largest bubble fills most of a grid cell, whose size in points is roughly the panel's over the grid's.
    panel_width = max(width - 1.2, 0.5 * width) / len(panels)  # less the legend, when there is room for one
    cell = 72 * min(0.8 * panel_width / len(names), 0.75 * height / rows)
    style = _Style(
        colors=_class_colors(len(names)),
        vmax=max(float(values.max()) for _, values in panels) or 1.0,
        bubble_area=min(_BUBBLE_DIAMETER, 0.9 * cell) ** 2,
        percent=bool(percent),
        annotate=annotate,
    )
    fig = figure_class(figsize=(width, height), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    unit = "% of partition" if percent else "count"
    for ax, (panel_title, values) in zip(axes, panels):
        artist = _DRAW[kind](ax, values, style)
        ax.set_title(panel_title)
        _set_ticks(ax, kind, values.shape[0], names, unit)
    _shared_legend(fig, axes, kind, artist, names, style, unit)
    if title:
        fig.suptitle(title)
    if path is not None:
        save_figure(fig, path, dpi)
    return fig


def _panel(name, partition, labels, num_classes, percent, max_partitions) -> tuple[str, np.ndarray]:
    """Return a panel's title and its (shown partitions x classes) table of counts or percentages."""
    _check_partition(partition, "partition" if name is None else f"partitions[{name!r}]")
    counts = partition.counts(labels).astype(float)
    counts = np.pad(counts, ((0, 0), (0, num_classes - counts.shape[1])))  # classes named but absent
    if percent:
        totals = counts.sum(axis=1, keepdims=True)
        counts = np.divide(100.0 * counts, totals, out=np.zeros_like(counts), where=totals > 0)
    label = f"{partition.scheme}, K={partition.num_partitions}" if name is None else str(name)
    if partition.num_partitions > max_partitions:
        label += f" (first {max_partitions} of {partition.num_partitions} partitions)"
    return label, counts[:max_partitions]


def _class_names(class_names, num_classes: int) -> list[str]:
    if isinstance(class_names, str):
        raise TypeError("`class_names` must be a sequence of names, one per class, got a single string")
    names = [str(name) for name in (range(num_classes) if class_names is None else class_names)]
    if len(names) < num_classes:
        raise ValueError(
            f"`class_names` has {len(names)} names but `labels` has {num_classes} classes; give one name per class"
        )
    return names


def _require_matplotlib():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "partitions.plot needs matplotlib, which is not installed: pip install matplotlib "
            "(or pip install 'fedsim[plot]')"
        ) from None
    return Figure


def _class_colors(num_classes: int) -> np.ndarray:
    """Return one RGBA row per class: qualitative tab10/tab20, then spread-out samples of turbo."""
    from matplotlib import colormaps

    if num_classes <= 20:
        cmap = colormaps["tab10" if num_classes <= 10 else "tab20"]
        return cmap(np.arange(num_classes))
    # Golden-ratio steps put neighbouring classes far apart on the colour map, for any class count.
    positions = 0.05 + 0.9 * ((np.arange(num_classes) * 0.6180339887) % 1.0)
    return colormaps["turbo"](positions)


def _auto_figsize(kind, rows: int, num_panels: int, num_classes: int) -> tuple[float, float]:
    if kind == "stacked":
        width, height = np.clip(1.5 + 0.22 * rows, 4, 14), 4.0
    else:
        width, height = np.clip(1.5 + 0.45 * num_classes, 4, 14), np.clip(1.2 + 0.3 * rows, 3, 12)
    legend = 1.2 * math.ceil(num_classes / 20) if kind == "stacked" and num_classes <= _MAX_LEGEND_CLASSES else 1.2
    return float(min(width * num_panels + legend, 40)), float(height)


def _draw_stacked(ax, values, style):
    positions = np.arange(values.shape[0])
    bottoms = np.cumsum(values, axis=1) - values
    for c in range(values.shape[1]):
        ax.bar(positions, values[:, c], bottom=bottoms[:, c], width=0.8, color=style.colors[c], linewidth=0)
    ax.set_xlim(-0.6, values.shape[0] - 0.4)
    if style.percent:
        ax.set_ylim(0, 100)


def _draw_heatmap(ax, values, style):
    image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0, vmax=style.vmax, interpolation="nearest")
    if style.annotate or (style.annotate is None and values.size <= _MAX_ANNOTATED_CELLS):
        for (row, col), value in np.ndenumerate(values):
            # viridis is dark at the bottom: white text there, black on the bright end
            ax.text(col, row, f"{value:.0f}", ha="center", va="center", fontsize="x-small",
                    color="white" if value < 0.6 * style.vmax else "black")
    return image


def _draw_bubbles(ax, values, style):
    rows, cols = np.nonzero(values)
    ax.scatter(cols, rows, s=style.bubble_area * values[rows, cols] / style.vmax, c=style.colors[cols],
               alpha=0.85, edgecolors="black", linewidths=0.4)
    ax.set_xlim(-0.5, values.shape[1] - 0.5)
    ax.set_ylim(values.shape[0] - 0.5, -0.5)  # partition 0 on top, as in the heatmap
    ax.set_axisbelow(True)
    ax.grid(True, color="0.9")


_DRAW = {"stacked": _draw_stacked, "heatmap": _draw_heatmap, "bubbles": _draw_bubbles}


def _set_ticks(ax, kind, num_rows, names, unit):
    """Label the partition axis (x for stacked bars, y otherwise) and the class axis."""
    partition_ticks = np.arange(0, num_rows, math.ceil(num_rows / _MAX_TICKS))
    if kind == "stacked":
        ax.set_xticks(partition_ticks)
        ax.set_xlabel("partition")
        ax.set_ylabel(unit)
        return
    class_ticks = np.arange(0, len(names), math.ceil(len(names) / _MAX_TICKS))
    ax.set_xticks(class_ticks, [names[c] for c in class_ticks],
                  rotation=90 if max(map(len, names)) > 3 or len(class_ticks) > 15 else 0)
    ax.set_yticks(partition_ticks)
    ax.set_xlabel("class")
    ax.set_ylabel("partition")


def _shared_legend(fig, axes, kind, artist, names, style, unit):
    """Add the one legend that holds for every panel, outside the axes so it covers no data."""
    if kind == "heatmap":
        # The defaults size the bar and its gap as fractions of all panels together: too wide for several.
        fig.colorbar(artist, ax=list(axes), label=unit, fraction=0.15 / len(axes), pad=0.04 / len(axes))
        return
    if kind == "bubbles":
        from matplotlib.lines import Line2D

        reference = sorted({float(f"{style.vmax * share:.1g}") for share in (1.0, 0.5, 0.1)}, reverse=True)
        # A scatter marker's area is its Line2D markersize squared.
        handles = [Line2D([], [], marker="o", linestyle="", markerfacecolor="0.7", markeredgecolor="black",
                          markersize=math.sqrt(style.bubble_area * value / style.vmax)) for value in reference]
        fig.legend(handles, [f"{value:g}" for value in reference], loc="outside right upper", title=unit,
                   labelspacing=1.5, borderpad=1, frameon=False)
        return
    if len(names) <= _MAX_LEGEND_CLASSES:
        from matplotlib.patches import Patch

        handles = [Patch(color=color) for color in style.colors]
        fig.legend(handles, names, loc="outside right upper", title="class", fontsize="small",
                   ncols=math.ceil(len(names) / 20), frameon=False)


def save_figure(fig, path, dpi: int) -> None:
    """Write ``fig`` to ``path`` as a PNG atomically (`partitions._io.atomic_open`), creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as stream:
        fig.savefig(stream, format="png", dpi=dpi)
