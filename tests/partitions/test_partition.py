import json
import subprocess
import sys

import numpy as np
import pytest

import partitions
from partitions import Partition


@pytest.fixture
def small():
    return Partition([[0, 3], [1, 2, 4], []], num_samples=6, scheme="manual", params={"k": 1}, seed=3)


def test_views(small):
    labels = np.array([0, 1, 1, 0, 2, 2])
    assert small.sizes.tolist() == [2, 3, 0]
    assert small.counts(labels).tolist() == [[2, 0, 0], [0, 2, 1], [0, 0, 0]]
    assert small.counts(labels, num_classes=4).shape == (3, 4)
    distribution = small.label_distribution(labels)
    assert distribution[1].tolist() == pytest.approx([0, 2 / 3, 1 / 3])
    assert np.isnan(distribution[2]).all()
    assert small.unassigned.tolist() == [5]
    assert small.assignment().tolist() == [0, 1, 1, 0, 1, -1]
    assert small.shard(1).tolist() == [1, 2, 4]


def test_counts_of_a_multi_hot_matrix(small):
    matrix = np.array([[1, 0], [1, 1], [0, 1], [1, 1], [0, 0], [1, 0]])
    assert small.counts(matrix).tolist() == [[2, 1], [1, 2], [0, 0]]


def test_shard_rejects_a_rank_out_of_range(small):
    with pytest.raises(ValueError, match=r"`rank` must be between 0 and 2, got 3"):
        small.shard(3)


def test_overlapping_or_out_of_range_indices_are_rejected():
    with pytest.raises(ValueError, match="overlap"):
        Partition([[0, 1], [1]], num_samples=3, scheme="manual")
    with pytest.raises(ValueError, match="out of range"):
        Partition([[0, 5]], num_samples=3, scheme="manual")


def test_save_load_round_trip(tmp_path, mnist_like_labels):
    partition = partitions.dirichlet(mnist_like_labels, 20, 0.3, seed=11)
    path = partition.save(tmp_path / "nested" / "p.json")
    loaded = Partition.load(path)
    assert loaded == partition
    assert (loaded.scheme, loaded.params, loaded.seed) == (partition.scheme, partition.params, partition.seed)
    assert list(tmp_path.joinpath("nested").iterdir()) == [path]  # no temporary file left behind


def _write(tmp_path, content):
    path = tmp_path / "p.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "invalid JSON"),
        ({"some": "thing"}, "not a fedsim partition"),
        ({"format": "fedsim.partition", "version": 99}, "format version 99"),
        ({"format": "fedsim.partition", "version": 1, "indices": []}, "missing"),
        (
            {"format": "fedsim.partition", "version": 1, "scheme": "x", "params": {}, "seed": 0, "num_samples": 4,
             "indices": [[0, 1], [1, 2]]},
            "overlap",
        ),
        (
            {"format": "fedsim.partition", "version": 1, "scheme": "x", "params": {}, "seed": 0, "num_samples": 4,
             "indices": [[0, 9]]},
            "out of range",
        ),
        (
            {"format": "fedsim.partition", "version": 1, "scheme": "x", "params": {}, "seed": 0, "num_samples": 4,
             "indices": [["a"]]},
            "integers",
        ),
    ],
)
def test_corrupt_or_foreign_file_gets_a_clear_error(tmp_path, content, match):
    with pytest.raises(ValueError, match=match):
        Partition.load(_write(tmp_path, content))


def test_binary_file_gets_a_clear_error(tmp_path):
    path = tmp_path / "p.json"
    path.write_bytes(b"\x89PNG\xff\xfe")
    with pytest.raises(ValueError, match="not a fedsim partition"):
        Partition.load(path)


def test_imports_without_torch():
    """`partitions` needs numpy and scipy only: it imports and runs with torch blocked."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import partitions, partitions.metrics\n"
        "p = partitions.dirichlet([0, 1] * 50, 2, 1.0, seed=0)\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(p.sizes.sum())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "100"


def test_counts_rejects_labels_outside_num_classes(small):
    with pytest.raises(ValueError, match="`num_classes`=2"):
        small.counts([0, 2, 0, 0, 1, 1], num_classes=2)
    with pytest.raises(ValueError, match="`labels` must be >= 0"):
        small.counts([0, -1, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="`labels` has 2 entries"):
        small.counts([0, 1])


def test_saved_file_is_readable_by_others(tmp_path):
    import os
    import stat

    path = Partition([[0]], num_samples=1, scheme="manual").save(tmp_path / "p.json")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
