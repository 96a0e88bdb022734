"""`fedsim datasets` says which datasets are embedded, which are on disk, and where it looks."""

import gzip

import pytest

from fedsim.data.mnist_family import MNIST_FILES
from fedsim.data.where import dataset_table, locate_dataset


def test_embedded_datasets_need_no_files(tmp_path):
    assert locate_dataset("mnist-5k", tmp_path).status == "embedded"
    assert locate_dataset("digits", tmp_path).status == "embedded"


@pytest.mark.parametrize("gzipped", [False, True])
def test_idx_files_under_the_root_are_found(tmp_path, gzipped):
    assert locate_dataset("mnist", tmp_path).status == "missing"
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in MNIST_FILES:
        if gzipped:
            with gzip.open(raw / f"{name}.gz", "wb") as stream:
                stream.write(b"\0")
        else:
            (raw / name).write_bytes(b"\0")
    location = locate_dataset("mnist", tmp_path)
    assert (location.status, location.where) == ("on disk", str(raw))


def test_a_missing_dataset_says_where_it_was_looked_for_and_the_table_names_the_root(tmp_path):
    location = locate_dataset("cifar10", tmp_path)
    assert location.status == "missing" and str(tmp_path / "cifar-10-batches-py") in location.where
    assert "--download" in location.where
    table = dataset_table(tmp_path)
    assert f"data root: {tmp_path}" in table and "mnist-5k" in table


def test_an_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown `dataset`='nope'; known: .*mnist-5k"):
        locate_dataset("nope")
