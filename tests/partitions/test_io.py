"""Every file is written one way: atomically, durably, with the mode a plain open() would give it."""

import os
import stat

import pytest

from partitions import Partition
from partitions._io import atomic_open, remove_temporaries, write_atomic
from partitions.plot import save_figure


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_mode_open_would_give(tmp_path, umask):
    write_atomic(tmp_path / "new.txt", "text")
    with open(tmp_path / "plain.txt", "w") as stream:
        stream.write("text")
    assert mode(tmp_path / "new.txt") == mode(tmp_path / "plain.txt") == 0o666 & ~umask


def test_partitions_and_figures_are_written_with_the_same_policy(tmp_path, umask):
    from matplotlib.figure import Figure

    path = Partition([[0]], num_samples=1, scheme="manual").save(tmp_path / "deep" / "p.json")
    figure = Figure()
    figure.subplots().plot([0, 1])
    save_figure(figure, tmp_path / "plots" / "f.png", dpi=20)
    assert mode(path) == mode(tmp_path / "plots" / "f.png") == 0o666 & ~umask
    assert (tmp_path / "plots" / "f.png").read_bytes().startswith(b"\x89PNG")


def test_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "private.json"
    path.write_text("old")
    path.chmod(0o600)
    write_atomic(path, b"new")
    assert path.read_text() == "new" and mode(path) == 0o600


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_open(path) as stream:
            stream.write(b"half of the new")
            raise RuntimeError("disk on fire")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt"]


def test_the_temporaries_a_killed_writer_left_are_removed_and_nothing_else(tmp_path):
    left = [tmp_path / ".checkpoint.pt.0123456789ab.tmp", tmp_path / ".metrics.csv.fedcba987654.tmp"]
    kept = ["checkpoint.pt", ".notes.tmp", "run.0123456789ab.tmp", ".a.0123456789AB.tmp", ".b.0123456789a.tmp"]
    for path in [*left, *(tmp_path / name for name in kept)]:
        path.write_text("x")
    (tmp_path / ".folder.0123456789ab.tmp").mkdir()  # not a file a write left
    assert sorted(remove_temporaries(tmp_path)) == sorted(left)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*kept, ".folder.0123456789ab.tmp"])
    assert remove_temporaries(tmp_path / "missing") == []
