"""How `partitions.plot` draws each kind of figure with matplotlib: colours, scales, marks, ticks, legend.

`partitions.plot` prepares the panels (a table of counts or percentages per partition shown);
everything here only draws them, and imports matplotlib inside its functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_MAX_TICKS = 30  # beyond this, tick labels overlap: label every n-th row or column
_MAX_ANNOTATED_CELLS = 400
_MAX_LEGEND_CLASSES = 40  # a legend of more swatches is unreadable; heatmaps and bubbles name classes on the axis
BUBBLE_DIAMETER = 24.0  # points, of the largest bubble when cells are roomy
_MIN_BUBBLE_DIAMETER = 4.0  # points: a count far below the largest still shows as a dot
_HEADROOM = 1.05  # the frame's top over the tallest bar, so that no bar ends on the frame


@dataclass(frozen=True)
class Style:
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


def class_colors(num_classes: int) -> np.ndarray:
    """Return one RGBA row per class: qualitative tab10/tab20, then spread-out samples of turbo."""
    from matplotlib import colormaps

    if num_classes <= 20:
        cmap = colormaps["tab10" if num_classes <= 10 else "tab20"]
        return cmap(np.arange(num_classes))
    # Golden-ratio steps put neighbouring classes far apart on the colour map, for any class count.
    positions = 0.05 + 0.9 * ((np.arange(num_classes) * 0.6180339887) % 1.0)
    return colormaps["turbo"](positions)


def heatmap_norm(panels, vmax: float, log: bool):
    """Return the colour scale every heatmap panel shares: from the smallest non-zero value, or linear from 0."""
    from matplotlib.colors import LogNorm, Normalize

    if not log:
        return Normalize(vmin=0.0, vmax=vmax)
    positive = np.concatenate([panel.values[panel.values > 0] for panel in panels])
    smallest = float(positive.min()) if positive.size else vmax
    # A log scale needs vmin < vmax; a table of one value gets a decade below it.
    return LogNorm(vmin=smallest if smallest < vmax else vmax / 10, vmax=vmax)


def panel_size(kind, rows: int, num_classes: int) -> tuple[float, float]:
    """Return the (width, height) in inches one panel of ``rows`` partitions and ``num_classes`` classes needs."""
    if kind == "stacked":
        return float(np.clip(1.5 + 0.22 * rows, 4, 14)), 4.0
    return float(np.clip(1.5 + 0.45 * num_classes, 4, 14)), float(np.clip(1.2 + 0.3 * rows, 3, 12))


def auto_figsize(kind, rows: int, grid_rows: int, grid_cols: int, num_classes: int) -> tuple[float, float]:
    width, height = panel_size(kind, rows, num_classes)
    legend = 1.2 * math.ceil(num_classes / 20) if kind == "stacked" and num_classes <= _MAX_LEGEND_CLASSES else 1.2
    return float(min(width * grid_cols + legend, 40)), float(min(height * grid_rows, 40))


def draw_stacked(ax, panel, style):
    values, positions = panel.values, panel.ids
    bottoms = np.cumsum(values, axis=1) - values
    for c in range(values.shape[1]):
        ax.bar(positions, values[:, c], bottom=bottoms[:, c], width=0.8, color=style.colors[c], linewidth=0)
    ax.set_xlim(positions[0] - 0.6, positions[-1] + 0.6)
    # Set rather than autoscaled: a bar's zero-height segments sit on its top, and autoscaling treats
    # their bottom edges as sticky, so the tallest bar would end on the frame.
    ax.set_ylim(0, _HEADROOM * style.vmax)


def draw_heatmap(ax, panel, style):
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


def draw_bubbles(ax, panel, style):
    values = panel.values
    rows, cols = np.nonzero(values)
    ax.scatter(cols, panel.ids[rows], s=style.bubble_sizes(values[rows, cols]), c=style.colors[cols],
               alpha=0.85, edgecolors="black", linewidths=0.4)
    ax.set_xlim(-0.5, values.shape[1] - 0.5)
    ax.set_ylim(panel.ids[-1] + 0.5, panel.first - 0.5)  # first partition on top, as in the heatmap
    ax.set_axisbelow(True)
    ax.grid(True, color="0.9")


DRAW = {"stacked": draw_stacked, "heatmap": draw_heatmap, "bubbles": draw_bubbles}


def set_ticks(ax, kind, panel, names, unit):
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


def shared_legend(fig, axes, grid_cols, kind, artist, names, style, unit):
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
