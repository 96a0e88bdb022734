"""Pictures of how the labels spread over the partitions: stacked bars, heatmaps and bubble charts.

matplotlib is imported inside the functions, so ``partitions`` never needs it otherwise. Figures are
`matplotlib.figure.Figure` objects made without pyplot: no global state, no display needed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ._checks import check_class_labels, check_integer
from .figure_file import check_figure_path, require_matplotlib, save_figure
from .metrics import _check_partition

KINDS = ("stacked", "heatmap", "bubbles")
_MAX_TICKS = 30  # beyond this, tick labels overlap: label every n-th row or column
_MAX_ANNOTATED_CELLS = 400
_MAX_LEGEND_CLASSES = 40  # a legend of more swatches is unreadable; heatmaps and bubbles name classes on the axis
_MAX_COLUMNS = 4  # panels in a row of `compare`: more squeeze each panel's text below readable
_BUBBLE_DIAMETER = 24.0  # points, of the largest bubble when cells are roomy
_MIN_BUBBLE_DIAMETER = 4.0  # points: a count far below the largest still shows as a dot
_HEADROOM = 1.05  # the frame's top over the tallest bar, so that no bar ends on the frame


def stacked_bars(partition, labels, *, percent=False, path=None, max_partitions=50, first_partition=0,
                 class_names=None, title=None, figsize=None, dpi=100):
    """Draw one bar per partition, stacked by class.

    Parameters
    ----------
    partition : Partition
        Titles the panel with its `Partition.describe` label and K.
    labels : array_like
        Class ids, one per sample, or a multi-hot (samples x classes) matrix.
    percent : bool, default False
        Plot each partition's class shares in percent instead of absolute counts.
    path : str or os.PathLike, optional
        Where to write the figure, in the format its extension names (``.png``, ``.pdf``, ``.svg``, ...:
        see `check_figure_path`, which runs before anything is drawn). Parent folders are created, the
        write is atomic.
    max_partitions : int, default 50
        Show at most this many partitions; when some are left out, the partition axis says which are shown.
    first_partition : int, default 0
        Id of the first partition shown: ``first_partition=50`` with ``max_partitions=50`` shows 50 to 99.
    class_names : sequence of str, optional
        One name per class, for the legend (drawn for up to 40 classes); defaults to the class ids.
    title : str, optional
        Figure title, above the panel's own.
    figsize : (float, float), optional
        Size in inches; chosen from the number of partitions and classes by default.
    dpi : int, default 100
        Resolution of the saved figure: a raster format is ``figsize * dpi`` pixels.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from partitions import dirichlet
    >>> labels = np.repeat(np.arange(3), 20)
    >>> fig = stacked_bars(dirichlet(labels, 4, alpha=1.0, min_partition_size=0, seed=0), labels)
    >>> len(fig.axes[0].patches), fig.axes[0].get_title()  # 4 partitions x 3 classes
    (12, 'Dir(1), K=4')
    """
    return _render("stacked", {None: partition}, labels, percent=percent, path=path, max_partitions=max_partitions,
                   first_partition=first_partition, class_names=class_names, title=title, figsize=figsize, dpi=dpi)


def heatmap(partition, labels, *, percent=False, path=None, max_partitions=50, first_partition=0, class_names=None,
            title=None, log=True, annotate=None, figsize=None, dpi=100):
    """Draw the partitions x classes table of counts as a heatmap.

    Parameters are those of `stacked_bars`, and:

    log : bool, default True
        Colour on a log scale, so that a few samples of a class stand apart from none and from many;
        empty cells stay white. ``False`` colours linearly from 0. The colour bar says which.
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
    >>> fig.axes[1].get_ylabel()
    'samples (log scale)'
    """
    return _render("heatmap", {None: partition}, labels, percent=percent, path=path, max_partitions=max_partitions,
                   first_partition=first_partition, class_names=class_names, title=title, figsize=figsize, dpi=dpi,
                   log=log, annotate=annotate)


def bubbles(partition, labels, *, percent=False, path=None, max_partitions=50, first_partition=0, class_names=None,
            title=None, figsize=None, dpi=100):
    """Draw a bubble per (partition, class) pair held, its area proportional to the count.

    A bubble is never smaller than a dot of 4 points, so that a count far below the largest stays
    visible; a pair with no sample gets no bubble. Parameters are those of `stacked_bars`.

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
    return _render("bubbles", {None: partition}, labels, percent=percent, path=path, max_partitions=max_partitions,
                   first_partition=first_partition, class_names=class_names, title=title, figsize=figsize, dpi=dpi)


def compare(partitions, labels, *, kind="stacked", percent=True, path=None, max_partitions=50, first_partition=0,
            class_names=None, title=None, ncols=None, figsize=None, dpi=100):
    """Draw several partitions of the same labels in a grid of panels, with one shared legend or colour scale.

    Parameters
    ----------
    partitions : mapping of str to Partition
        One panel per entry, titled with its name.
    labels : array_like
        Class ids or a multi-hot matrix, as in `stacked_bars`.
    kind : {"stacked", "heatmap", "bubbles"}, default "stacked"
        Which plot each panel is (see `stacked_bars`, `heatmap`, `bubbles`); heatmaps use a log scale.
    percent : bool, default True
        Plot class shares in percent, which makes partitions of different sizes comparable.
    ncols : int, optional
        Panels per row. By default at most 4, the rows as even as can be: 5 panels make rows of 3 and 2.

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
    return _render(kind, partitions, labels, percent=percent, path=path, max_partitions=max_partitions,
                   first_partition=first_partition, class_names=class_names, title=title, figsize=figsize, dpi=dpi,
                   ncols=ncols)


# -- shared machinery --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Panel:
    """One panel's title and its (shown partitions x classes) table of counts or percentages."""

    title: str
    values: np.ndarray
    first: int  # id of the partition in row 0 of `values`
    num_partitions: int  # in the whole partition, shown or not

    @property
    def ids(self) -> np.ndarray:
        """Ids of the partitions shown, which are also their positions on the partition axis."""
        return self.first + np.arange(self.values.shape[0])

    @property
    def partition_axis_label(self) -> str:
        if self.values.shape[0] == self.num_partitions:
            return "partition"
        return f"partitions {self.ids[0]}–{self.ids[-1]} of {self.num_partitions} shown"


@dataclass(frozen=True)
class _Style:
    """What every panel of one figure shares, so that equal heights, colours or areas mean equal values."""

    colors: np.ndarray  # one RGBA row per class
    vmax: float  # the largest value drawn: a whole bar for stacked bars, else a cell
    norm: object  # the matplotlib.colors.Normalize every heatmap panel shares; None for other kinds
    log: bool
    bubble_area: float  # marker area (points^2) of a bubble of value vmax
    annotate: bool | None

    def bubble_sizes(self, values) -> np.ndarray:
        """Return marker areas proportional to ``values``, but none below a dot of `_MIN_BUBBLE_DIAMETER`."""
        smallest = min(_MIN_BUBBLE_DIAMETER ** 2, self.bubble_area)
        return np.maximum(self.bubble_area * np.asarray(values) / self.vmax, smallest)


def _render(kind, partitions, labels, *, percent, path, max_partitions, first_partition, class_names, title,
            figsize, dpi, log=True, annotate=None, ncols=None):
    """Validate the arguments, draw one panel per partition in a grid, add the shared legend and save."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    max_partitions = check_integer("max_partitions", max_partitions)
    first_partition = check_integer("first_partition", first_partition, minimum=0)
    dpi = check_integer("dpi", dpi)
    grid_rows, grid_cols = _grid(len(partitions), ncols)
    labels = check_class_labels(labels)
    num_classes = labels.shape[1] if labels.ndim == 2 else int(labels.max()) + 1
    names = _class_names(class_names, num_classes)
    panels = [_panel(name, p, labels, len(names), percent, first_partition, max_partitions)
              for name, p in partitions.items()]
    if path is not None:
        path = check_figure_path(path)  # before drawing, which takes a while for many partitions

    require_matplotlib()
    from matplotlib.figure import Figure

    rows = max(panel.values.shape[0] for panel in panels)
    width, height = figsize or _auto_figsize(kind, rows, grid_rows, grid_cols, len(names))
    # The largest bubble fills most of a grid cell, whose size in points is roughly the panel's over the grid's.
    panel_width = max(width - 1.2, 0.5 * width) / grid_cols  # less the legend, when there is room for one
    cell = 72 * min(0.8 * panel_width / len(names), 0.75 * height / grid_rows / rows)
    tallest = [panel.values.sum(axis=1) if kind == "stacked" else panel.values for panel in panels]
    vmax = max(float(values.max()) for values in tallest) or 1.0
    style = _Style(
        colors=_class_colors(len(names)),
        vmax=vmax,
        norm=_heatmap_norm(panels, vmax, log) if kind == "heatmap" else None,
        log=bool(log),
        bubble_area=min(_BUBBLE_DIAMETER, 0.9 * cell) ** 2,
        annotate=annotate,
    )
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    grid = fig.subplots(grid_rows, grid_cols, squeeze=False).ravel()
    for ax in grid[len(panels):]:
        ax.remove()  # the empty end of a short last row
    axes = grid[: len(panels)]
    unit = "% of the partition's samples" if percent else "samples"
    for ax, panel in zip(axes, panels):
        artist = _DRAW[kind](ax, panel, style)
        ax.set_title(panel.title)
        _set_ticks(ax, kind, panel, names, unit)
    _shared_legend(fig, axes, grid_cols, kind, artist, names, style, unit)
    if title:
        fig.suptitle(title)
    if path is not None:
        save_figure(fig, path, dpi)
    return fig


def _panel(name, partition, labels, num_classes, percent, first, max_partitions) -> _Panel:
    """Return the panel of ``partition``: titled ``name``, or by the partition's own label when it is None."""
    where = "partition" if name is None else f"partitions[{name!r}]"
    _check_partition(partition, where)
    if first >= partition.num_partitions:
        raise ValueError(
            f"`first_partition`={first} is past the last partition of `{where}`, which has "
            f"{partition.num_partitions} (ids 0 to {partition.num_partitions - 1})"
        )
    counts = partition.counts(labels)[first : first + max_partitions].astype(float)
    counts = np.pad(counts, ((0, 0), (0, num_classes - counts.shape[1])))  # classes named but absent
    if percent:
        totals = counts.sum(axis=1, keepdims=True)
        counts = np.divide(100.0 * counts, totals, out=np.zeros_like(counts), where=totals > 0)
    label = f"{partition.describe()}, K={partition.num_partitions}" if name is None else str(name)
    return _Panel(label, counts, first, partition.num_partitions)


def _grid(num_panels: int, ncols) -> tuple[int, int]:
    """Return the (rows, columns) of the panels: at most ``ncols`` a row, the rows as even as can be."""
    ncols = _MAX_COLUMNS if ncols is None else check_integer("ncols", ncols)
    rows = math.ceil(num_panels / ncols)
    return rows, math.ceil(num_panels / rows)


def _class_names(class_names, num_classes: int) -> list[str]:
    if isinstance(class_names, str):
        raise TypeError("`class_names` must be a sequence of names, one per class, got a single string")
    names = [str(name) for name in (range(num_classes) if class_names is None else class_names)]
    if len(names) < num_classes:
        raise ValueError(
            f"`class_names` has {len(names)} names but `labels` has {num_classes} classes; give one name per class"
        )
    return names


def _class_colors(num_classes: int) -> np.ndarray:
    """Return one RGBA row per class: qualitative tab10/tab20, then spread-out samples of turbo."""
    from matplotlib import colormaps

    if num_classes <= 20:
        cmap = colormaps["tab10" if num_classes <= 10 else "tab20"]
        return cmap(np.arange(num_classes))
    # Golden-ratio steps put neighbouring classes far apart on the colour map, for any class count.
    positions = 0.05 + 0.9 * ((np.arange(num_classes) * 0.6180339887) % 1.0)
    return colormaps["turbo"](positions)


def _heatmap_norm(panels, vmax: float, log: bool):
    """Return the colour scale every heatmap panel shares: from the smallest non-zero value, or linear from 0."""
    from matplotlib.colors import LogNorm, Normalize

    if not log:
        return Normalize(vmin=0.0, vmax=vmax)
    positive = np.concatenate([panel.values[panel.values > 0] for panel in panels])
    smallest = float(positive.min()) if positive.size else vmax
    # A log scale needs vmin < vmax; a table of one value gets a decade below it.
    return LogNorm(vmin=smallest if smallest < vmax else vmax / 10, vmax=vmax)


def _auto_figsize(kind, rows: int, grid_rows: int, grid_cols: int, num_classes: int) -> tuple[float, float]:
    if kind == "stacked":
        width, height = np.clip(1.5 + 0.22 * rows, 4, 14), 4.0
    else:
        width, height = np.clip(1.5 + 0.45 * num_classes, 4, 14), np.clip(1.2 + 0.3 * rows, 3, 12)
    legend = 1.2 * math.ceil(num_classes / 20) if kind == "stacked" and num_classes <= _MAX_LEGEND_CLASSES else 1.2
    return float(min(width * grid_cols + legend, 40)), float(min(height * grid_rows, 40))


def _draw_stacked(ax, panel, style):
    values, positions = panel.values, panel.ids
    bottoms = np.cumsum(values, axis=1) - values
    for c in range(values.shape[1]):
        ax.bar(positions, values[:, c], bottom=bottoms[:, c], width=0.8, color=style.colors[c], linewidth=0)
    ax.set_xlim(positions[0] - 0.6, positions[-1] + 0.6)
    # Set rather than autoscaled: a bar's zero-height segments sit on its top, and autoscaling treats
    # their bottom edges as sticky, so the tallest bar would end on the frame.
    ax.set_ylim(0, _HEADROOM * style.vmax)


def _draw_heatmap(ax, panel, style):
    from matplotlib import colormaps

    values, first = panel.values, panel.first
    # On a log scale zeros are masked, and "bad" is their colour: an empty cell reads as blank.
    cmap = colormaps["viridis"].with_extremes(bad="white")
    extent = (-0.5, values.shape[1] - 0.5, first + values.shape[0] - 0.5, first - 0.5)  # rows at partition ids
    image = ax.imshow(values, aspect="auto", cmap=cmap, norm=style.norm, interpolation="nearest", extent=extent)
    if style.annotate or (style.annotate is None and values.size <= _MAX_ANNOTATED_CELLS):
        shades = np.ma.filled(style.norm(values), 1.0)  # a masked (white) cell takes black text
        for (row, col), value in np.ndenumerate(values):
            # viridis is dark at the bottom: white text there, black on the bright end
            # a share under 1% is not "0": that reads as empty, and the cell is coloured
            text = "<1" if 0 < value < 0.5 else f"{value:.0f}"
            ax.text(col, first + row, text, ha="center", va="center", fontsize="x-small",
                    color="white" if shades[row, col] < 0.6 else "black")
    return image


def _draw_bubbles(ax, panel, style):
    values = panel.values
    rows, cols = np.nonzero(values)
    ax.scatter(cols, panel.ids[rows], s=style.bubble_sizes(values[rows, cols]), c=style.colors[cols],
               alpha=0.85, edgecolors="black", linewidths=0.4)
    ax.set_xlim(-0.5, values.shape[1] - 0.5)
    ax.set_ylim(panel.ids[-1] + 0.5, panel.first - 0.5)  # first partition on top, as in the heatmap
    ax.set_axisbelow(True)
    ax.grid(True, color="0.9")


_DRAW = {"stacked": _draw_stacked, "heatmap": _draw_heatmap, "bubbles": _draw_bubbles}


def _set_ticks(ax, kind, panel, names, unit):
    """Label the partition axis (x for stacked bars, y otherwise) and the class axis."""
    partition_ticks = panel.ids[:: math.ceil(panel.values.shape[0] / _MAX_TICKS)]
    if kind == "stacked":
        ax.set_xticks(partition_ticks)
        ax.set_xlabel(panel.partition_axis_label)
        ax.set_ylabel(unit)
        return
    class_ticks = np.arange(0, len(names), math.ceil(len(names) / _MAX_TICKS))
    ax.set_xticks(class_ticks, [names[c] for c in class_ticks],
                  rotation=90 if max(map(len, names)) > 3 or len(class_ticks) > 15 else 0)
    ax.set_yticks(partition_ticks)
    ax.set_xlabel("class")
    ax.set_ylabel(panel.partition_axis_label)


def _shared_legend(fig, axes, grid_cols, kind, artist, names, style, unit):
    """Add the one legend that holds for every panel, outside the axes so it covers no data."""
    if kind == "heatmap":
        # The defaults size the bar and its gap as fractions of a whole row of panels: too wide for several.
        fig.colorbar(artist, ax=list(axes), label=f"{unit} (log scale)" if style.log else unit,
                     format="%g", fraction=0.15 / grid_cols, pad=0.04 / grid_cols)  # 10, not 10^1
        return
    if kind == "bubbles":
        from matplotlib.lines import Line2D

        reference = sorted({float(f"{style.vmax * share:.1g}") for share in (1.0, 0.5, 0.1)}, reverse=True)
        # A scatter marker's area is its Line2D markersize squared.
        handles = [Line2D([], [], marker="o", linestyle="", markerfacecolor="0.7", markeredgecolor="black",
                          markersize=math.sqrt(area)) for area in style.bubble_sizes(reference)]
        fig.legend(handles, [f"{value:g}" for value in reference], loc="outside right upper", title=unit,
                   labelspacing=1.5, borderpad=1, frameon=False)
        return
    if len(names) <= _MAX_LEGEND_CLASSES:
        from matplotlib.patches import Patch

        handles = [Patch(color=color) for color in style.colors]
        fig.legend(handles, names, loc="outside right upper", title="class", fontsize="small",
                   ncols=math.ceil(len(names) / 20), frameon=False)
