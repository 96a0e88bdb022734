"""Tiny dataset files in the real on-disk formats, for loading through the real loaders offline."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

# idx magic numbers: 0x0000 0x08 (unsigned byte) then the number of dimensions.
IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049


def write_idx(path: Path, array: np.ndarray, *, gz: bool = False) -> Path:
    """Write a uint8 array of 1 or 3 dimensions as an idx file (LeCun's MNIST format)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    magic = {1: LABELS_MAGIC, 3: IMAGES_MAGIC}[array.ndim]
    header = np.array([magic, *array.shape], dtype=">i4").tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if gz else open)(path, "wb") as handle:
        handle.write(header + array.tobytes())
    return path


def random_digits(rng: np.random.Generator, count: int, num_classes: int = 10, side: int = 28):
    """Return ``count`` random uint8 images and labels covering every class."""
    images = rng.integers(0, 256, size=(count, side, side), dtype=np.uint8)
    labels = np.arange(count) % num_classes
    return images, rng.permutation(labels).astype(np.uint8)


def write_mnist_like(raw: Path, rng, *, gz: bool, prefix: str = "", parts=("train", "t10k"), counts=(30, 20)):
    """Write the four idx files of an MNIST-like dataset into ``raw``; return the arrays written."""
    written = {}
    for part, count in zip(parts, counts):
        images, labels = random_digits(rng, count)
        write_idx(raw / f"{prefix}{part}-images-idx3-ubyte", images, gz=gz)
        write_idx(raw / f"{prefix}{part}-labels-idx1-ubyte", labels, gz=gz)
        written[part] = images, labels
    return written


def _dump(path: Path, content: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        # Protocol 2, as the official files (written by Python 2's cPickle) use.
        pickle.dump(content, handle, protocol=2)


def _batch(rng, count: int) -> np.ndarray:
    """Rows of 3072 bytes: 1024 red, then 1024 green, then 1024 blue values, row-major."""
    return rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)


def write_cifar10(root: Path, rng, per_batch: int = 4, test_count: int = 6):
    """Write ``cifar-10-batches-py`` as the official archive unpacks it; return (train, test) data."""
    folder = root / "cifar-10-batches-py"
    train = []
    for index in range(1, 6):
        data = _batch(rng, per_batch)
        labels = rng.integers(0, 10, per_batch).tolist()
        files = [f"img_{index}_{i}.png" for i in range(per_batch)]
        entry = {"batch_label": f"training batch {index} of 5", "labels": labels, "data": data, "filenames": files}
        _dump(folder / f"data_batch_{index}", entry)
        train.append((data, labels))
    test_data, test_labels = _batch(rng, test_count), rng.integers(0, 10, test_count).tolist()
    files = [f"test_{i}.png" for i in range(test_count)]
    entry = {"batch_label": "testing batch 1 of 1", "labels": test_labels, "data": test_data, "filenames": files}
    _dump(folder / "test_batch", entry)
    label_names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    _dump(folder / "batches.meta", {"num_cases_per_batch": per_batch, "label_names": label_names, "num_vis": 3072})
    train_data = np.concatenate([data for data, _ in train])
    train_labels = [label for _, labels in train for label in labels]
    return (train_data, train_labels), (test_data, test_labels), label_names


def write_cifar100(root: Path, rng, train_count: int = 40, test_count: int = 10):
    """Write ``cifar-100-python`` (train, test, meta with fine and coarse names); return what it holds."""
    folder = root / "cifar-100-python"
    fine_names = [f"fine_{i:02d}" for i in range(100)]
    coarse_names = [f"coarse_{i:02d}" for i in range(20)]
    # Every fine class belongs to one superclass, as in the real data.
    superclass = rng.permutation(np.repeat(np.arange(20), 5))
    content = {}
    for part, count in (("train", train_count), ("test", test_count)):
        fine = rng.integers(0, 100, count)
        entry = {
            "filenames": [f"{part}_{i}.png" for i in range(count)],
            "batch_label": f"{part} batch",
            "fine_labels": fine.tolist(),
            "coarse_labels": superclass[fine].tolist(),
            "data": _batch(rng, count),
        }
        _dump(folder / part, entry)
        content[part] = entry
    _dump(folder / "meta", {"fine_label_names": fine_names, "coarse_label_names": coarse_names})
    return content, fine_names, coarse_names
