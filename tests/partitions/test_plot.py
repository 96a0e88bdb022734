import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.image import imread  # noqa: E402

from partitions import Partition, dirichlet, iid, shards  # noqa: E402
from partitions.plot import bubbles, compare, heatmap, stacked_bars  # noqa: E402

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
    assert "first 8 of 20" in fig.axes[0].get_title()


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
