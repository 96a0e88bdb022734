"""`partitions.natural`: one partition per id the data carries, as flwr-datasets' NaturalIdPartitioner."""

import numpy as np
import pytest

from partitions import Partition, natural
from partitions.metrics import heterogeneity, summary

WRITERS = np.array([30, 10, 30, 20, 10, 30, 20, 20, 20])
LABELS = np.array([0, 1, 0, 2, 1, 0, 2, 1, 2])


def test_each_id_is_one_partition_in_sorted_order():
    p = natural(WRITERS)
    assert p.params["ids"] == [10, 20, 30] and p.num_partitions == 3 and p.seed is None
    assert [part.tolist() for part in p] == [[1, 4], [3, 6, 7, 8], [0, 2, 5]]
    for writer, part in zip(p.params["ids"], p):  # every sample lands with its own id, none elsewhere
        assert np.array_equal(np.flatnonzero(WRITERS == writer), part)
    assert p.unassigned.size == 0 and p.describe() == "natural (3 ids)"


def test_string_ids_and_the_order_of_samples_do_not_change_the_split():
    names = np.array(["w30", "w10", "w30", "w20", "w10", "w30", "w20", "w20", "w20"])
    assert natural(names) == natural(WRITERS) and natural(names).params["ids"] == ["w10", "w20", "w30"]
    shuffled = np.random.default_rng(0).permutation(len(WRITERS))
    regrouped = natural(WRITERS[shuffled])
    assert [sorted(shuffled[part].tolist()) for part in regrouped] == [part.tolist() for part in natural(WRITERS)]


def test_metrics_save_and_load_take_a_natural_partition(tmp_path):
    p = natural(WRITERS)
    assert heterogeneity(p, LABELS)["num_partitions"] == 3
    assert "natural (3 ids)" in summary({"natural (3 ids)": p}, LABELS)
    loaded = Partition.load(p.save(tmp_path / "natural.json"))
    assert loaded == p and loaded.params == p.params and loaded.describe() == "natural (3 ids)"


def test_a_natural_partition_is_plotted_as_the_others_are(tmp_path):
    pytest.importorskip("matplotlib")
    from partitions.plot import stacked_bars

    figure = stacked_bars(natural(WRITERS), LABELS, path=tmp_path / "natural.png")
    assert len(figure.axes[0].patches) == 3 * 3 and (tmp_path / "natural.png").stat().st_size > 0


@pytest.mark.parametrize("ids, error, message", [
    ([[1, 2], [3, 4]], ValueError, "`ids` must be one-dimensional"),
    ([], ValueError, "`ids` is empty"),
    ([0.5, 1.5], TypeError, "`ids` must hold integers or strings, one per sample, got dtype float64"),
    ([True, False], TypeError, "`ids` must hold integers or strings"),
])
def test_bad_ids_are_refused_naming_them(ids, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[")):
        natural(ids)
