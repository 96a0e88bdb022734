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

from .numerics import EXACT


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


def assert_read_back(data, images, labels, channels=1):
    """Assert ``data`` holds the grey (N, H, W) ``images`` and ``labels`` written, split by split, unchanged and in order.

    Each of its ``channels`` is the grey image, and its normalization is the written train
    images', scaled to [0, 1].
    """
    for split in ("train", "test"):
        got_images, got_labels = getattr(data, f"{split}_images"), getattr(data, f"{split}_labels")
        assert got_images.dtype == torch.uint8 and got_images.shape == (len(images[split]), channels,
                                                                        *images[split].shape[1:])
        assert all(np.array_equal(got_images[:, c].numpy(), images[split]) for c in range(channels)), split
        assert got_labels.dtype == torch.int64 and got_labels.tolist() == list(labels[split]), split
    pixels = images["train"] / 255
    assert data.mean == pytest.approx((pixels.mean(),) * channels, abs=1e-12)
    assert data.std == pytest.approx((pixels.std(),) * channels, abs=1e-12)


def test_an_npz_file_is_a_dataset_every_command_takes(npz_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    written = digits_arrays()
    data = load_dataset("npz:digits.npz")
    assert_read_back(data, {split: written[f"x_{split}"] for split in ("train", "test")},
                     {split: written[f"y_{split}"] for split in ("train", "test")})
    assert (data.num_classes, data.in_channels, data.image_size) == (10, 1, 8)  # the largest label plus one
    config = RunConfig(dataset="npz:digits.npz", model="mlp", num_partitions=3, rounds=1, batch_size=50,
                       dtype="float64")
    assert config.dataset == f"npz:{npz_file}"  # absolute: another process reads the same file
    # the file holds the digits: a run on it is the run on the digits, step for step
    torch.testing.assert_close(run(config).global_state, run(config.replace(dataset="digits")).global_state, **EXACT)
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
    """Write ``count`` grey PNGs of ``size`` (width, height) per class in ``root/split/<class>/``.

    Returns them as one (N, H, W) uint8 array, class by class and file by file: the order
    torchvision's ``ImageFolder`` lists them in (for ``count`` up to 10).
    """
    written = []
    for label in classes:
        folder = root / split / label
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(count):
            # a ramp, shifted for each image: an image read flipped, transposed or under another's label differs
            ramp = np.arange(size[0] * size[1]).reshape(size[::-1]) * 3 + 37 * len(written)
            written.append((ramp % 256).astype(np.uint8))
            Image.fromarray(written[-1]).save(folder / f"{index}.png")
    return np.stack(written)


def test_an_image_folder_is_read_as_torchvision_lays_it_out(tmp_path):
    images = {"train": write_images(tmp_path / "shapes", "train", ["circle", "square"], count=4),
              "test": write_images(tmp_path / "shapes", "test", ["circle", "square"], count=2)}
    data = load_dataset(f"imagefolder:{tmp_path / 'shapes'}")
    # torchvision's loader opens every image as RGB: a grey one comes back as three equal channels
    assert_read_back(data, images, {"train": [0, 0, 0, 0, 1, 1, 1, 1], "test": [0, 0, 1, 1]}, channels=3)
    assert (data.num_classes, data.class_names, data.in_channels, data.image_size) == (2, ("circle", "square"), 3, 8)
    result = run(RunConfig(dataset=f"imagefolder:{tmp_path / 'shapes'}", model="mlp", num_partitions=2, rounds=1,
                           batch_size=2, partition="iid"))
    # the model the run built takes the images' 3 x 8 x 8 values and gives the folder's 2 classes
    assert result.global_state[0].shape[1] == 3 * 8 * 8 and result.global_state[-1].shape == (2,)


def bad_npz(tmp_path, **changes):
    arrays = {**digits_arrays(), **changes}
    np.savez(tmp_path / "bad.npz", **{key: value for key, value in arrays.items() if value is not None})
    return "npz:bad.npz"


@pytest.mark.parametrize("make, message", [
    (lambda tmp: "npz:nowhere.npz", "nowhere.npz': no file"),
    (lambda tmp: bad_npz(tmp, x_test=None), "it lacks the array 'x_test is not a file in the archive'"),
    (lambda tmp: bad_npz(tmp, y_train=np.zeros(1437)), "`y_train` must be integer class labels"),
    (lambda tmp: bad_npz(tmp, x_train=np.zeros((1437, 8, 8), np.int32)),
     "`x_train` must hold uint8 pixels or floats (float16, float32, float64), got int32"),
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
