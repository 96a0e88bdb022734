"""``multi-mnist``: a multi-label task of 2x2 grids of digits, built from a single-label dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fedsim.checks import SettingError, check_integer

from .dataset import Dataset
from .load import list_datasets, load_dataset, register_dataset
from .transforms import resize

# Tiles per side of the grid: four digits per image.
GRID = 2


@register_dataset("multi-mnist")
def multi_mnist(
    *,
    root: Path,
    download: bool,
    seed: int,
    base: str = "mnist-5k",
    num_train: int | None = None,
    num_test: int | None = None,
) -> Dataset:
    """Build images of 2x2 digits whose labels are the set of digits present.

    Each image holds four digits drawn uniformly with replacement from a split of ``base``,
    each shrunk to half the side (14x14 for 28x28 digits) so that the grid has the base
    image size. The label is the multi-hot vector (float32, one column per base class) of
    the digits present, so an image carries one to four labels. Train images come from the
    base train split only and test images from the base test split only. The draw depends
    on ``seed`` alone, with separate streams for train and test.

    Parameters
    ----------
    base : str, default "mnist-5k"
        Single-label dataset to draw the digits from, with an even image side.
    num_train, num_test : int, optional
        Number of images to build; by default as many as the base split holds.
    """
    # named as the dataset option it is: the registry's error would name the setting `dataset`
    if base not in list_datasets():
        raise SettingError("{dataset_options:name} base={base:text} of 'multi-mnist' names no dataset; known: "
                           "{known:text}", base=repr(base),
                           known=", ".join(name for name in list_datasets() if name != "multi-mnist"))
    source = load_dataset(base, root=root, download=download, seed=seed)
    if source.multilabel:
        raise SettingError("{dataset_options:name} base must be a single-label dataset, got the multi-label "
                           "{base:text}", base=repr(base))
    if source.image_size % GRID:
        raise SettingError("{dataset_options:name} base={base:text} has images of side {side:text}; an even side is "
                           "needed", base=repr(base), side=source.image_size)
    train_rng, test_rng = (np.random.default_rng([seed, stream]) for stream in range(2))
    train_images, train_labels = _compose(source, "train", _count(num_train, "num_train", source.num_train), train_rng)
    test_images, test_labels = _compose(source, "test", _count(num_test, "num_test", source.num_test), test_rng)
    return Dataset(
        "multi-mnist",
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        num_classes=source.num_classes,
        multilabel=True,
        class_names=source.class_names,
    )


def _count(value, parameter: str, default: int) -> int:
    """Return ``value`` checked to be a positive integer, or ``default`` when it is None."""
    if value is None:
        return default
    return check_integer(parameter, value, minimum=1)


def _compose(source: Dataset, split: str, count: int, rng: np.random.Generator):
    """Return ``count`` grid images from ``split`` of ``source`` and their multi-hot labels."""
    images = getattr(source, f"{split}_images")
    labels = getattr(source, f"{split}_labels")
    side = source.image_size // GRID
    # Shrink every base digit once rather than every placed copy.
    tiles = resize(images, side)
    picks = torch.from_numpy(rng.integers(0, images.shape[0], size=(count, GRID * GRID)))
    channels = source.in_channels
    # (count, rows, cols, C, h, w) -> (count, C, rows, h, cols, w): tiles side by side.
    grid = tiles[picks].view(count, GRID, GRID, channels, side, side).permute(0, 3, 1, 4, 2, 5)
    grid = grid.reshape(count, channels, GRID * side, GRID * side)
    multi_hot = torch.zeros(count, source.num_classes, dtype=torch.float32)
    multi_hot.scatter_(1, labels[picks], 1.0)
    return grid, multi_hot
