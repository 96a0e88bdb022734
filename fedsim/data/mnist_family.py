"""The idx-format digit and clothing datasets through torchvision: ``mnist``, ``fashion-mnist``, ``emnist``."""

from __future__ import annotations

import string
from pathlib import Path

from .dataset import Dataset
from .embedded import DIGIT_NAMES
from .files import files_error, gunzip_missing
from .load import register_dataset

#: Where Debian's ``dataset-fashion-mnist`` package installs the gzipped Fashion-MNIST files.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")

MNIST_FILES = tuple(
    f"{split}-{kind}-ubyte" for split in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")
)
EMNIST_SPLITS = ("balanced", "byclass", "bymerge", "digits", "letters", "mnist")


def _load_idx(name: str, dataset_class, root: Path, download: bool, files, *, hint: str = "", sources=(), **kwargs):
    """Load both splits of an idx dataset with ``dataset_class``, a torchvision MNIST class.

    torchvision reads the gunzipped files under ``root/<ClassName>/raw``; gzipped copies
    found there or in ``sources`` are unpacked first, so that no network is needed.
    Returns ``(train_images, train_labels, test_images, test_labels, classes)``.
    """
    raw = root / dataset_class.__name__ / "raw"
    gunzip_missing(raw, files, sources)
    try:
        train = dataset_class(root, train=True, download=download, **kwargs)
        test = dataset_class(root, train=False, download=False, **kwargs)
    except (RuntimeError, OSError, ValueError, TypeError, AssertionError) as err:
        # Missing files (RuntimeError), a failed download (OSError) or a malformed idx header.
        required = [raw / file for file in files]
        error = files_error(name, required, download=download, cause=err, hint=hint, gzipped_ok=True)
        raise error from None
    # torchvision's idx reader yields (N, H, W) uint8 and int64 labels already.
    return train.data.unsqueeze(1), train.targets.long(), test.data.unsqueeze(1), test.targets.long(), train.classes


def emnist_files(split: str) -> list[str]:
    """Return the four idx file names of an EMNIST split, as torchvision reads them."""
    return [f"emnist-{split}-{part}-{kind}-ubyte" for part in ("train", "test") for kind in ("images-idx3", "labels-idx1")]


@register_dataset("mnist")
def mnist(*, root: Path, download: bool) -> Dataset:
    """Load MNIST (LeCun et al. 1998): 60,000 / 10,000 grey 28x28 digits, from ``root/MNIST/raw``.

    The four idx files (``train-images-idx3-ubyte`` etc.) may also lie there gzipped.
    """
    from torchvision.datasets import MNIST

    *tensors, _ = _load_idx("mnist", MNIST, root, download, MNIST_FILES)
    return Dataset("mnist", *tensors, num_classes=10, class_names=DIGIT_NAMES)


@register_dataset("fashion-mnist")
def fashion_mnist(*, root: Path, download: bool) -> Dataset:
    """Load Fashion-MNIST (Xiao et al. 2017): 60,000 / 10,000 grey 28x28 clothes.

    Reads ``root/FashionMNIST/raw`` as torchvision does. When the files are missing there,
    the gzipped files of Debian's ``dataset-fashion-mnist`` package (in
    `DEBIAN_FASHION_MNIST`) are unpacked into it, so ``apt-get install
    dataset-fashion-mnist`` is enough to use it offline.
    """
    from torchvision.datasets import FashionMNIST

    hint = (
        f"on Debian, `apt-get install dataset-fashion-mnist` installs them in {DEBIAN_FASHION_MNIST}, "
        "where fedsim finds them"
    )
    *tensors, classes = _load_idx(
        "fashion-mnist", FashionMNIST, root, download, MNIST_FILES, hint=hint, sources=(DEBIAN_FASHION_MNIST,)
    )
    return Dataset("fashion-mnist", *tensors, num_classes=10, class_names=classes)


@register_dataset("emnist")
def emnist(*, root: Path, download: bool, split: str = "balanced") -> Dataset:
    """Load a split of EMNIST (Cohen et al. 2017), grey 28x28 characters, from ``root/EMNIST/raw``.

    The EMNIST files store every image transposed; they are transposed back so that the
    characters stand upright as in MNIST. The ``letters`` split numbers its 26 classes from
    1 in the files; they are shifted to 0..25 here.

    Parameters
    ----------
    split : str, default "balanced"
        One of ``balanced`` (47 classes, 131,600 images), ``byclass`` (62), ``bymerge`` (47),
        ``digits`` (10), ``letters`` (26), ``mnist`` (10).
    """
    if split not in EMNIST_SPLITS:
        raise ValueError(f"`split` must be one of {', '.join(EMNIST_SPLITS)}, got {split!r}")
    from torchvision.datasets import EMNIST

    files = emnist_files(split)
    train_images, train_labels, test_images, test_labels, classes = _load_idx(
        "emnist", EMNIST, root, download, files, split=split
    )
    if split == "letters":
        # torchvision keeps an empty class "N/A" at 0 for the files' 1-based letters.
        train_labels, test_labels, classes = train_labels - 1, test_labels - 1, list(string.ascii_lowercase)
    return Dataset(
        "emnist",
        train_images=train_images.transpose(-1, -2).contiguous(),
        train_labels=train_labels,
        test_images=test_images.transpose(-1, -2).contiguous(),
        test_labels=test_labels,
        num_classes=len(classes),
        class_names=tuple(classes),
    )

