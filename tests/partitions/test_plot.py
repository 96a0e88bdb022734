import os
from pathlib import Path
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from matplotlib.colors import LogNorm, Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.image import imread  # noqa: E402

from partitions import Partition, dirichlet, iid, pathological, shards  # noqa: E402
from partitions.plot import (  # noqa: E402
    bubbles,
    check_figure_path,
    compare,
    heatmap,
    save_figure,
    stacked_bars,
)

LABELS = np.repeat(np.arange(3), 10)


@pytest.fixture
def partition():
    # 4 partitions, 3 classes, 8 of the 12 (partition, class) cells non-zero
    return Partition([[0, 1, 2, 10, 11], [3, 4, 20, 21], [5, 12, 13, 22, 23, 24], [6, 7, 8, 9]],
                     num_samples=30, scheme="manual")


def _assert_png(path, width, height):
    assert path.stat().st_size > 0
    assert imread(path).shape[:2] == (height, width)


@pytest.mark.parametrize("percent", [False, True])
def test_stacked_bars_draws_one_segment_per_partition_and_class(partition, tmp_path, percent):
    path = tmp_path / "new" / "folder" / "bars.png"
    fig = stacked_bars(partition, LABELS, percent=percent, path=path, figsize=(6, 4), dpi=50, title="t")
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    bars = fig.axes[0].patches
    assert len(bars) == 4 * 3
    centres = np.array([round(bar.get_x() + bar.get_width() / 2) for bar in bars])
    tops = np.array([bar.get_y() + bar.get_height() for bar in bars])
    np.testing.assert_allclose([tops[centres == k].max() for k in range(4)], [100] * 4 if percent else partition.sizes)
    _assert_png(path, 300, 200)
    assert sorted(p.name for p in path.parent.iterdir()) == ["bars.png"]  # no temporary file left behind


def test_heatmap_annotates_every_cell_and_adds_a_colour_bar(partition, tmp_path):
    path = tmp_path / "heat.png"
    fig = heatmap(partition, LABELS, path=path, figsize=(5, 4), dpi=40)
    assert len(fig.axes) == 2  # heatmap + colour bar
    image = fig.axes[0].get_images()[0]
    np.testing.assert_array_equal(image.get_array(), partition.counts(LABELS))
    assert sorted(int(t.get_text()) for t in fig.axes[0].texts) == sorted(partition.counts(LABELS).ravel())
    assert len(heatmap(partition, LABELS, annotate=False).axes[0].texts) == 0
    _assert_png(path, 200, 160)


def test_bubbles_draws_one_marker_per_nonzero_cell_with_area_proportional_to_count(partition, tmp_path):
    path = tmp_path / "bubbles.png"
    fig = bubbles(partition, LABELS, path=path, figsize=(5, 5), dpi=30)
    assert len(fig.axes) == 1
    scatter = fig.axes[0].collections[0]
    counts = partition.counts(LABELS)
    assert len(scatter.get_offsets()) == np.count_nonzero(counts) == 8
    areas = scatter.get_sizes()
    np.testing.assert_allclose(areas / areas.max(), counts[counts > 0] / counts.max())
    _assert_png(path, 150, 150)


@pytest.mark.parametrize(("kind", "num_axes"), [("stacked", 2), ("heatmap", 3), ("bubbles", 2)])
def test_compare_draws_a_panel_per_partition_with_one_shared_legend(kind, num_axes, tmp_path):
    labels = np.repeat(np.arange(4), 10)
    schemes = {"iid": iid(labels, 4, seed=0), "shards": shards(labels, 4, seed=0)}
    path = tmp_path / f"{kind}.png"
    fig = compare(schemes, labels, kind=kind, path=path, figsize=(8, 3), dpi=50)
    assert len(fig.axes) == num_axes
    assert [ax.get_title() for ax in fig.axes[:2]] == ["iid", "shards"]
    assert len(fig.legends) == (0 if kind == "heatmap" else 1)
    _assert_png(path, 400, 150)


def test_many_partitions_show_the_first_max_partitions_and_say_so():
    labels = np.repeat(np.arange(5), 40)
    p = dirichlet(labels, 20, alpha=1.0, min_partition_size=0, seed=0)
    fig = stacked_bars(p, labels, max_partitions=8)
    assert len(fig.axes[0].patches) == 8 * 5
    assert fig.axes[0].get_xlabel() == "partitions 0–7 of 20 shown"


def test_a_hundred_classes_get_distinct_colours():
    labels = np.arange(100)
    fig = stacked_bars(Partition([labels], num_samples=100, scheme="manual"), labels)
    colours = {tuple(np.round(bar.get_facecolor(), 4)) for bar in fig.axes[0].patches}
    assert len(colours) == 100


def test_class_names_label_the_class_axis(partition):
    fig = heatmap(partition, LABELS, class_names=["cat", "dog", "emu"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["cat", "dog", "emu"]
    with pytest.raises(ValueError, match="`class_names` has 2 names"):
        heatmap(partition, LABELS, class_names=["cat", "dog"])


def test_bad_arguments_raise_errors_naming_the_parameter(partition):
    with pytest.raises(ValueError, match="`kind`.*'pie'"):
        compare({"p": partition}, LABELS, kind="pie")
    with pytest.raises(TypeError, match="`partitions`"):
        compare([partition], LABELS)
    with pytest.raises(ValueError, match="`partitions` is empty"):
        compare({}, LABELS)
    with pytest.raises(TypeError, match=r"`partitions\['x'\]`"):
        compare({"x": [[0]]}, LABELS)
    with pytest.raises(TypeError, match="`partition`"):
        bubbles([[0]], LABELS)
    with pytest.raises(ValueError, match="`max_partitions` must be >= 1"):
        stacked_bars(partition, LABELS, max_partitions=0)
    with pytest.raises(ValueError, match="`labels` has 3 entries"):
        stacked_bars(partition, [0, 1, 2])


def test_module_imports_without_matplotlib_and_says_how_to_install_it():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["matplotlib"] = None  # makes any `import matplotlib...` fail
        import numpy as np
        import partitions.plot
        from partitions import iid
        try:
            partitions.plot.stacked_bars(iid(4, 2, seed=0), np.array([0, 1, 0, 1]))
        except ImportError as error:
            print(error)
        else:
            raise SystemExit("no ImportError")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pip install matplotlib" in result.stdout


# -- what the figures show --------------------------------------------------------------------


def _skewed(counts_per_partition):
    """Return a Partition and labels where partition k holds ``counts_per_partition[k][c]`` samples of class c."""
    counts = np.asarray(counts_per_partition)
    labels = np.concatenate([np.repeat(np.arange(counts.shape[1]), row) for row in counts])
    owners = np.repeat(np.arange(counts.shape[0]), counts.sum(axis=1))
    return Partition([np.flatnonzero(owners == k) for k in range(counts.shape[0])], labels.size, "manual"), labels


@pytest.mark.parametrize(
    ("make", "title"),
    [
        (lambda labels: dirichlet(labels, 4, alpha=0.1, min_partition_size=0, seed=0), "Dir(0.1), K=4"),
        (lambda labels: pathological(labels, 4, 2, seed=0), "#C=2, K=4"),
        (lambda labels: shards(labels, 4, seed=0), "shards(2 per client), K=4"),
        (lambda labels: iid(labels, 4, seed=0), "IID, K=4"),
    ],
)
@pytest.mark.parametrize("draw", [stacked_bars, heatmap, bubbles])
def test_panel_titles_carry_the_partition_parameters_and_a_caller_title_is_kept_above(make, title, draw):
    labels = np.repeat(np.arange(4), 10)
    fig = draw(make(labels), labels, title="mnist")
    assert fig.axes[0].get_title() == title
    assert fig.get_suptitle() == "mnist"


def test_compare_titles_panels_with_the_names_it_is_given():
    labels = np.repeat(np.arange(4), 10)
    fig = compare({"mine": dirichlet(labels, 4, alpha=0.1, min_partition_size=0, seed=0)}, labels)
    assert fig.axes[0].get_title() == "mine"


@pytest.mark.parametrize("percent", [False, True])
def test_the_frame_leaves_room_above_the_tallest_bar(percent):
    # The tallest bar (partition 0) lacks the last class: its zero-height top segment used to pin the frame to it.
    p, labels = _skewed([[6, 3, 0], [1, 1, 1]])
    ax = stacked_bars(p, labels, percent=percent).axes[0]
    tops = [bar.get_y() + bar.get_height() for bar in ax.patches]
    assert ax.get_ylim()[1] > max(tops) == (100 if percent else 9)


def test_compared_bars_share_one_count_scale():
    small, labels = _skewed([[2, 1], [1, 2]])
    fig = compare({"a": small, "b": small}, labels, percent=False)
    assert fig.axes[0].get_ylim() == fig.axes[1].get_ylim()


def _grid_shape(axes):
    """Return the (rows, columns) in which the axes lie on the drawn figure."""
    boxes = [ax.get_position() for ax in axes]
    return len({round(box.y0, 4) for box in boxes}), len({round(box.x0, 4) for box in boxes})


@pytest.mark.parametrize(
    ("num_panels", "ncols", "shape"),
    [(2, None, (1, 2)), (4, None, (1, 4)), (5, None, (2, 3)), (8, None, (2, 4)), (9, None, (3, 3)), (5, 2, (3, 2))],
)
@pytest.mark.parametrize("kind", ["stacked", "heatmap", "bubbles"])
def test_compare_wraps_panels_into_a_grid_with_one_shared_legend(kind, num_panels, ncols, shape):
    labels = np.repeat(np.arange(4), 10)
    schemes = {f"seed {seed}": dirichlet(labels, 4, alpha=0.5, min_partition_size=0, seed=seed)
               for seed in range(num_panels)}
    fig = compare(schemes, labels, kind=kind, ncols=ncols)
    fig.draw_without_rendering()  # constrained layout places the axes when the figure is drawn
    panels = fig.axes[:num_panels]
    assert [ax.get_title() for ax in panels] == list(schemes)
    assert _grid_shape(panels) == shape
    if kind == "heatmap":
        assert len(fig.axes) == num_panels + 1 and len(fig.legends) == 0  # one colour bar for all panels
    else:
        assert len(fig.axes) == num_panels and len(fig.legends) == 1


def test_wide_panels_wrap_one_to_a_row_rather_than_make_a_figure_wider_than_a_screen(tmp_path):
    """Three K=100 partitions (50 bars a panel) were one row 3,870 px wide; now one panel a row."""
    labels = np.repeat(np.arange(10), 100)
    schemes = {name: make(labels, 100, seed=0) for name, make in
               (("IID", iid), ("Dir(0.1)", lambda y, k, seed: dirichlet(y, k, alpha=0.1, min_partition_size=0,
                                                                         seed=seed)),
                ("#C=2", lambda y, k, seed: pathological(y, k, 2, seed=seed)))}
    fig = compare(schemes, labels, path=tmp_path / "wide.png")
    fig.draw_without_rendering()
    assert _grid_shape(fig.axes[:3]) == (3, 1)
    width, height = imread(tmp_path / "wide.png").shape[1::-1]
    assert width <= 2000 and height > width / 2, (width, height)


def test_compare_rejects_a_bad_ncols():
    with pytest.raises(ValueError, match="`ncols` must be >= 1, got 0"):
        compare({"a": iid(4, 2, seed=0)}, [0, 1, 0, 1], ncols=0)


@pytest.mark.parametrize(("percent", "unit"), [(False, "samples"), (True, "% of the partition's samples")])
def test_heatmap_colours_on_a_log_scale_that_the_colour_bar_names(percent, unit):
    p, labels = _skewed([[1000, 1, 0], [5, 50, 500]])
    fig = heatmap(p, labels, percent=percent)
    image = fig.axes[0].get_images()[0]
    values = image.get_array()
    assert isinstance(image.norm, LogNorm)
    assert image.norm.vmin == values[values > 0].min() and image.norm.vmax == values.max()
    assert fig.axes[1].get_ylabel() == f"{unit} (log scale)"
    colours = image.to_rgba(values)
    assert colours[0, 2].tolist() == [1.0, 1.0, 1.0, 1.0]  # no sample: white
    assert len({tuple(colours[0, 1]), tuple(colours[0, 2]), tuple(colours[1, 0])}) == 3  # 1, none and 5 differ
    if percent:  # 1 sample in 1001 is a coloured cell: its text must not read as empty
        assert "<1" in [text.get_text() for text in fig.axes[0].texts]


def test_heatmap_can_colour_linearly():
    p, labels = _skewed([[10, 1, 0]])
    fig = heatmap(p, labels, log=False)
    norm = fig.axes[0].get_images()[0].norm
    assert type(norm) is Normalize and (norm.vmin, norm.vmax) == (0, 10)
    assert fig.axes[1].get_ylabel() == "samples"


@pytest.mark.parametrize("percent", [False, True])
def test_bubbles_keep_the_smallest_count_visible_and_leave_zero_empty(percent):
    p, labels = _skewed([[1000, 1, 0], [0, 2, 3]])
    fig = bubbles(p, labels, percent=percent, figsize=(4, 3))
    scatter = fig.axes[0].collections[0]
    assert len(scatter.get_offsets()) == 4  # the two empty cells get no marker
    diameters = np.sqrt(scatter.get_sizes())  # points
    assert diameters.min() >= 4.0
    assert diameters.max() > diameters.min()


def test_many_partitions_show_a_chosen_range_and_say_which():
    labels = np.repeat(np.arange(5), 100)
    p = iid(labels, 100, seed=0)
    assert stacked_bars(p, labels).axes[0].get_xlabel() == "partitions 0–49 of 100 shown"
    ax = stacked_bars(p, labels, first_partition=50).axes[0]
    assert ax.get_xlabel() == "partitions 50–99 of 100 shown"
    assert sorted({round(bar.get_x() + bar.get_width() / 2) for bar in ax.patches}) == list(range(50, 100))
    ax = heatmap(p, labels, first_partition=90, max_partitions=20).axes[0]
    assert ax.get_ylabel() == "partitions 90–99 of 100 shown"
    assert ax.get_images()[0].get_array().shape == (10, 5)
    assert ax.get_yticks()[0] == 90
    ax = bubbles(p, labels, first_partition=60, max_partitions=5).axes[0]
    assert sorted(set(ax.collections[0].get_offsets()[:, 1])) == [60, 61, 62, 63, 64]
    assert stacked_bars(p, labels, max_partitions=100).axes[0].get_xlabel() == "partition"


@pytest.mark.parametrize(("first", "error", "match"), [
    (100, ValueError, r"`first_partition`=100 is past the last partition of `partition`, which has 100"),
    (-1, ValueError, "`first_partition` must be >= 0, got -1"),
    (1.5, TypeError, "`first_partition` must be an integer"),
])
def test_a_bad_first_partition_is_refused(first, error, match):
    labels = np.repeat(np.arange(5), 100)
    with pytest.raises(error, match=match):
        stacked_bars(iid(labels, 100, seed=0), labels, first_partition=first)


# -- writing figure files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "magic"),
    [("f.png", b"\x89PNG\r\n\x1a\n"), ("f.PNG", b"\x89PNG\r\n\x1a\n"), ("f.pdf", b"%PDF"),
     ("f.svg", (b"<?xml", b"<svg")), ("f.eps", b"%!PS")],
)
def test_figures_are_written_in_the_format_the_extension_names(partition, tmp_path, name, magic):
    path = tmp_path / "out" / name
    stacked_bars(partition, LABELS, path=path, figsize=(3, 2), dpi=30)
    assert path.read_bytes().startswith(magic)
    assert os.listdir(path.parent) == [name]  # no temporary file left behind


@pytest.mark.parametrize(("name", "match"), [
    ("figure.docx", r"`path`='.*figure\.docx' has the extension '\.docx', not a figure format: end it in one of"),
    ("figure", r"`path`='.*figure' has no extension"),
])
def test_an_unknown_or_missing_extension_is_refused_before_anything_is_drawn_or_created(partition, tmp_path, name,
                                                                                         match):
    path = tmp_path / "new" / name
    for call in (lambda: check_figure_path(path), lambda: stacked_bars(partition, LABELS, path=path),
                 lambda: save_figure(Figure(), path, 10)):
        with pytest.raises(ValueError, match=match) as error:
            call()
        assert all(f".{ext}" in str(error.value) for ext in ("png", "pdf", "svg"))
    assert not (tmp_path / "new").exists()


def test_check_figure_path_accepts_a_folder_that_save_figure_will_create(tmp_path):
    path = tmp_path / "a" / "b" / "f.svg"
    assert check_figure_path(str(path)) == path
    assert not (tmp_path / "a").exists()


def test_check_figure_path_refuses_a_folder_or_a_file_in_place_of_a_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ValueError, match=r"`path`=.*notes\.txt/f\.png' cannot be written: '.*notes\.txt' is a file"):
        check_figure_path(tmp_path / "notes.txt" / "f.png")
    (tmp_path / "shown.png").mkdir()
    with pytest.raises(ValueError, match=r"`path`=.*shown\.png' is a folder"):
        check_figure_path(tmp_path / "shown.png")
    with pytest.raises(TypeError, match="`path` must be a str or os.PathLike, got int"):
        check_figure_path(3)


def test_check_figure_path_refuses_a_folder_it_cannot_write(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    if os.geteuid() == 0:  # permissions do not bind root: let the OS answer as it would for a user
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    with pytest.raises(PermissionError, match=r"the folder '.*locked' is not writable"):
        check_figure_path(locked / "sub" / "f.png")
