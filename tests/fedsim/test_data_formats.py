"""A user's data as ``npz:FILE`` or ``imagefolder:DIR``: real files written here, read by every command."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

import partitions
from fedsim.cli import main
from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from fedsim.engines.inprocess import run


def digits_arrays():
    """The embedded digits as NumPy arrays: (N, H, W) uint8 images and int labels."""
    data = load_dataset("digits")
    return {"x_train": data.train_images[:, 0].numpy(), "y_train": data.train_labels.numpy(),
            "x_test": data.test_images[:, 0].numpy(), "y_test": data.test_labels.numpy()}


@pytest.fixture
def npz_file(tmp_path):
    path = tmp_path / "digits.npz"
    np.savez(path, **digits_arrays())
    return path


def test_an_npz_file_is_a_dataset_every_command_takes(npz_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = load_dataset("npz:digits.npz")
    digits = load_dataset("digits")
    assert torch.equal(data.train_images, digits.train_images) and torch.equal(data.test_labels, digits.test_labels)
    assert (data.num_classes, data.in_channels, data.image_size) == (10, 1, 8)
    config = RunConfig(dataset="npz:digits.npz", model="mlp", num_partitions=3, rounds=1, batch_size=50)
    assert config.dataset == f"npz:{npz_file}"  # absolute: another process reads the same file
    assert run(config).rows[-1]["test_accuracy"] > 0
    main(["partition", "--dataset", "npz:digits.npz", "--scheme", "dirichlet", "--alpha", "0.5",
          "--num-partitions", "4", "--out", str(tmp_path / "p.json")])
    assert "digits.npz" in capsys.readouterr().out and (tmp_path / "p.json").exists()


def test_channels_last_images_and_a_declared_class_count_are_read(tmp_path):
    arrays = digits_arrays()
    arrays = {**arrays, "x_train": np.repeat(arrays["x_train"][..., None], 3, axis=-1),
              "x_test": np.repeat(arrays["x_test"][..., None], 3, axis=-1), "num_classes": np.array(12)}
    np.savez(tmp_path / "rgb.npz", **arrays)
    data = load_dataset(f"npz:{tmp_path / 'rgb.npz'}")
    assert (data.in_channels, data.image_size, data.num_classes) == (3, 8, 12)


def test_an_npz_files_client_ids_give_the_natural_partition_every_command_takes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    arrays = digits_arrays()
    writers = np.random.default_rng(0).choice(["ann", "bob", "cy", "dee", "eve"], len(arrays["y_train"]))
    np.savez(tmp_path / "writers.npz", **arrays, client_train=writers)
    expected = partitions.natural(writers)
    main(["partition", "--dataset", "npz:writers.npz", "--partition", "natural", "--out", "p.json"])
    assert "natural (5 ids)  5" in capsys.readouterr().out
    assert partitions.Partition.load("p.json") == expected
    main(["run", "--dataset", "npz:writers.npz", "--partition", "natural", "--model", "mlp", "--rounds", "1",
          "--batch-size", "50", "--out", "run"])  # --num-partitions is the number of writers
    capsys.readouterr()
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["num_partitions"] == 5 and partitions.Partition.load(tmp_path / "run" / "partition.json") == expected
    with pytest.raises(ValueError, match="makes 5 partitions, one per client id of the dataset, but `num_partitions` "
                                         "is 3; set `num_partitions` to 5"):
        run(RunConfig(dataset="npz:writers.npz", partition="natural", num_partitions=3, rounds=1))
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "digits", "--partition", "natural", "--rounds", "1", "--out", "none"])
    assert capsys.readouterr().err.strip() == (
        "fedsim run: error: `--partition`='natural' needs the client each training sample came from, and "
        "`--dataset`='digits' has none: give the npz file a `client_train` array (one id per training sample), or "
        "return a `Dataset` with `train_client_ids`")


def write_images(root, split, classes, size=(8, 8), count=3):
    for label in classes:
        folder = root / split / label
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(count):
            Image.fromarray(np.full(size[::-1], 40 * index + 20 * len(label), dtype=np.uint8), mode="L").save(
                folder / f"{index}.png")


def test_an_image_folder_is_read_as_torchvision_lays_it_out(tmp_path):
    write_images(tmp_path / "shapes", "train", ["circle", "square"], count=4)
    write_images(tmp_path / "shapes", "test", ["circle", "square"], count=2)
    data = load_dataset(f"imagefolder:{tmp_path / 'shapes'}")
    assert (data.num_train, data.num_test, data.num_classes, data.class_names) == (8, 4, 2, ("circle", "square"))
    assert data.train_labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and data.train_images.dtype == torch.uint8
    result = run(RunConfig(dataset=f"imagefolder:{tmp_path / 'shapes'}", model="mlp", num_partitions=2, rounds=1,
                           batch_size=2, partition="iid"))
    assert len(result.rows) == 1


def bad_npz(tmp_path, **changes):
    arrays = {**digits_arrays(), **changes}
    np.savez(tmp_path / "bad.npz", **{key: value for key, value in arrays.items() if value is not None})
    return "npz:bad.npz"


@pytest.mark.parametrize("make, message", [
    (lambda tmp: "npz:nowhere.npz", "nowhere.npz': no file"),
    (lambda tmp: bad_npz(tmp, x_test=None), "it lacks the array 'x_test is not a file in the archive'"),
    (lambda tmp: bad_npz(tmp, y_train=np.zeros(1437)), "`y_train` must be integer class labels"),
    (lambda tmp: bad_npz(tmp, x_train=np.zeros((1437, 8, 8))), "`x_train` must hold uint8 pixels, got float64"),
    (lambda tmp: bad_npz(tmp, x_test=np.zeros((0, 8, 8), np.uint8), y_test=np.zeros(0, np.int64)),
     "`test_images` is empty"),
    (lambda tmp: bad_npz(tmp, num_classes=np.array(3)), "`train_labels` must lie in [0, 3)"),
    (lambda tmp: bad_npz(tmp, client_train=np.arange(5)), "`client_train` has 5 ids for 1438 training samples"),
    (lambda tmp: bad_npz(tmp, client_train=np.zeros(1437)), "`client_train` must hold integers or strings"),
    (lambda tmp: (write_images(tmp / "f", "train", ["a", "b"]), write_images(tmp / "f", "test", ["a", "c"]),
                  "imagefolder:f")[-1], "`test/` has the classes ['a', 'c'], `train/` ['a', 'b']"),
    (lambda tmp: (write_images(tmp / "m", "train", ["a"]), write_images(tmp / "m", "train", ["b"], size=(9, 9)),
                  write_images(tmp / "m", "test", ["a", "b"]), "imagefolder:m")[-1], "images of mixed sizes in train/"),
    (lambda tmp: (write_images(tmp / "e", "train", ["a"]), (tmp / "e" / "test").mkdir(), "imagefolder:e")[-1],
     "Couldn't find any class folder in"),
])
def test_bad_data_files_are_one_line_naming_the_flag(tmp_path, monkeypatch, capsys, make, message):
    monkeypatch.chdir(tmp_path)
    dataset = make(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--dataset", dataset, "--model", "mlp", "--num-partitions", "2", "--rounds", "1",
              "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"fedsim run: error: `--dataset`='{dataset.split(':')[0]}:{tmp_path}") and message in err
