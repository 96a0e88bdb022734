"""The figures of runs and comparisons: one colour per strategy everywhere, the heatmap's cells, the bands."""

import math

import numpy as np
import pytest

from fedsim.results.plots import accuracy_heatmap, learning_curves, strategy_colors

pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402


def rows(accuracies, std=None):
    return [{"round": i + 1, "test_accuracy": acc, "bytes_communicated": 1e6 * (i + 1),
             **({} if std is None else {"test_accuracy_std": std})} for i, acc in enumerate(accuracies)]


def test_a_strategy_keeps_its_colour_in_every_figure(tmp_path):
    colors = strategy_colors(["allreduce", "reweighted", "fedavg"])
    assert len(set(colors.values())) == 3
    figure = learning_curves({"fedavg": rows([0.5, 0.7], std=0.05), "allreduce": rows([0.6, math.nan, 0.8])},
                             colors=colors, path=tmp_path / "curves.png", title="t")
    by_round, by_bytes = figure.axes
    for axes in (by_round, by_bytes):
        assert {line.get_label(): line.get_color() for line in axes.get_lines()} == {
            "fedavg": colors["fedavg"], "allreduce": colors["allreduce"]}
    assert [list(line.get_xdata()) for line in by_round.get_lines()] == [[1, 2], [1, 3]]  # unevaluated rounds skipped
    assert len(by_round.collections) == 1  # the ± std band of the strategy that has one
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_the_heatmap_annotates_each_cell_run_and_leaves_the_others_blank(tmp_path):
    values = np.array([[0.91, 0.42, math.nan], [0.9, 0.8, 0.1]])
    figure = accuracy_heatmap(values, ["allreduce", "fedavg"], ["IID", "#C=1", "Dir(0.1)"],
                              spread=np.full((2, 3), 0.01), path=tmp_path / "heat.png")
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert texts == ["0.910\n±0.010", "0.420\n±0.010", "0.900\n±0.010", "0.800\n±0.010", "0.100\n±0.010"]
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == ["allreduce", "fedavg"]
    assert (tmp_path / "heat.png").stat().st_size > 0
    with pytest.raises(ValueError, match=r"`values` has shape \(2, 3\), not \(strategies, partitions\) = \(2, 2\)"):
        accuracy_heatmap(values, ["allreduce", "fedavg"], ["IID", "#C=1"])


def test_a_grids_long_title_fits_a_heatmap_of_two_partitions():
    title = ("Final test accuracy: fashion-mnist, cnn, 10 clients, 50 rounds of E=10, B=64, lr 0.01; "
             "3 seed(s), inprocess")
    figure = accuracy_heatmap(np.full((2, 2), 0.5), ["fedavg", "scaffold"], ["IID", "#C=2"], title=title)
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    box, frame = figure.axes[0].title.get_window_extent(renderer), figure.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (box, frame)
    assert figure.axes[0].title.get_text().replace("\n", " ") == title  # wrapped, nothing lost


def test_communication_within_a_decade_still_gets_several_labels_on_its_log_axis():
    figure = learning_curves({"fedavg": [{"round": r, "test_accuracy": 0.5, "bytes_communicated": 3e6 + 1e6 * r}
                                         for r in range(5)]})
    by_bytes = figure.axes[1]
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    low, high = by_bytes.get_xlim()
    shown = [tick.label1.get_text() for tick in by_bytes.xaxis.get_major_ticks()
             if low <= tick.get_loc() <= high and tick.label1.get_text()]
    assert len(shown) >= 2, shown


def test_the_clients_accuracy_boxes_give_each_strategy_its_box_and_colour(tmp_path):
    from fedsim.results.plots import client_accuracy_boxes

    colors = strategy_colors(["fedavg", "scaffold"])
    figure = client_accuracy_boxes({"fedavg": [0.2, 0.5, 0.9], "scaffold": [0.6, 0.7, 0.8]}, colors=colors,
                                   path=tmp_path / "boxes.png", title="Dir(0.1)")
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["fedavg", "scaffold"]
    assert [patch.get_facecolor()[:3] for patch in axes.patches] == [colors["fedavg"][:3], colors["scaffold"][:3]]
    assert (tmp_path / "boxes.png").read_bytes()[:4] == b"\x89PNG"


def test_accuracy_is_drawn_against_simulated_time_where_asked():
    timed = [{**row, "sim_time_s": 0.5 * row["round"] ** 2} for row in rows([0.5, 0.7, 0.8])]
    figure = learning_curves({"fedbuff": timed}, against=("round", "time"))
    by_round, by_time = figure.axes
    assert [list(line.get_xdata()) for line in by_time.get_lines()] == [[0.5, 2.0, 4.5]]
    assert by_time.get_xlabel() == "simulated seconds" and by_round.get_xlabel().startswith("round")
