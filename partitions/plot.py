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
from ._drawing import (BUBBLE_DIAMETER, DRAW, Style, auto_figsize, class_colors, heatmap_norm, panel_size, set_ticks,
                       shared_legend)
from .figure_file import check_figure_path, require_matplotlib, save_figure
from .metrics import _check_partition

KINDS = ("stacked", "heatmap", "bubbles")
_MAX_COLUMNS = 4  # panels in a row of `compare`: more squeeze each panel's text below readable
_MAX_ROW_INCHES = 20.0  # the widest row of panels `compare` makes by itself: 2,000 px at 100 dpi


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
        Panels per row. By default as many as fit in a row 20 inches wide, at most 4, the rows as
        even as can be: 5 small panels make rows of 3 and 2, and 3 panels of 50 partitions each
        stack one to a row.

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


# -- the panels and the figure (each kind is drawn by `partitions._drawing`) -------------------


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


def _render(kind, partitions, labels, *, percent, path, max_partitions, first_partition, class_names, title,
            figsize, dpi, log=True, annotate=None, ncols=None):
    """Validate the arguments, draw one panel per partition in a grid, add the shared legend and save."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    max_partitions = check_integer("max_partitions", max_partitions)
    first_partition = check_integer("first_partition", first_partition, minimum=0)
    dpi = check_integer("dpi", dpi)
    if ncols is not None:
        ncols = check_integer("ncols", ncols)
    labels = check_class_labels(labels)
    num_classes = labels.shape[1] if labels.ndim == 2 else int(labels.max()) + 1
    names = _class_names(class_names, num_classes)
    panels = [_panel(name, p, labels, len(names), percent, first_partition, max_partitions)
              for name, p in partitions.items()]
    rows = max(panel.values.shape[0] for panel in panels)
    grid_rows, grid_cols = _grid(len(partitions), ncols, panel_size(kind, rows, len(names))[0])
    if path is not None:
        path = check_figure_path(path)  # before drawing, which takes a while for many partitions

    require_matplotlib()
    from matplotlib.figure import Figure

    width, height = figsize or auto_figsize(kind, rows, grid_rows, grid_cols, len(names))
    # The largest bubble fills most of a grid cell, whose size in points is roughly the panel's over the grid's.
    panel_width = max(width - 1.2, 0.5 * width) / grid_cols  # less the legend, when there is room for one
    cell = 72 * min(0.8 * panel_width / len(names), 0.75 * height / grid_rows / rows)
    tallest = [panel.values.sum(axis=1) if kind == "stacked" else panel.values for panel in panels]
    vmax = max(float(values.max()) for values in tallest) or 1.0
    style = Style(
        colors=class_colors(len(names)),
        vmax=vmax,
        norm=heatmap_norm(panels, vmax, log) if kind == "heatmap" else None,
        log=bool(log),
        bubble_area=min(BUBBLE_DIAMETER, 0.9 * cell) ** 2,
        annotate=annotate,
    )
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    grid = fig.subplots(grid_rows, grid_cols, squeeze=False).ravel()
    for ax in grid[len(panels):]:
        ax.remove()  # the empty end of a short last row
    axes = grid[: len(panels)]
    unit = "% of the partition's samples" if percent else "samples"
    for ax, panel in zip(axes, panels):
        artist = DRAW[kind](ax, panel, style)
        ax.set_title(panel.title)
        set_ticks(ax, kind, panel, names, unit)
    shared_legend(fig, axes, grid_cols, kind, artist, names, style, unit)
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


def _grid(num_panels: int, ncols, panel_width: float) -> tuple[int, int]:
    """Return the (rows, columns) of the panels: at most ``ncols`` a row, the rows as even as can be.

    By default as many panels of ``panel_width`` inches as fit in `_MAX_ROW_INCHES` (one at least,
    `_MAX_COLUMNS` at most): panels of 50 partitions each wrap one to a row rather than make a
    figure wider than a screen.
    """
    if ncols is None:
        ncols = max(1, min(_MAX_COLUMNS, int(_MAX_ROW_INCHES // panel_width)))
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
