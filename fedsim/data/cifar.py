"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009) through torchvision: ``cifar10``, ``cifar100``."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from .dataset import Dataset
from .files import files_error
from .load import register_dataset

LABEL_GRANULARITIES = ("fine", "coarse")


def _without_checksums(dataset_class):
    """Return a subclass of a torchvision CIFAR class that checks its files exist, not their md5.

    torchvision compares each CIFAR file with the md5 of the official release, which is the
    right default but rejects any other file written in the same format (a re-packed copy, a
    subset, the tiny files of a test). Setting a checksum to None is torchvision's own way
    of saying "only check the file is there" (``check_integrity(path, md5=None)``); the
    files are then read by torchvision's unmodified code, and the download, if asked for,
    still checks the archive's md5.
    """
    return type(
        f"Unchecked{dataset_class.__name__}",
        (dataset_class,),
        {
            "train_list": [[file, None] for file, _ in dataset_class.train_list],
            "test_list": [[file, None] for file, _ in dataset_class.test_list],
            "meta": {**dataset_class.meta, "md5": None},
        },
    )


def _load_cifar(name: str, dataset_class, root: Path, download: bool, verify_checksums: bool):
    """Load both splits with a torchvision CIFAR class; return them and the folder they came from."""
    if not isinstance(verify_checksums, bool):
        raise TypeError(f"`verify_checksums` must be a bool, got {verify_checksums!r}")
    folder = root / dataset_class.base_folder
    loader = dataset_class if verify_checksums else _without_checksums(dataset_class)
    try:
        train = loader(root, train=True, download=download)
        test = loader(root, train=False, download=False)
    except (RuntimeError, OSError) as err:
        files = [entry[0] for entry in dataset_class.train_list + dataset_class.test_list]
        required = [folder / file for file in (*files, dataset_class.meta["filename"])]
        if verify_checksums and all(path.is_file() for path in required):
            raise RuntimeError(
                f"dataset {name!r}: the files in {folder} differ from the official {dataset_class.__name__} "
                "release (torchvision checks their md5): delete them and pass download=True to fetch them "
                "again, or pass verify_checksums=False to load files you wrote in the same format"
            ) from None
        raise files_error(name, required, download=download, cause=err) from None
    tensors = []
    for split in (train, test):
        # torchvision keeps CIFAR as (N, H, W, C) numpy; the models want channels first.
        tensors += [torch.from_numpy(split.data).permute(0, 3, 1, 2).contiguous(), torch.tensor(split.targets)]
    return tensors, tuple(train.classes), folder


@register_dataset("cifar10")
def cifar10(*, root: Path, download: bool, verify_checksums: bool = True) -> Dataset:
    """Load CIFAR-10: 50,000 / 10,000 colour 32x32 images of 10 classes, from ``root/cifar-10-batches-py``.

    Parameters
    ----------
    verify_checksums : bool, default True
        Check the files against the md5 of the official release, as torchvision does. Pass
        False to load other files written in the CIFAR pickle format.
    """
    from torchvision.datasets import CIFAR10

    tensors, classes, _ = _load_cifar("cifar10", CIFAR10, root, download, verify_checksums)
    return Dataset("cifar10", *tensors, num_classes=10, class_names=classes, augmentation="crop-flip")


@register_dataset("cifar100")
def cifar100(
    *, root: Path, download: bool, label_granularity: str = "fine", verify_checksums: bool = True
) -> Dataset:
    """Load CIFAR-100: 50,000 / 10,000 colour 32x32 images, from ``root/cifar-100-python``.

    Parameters
    ----------
    label_granularity : {"fine", "coarse"}, default "fine"
        ``"fine"``: the 100 classes; ``"coarse"``: the 20 superclasses, read from the
        ``coarse_labels`` of the CIFAR-100 pickles (torchvision keeps only the fine ones).
    verify_checksums : bool, default True
        As for `cifar10`.
    """
    if label_granularity not in LABEL_GRANULARITIES:
        raise ValueError(f"`label_granularity` must be 'fine' or 'coarse', got {label_granularity!r}")
    from torchvision.datasets import CIFAR100

    tensors, classes, folder = _load_cifar("cifar100", CIFAR100, root, download, verify_checksums)
    if label_granularity == "coarse":
        tensors[1] = _read_coarse_labels(folder, [file for file, _ in CIFAR100.train_list])
        tensors[3] = _read_coarse_labels(folder, [file for file, _ in CIFAR100.test_list])
        with open(folder / CIFAR100.meta["filename"], "rb") as meta:
            classes = tuple(pickle.load(meta, encoding="latin1")["coarse_label_names"])
    return Dataset("cifar100", *tensors, num_classes=len(classes), class_names=classes, augmentation="crop-flip")


def _read_coarse_labels(folder: Path, files: list[str]) -> torch.Tensor:
    """Return the superclass labels stored beside the images in CIFAR-100 pickles."""
    labels = []
    for file in files:
        with open(folder / file, "rb") as handle:
            # latin1, as torchvision reads them: the official pickles were written by Python 2.
            labels += pickle.load(handle, encoding="latin1")["coarse_labels"]
    return torch.tensor(labels, dtype=torch.int64)
