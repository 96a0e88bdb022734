"""A user's own data in two ready formats: ``npz:FILE`` (NumPy arrays) and ``imagefolder:DIR`` (torchvision's layout).

``--dataset npz:FILE`` reads ``x_train``, ``y_train``, ``x_test`` and ``y_test`` from a NumPy
``.npz`` file: images as ``(N, H, W)``, ``(N, H, W, C)`` (C of 1 or 3) or ``(N, C, H, W)``, and
integer labels; an optional ``num_classes`` scalar, else the largest label plus one; and an
optional ``client_train``, one id (integer or string) per training sample, such as a FEMNIST writer,
which ``--partition natural`` turns into one client per id.

The images are uint8 pixels, or floats (float16, float32, float64, both splits floats) taken as
they are, in their own dtype. Each channel is standardised with the mean and standard deviation of
``x_train`` (uint8 pixels scaled to [0, 1] first), unless the file holds ``normalize`` = False (a
0-d boolean, or 0): then uint8 pixels are only scaled to [0, 1] and floats go in unchanged, for
arrays standardised already.

``--dataset imagefolder:DIR`` reads ``DIR/train/<class>/*`` and ``DIR/test/<class>/*`` as
torchvision's ``ImageFolder`` does (classes sorted by folder name); every image must have the
same size, and the test split's classes must be the train split's.

Both give a `fedsim.data.Dataset` that every partitioner, engine and ``fedsim partition`` takes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from partitions.natural import check_ids

from ..checks import SettingError
from ..references import quoted, split_format
from .dataset import Dataset


def load_format(name: str) -> Dataset:
    """Load ``npz:FILE`` or ``imagefolder:DIR``; what is wrong with the files is one error naming ``dataset``."""
    fmt, path = split_format(name)
    path = Path(path).expanduser()
    if not path.exists():
        raise SettingError("{dataset}: no {what:text} {path:text}", dataset=name,
                           what="file" if fmt == "npz" else "folder", path=repr(str(path)))
    try:
        return load_npz(path, name) if fmt == "npz" else load_imagefolder(path, name)
    except (ValueError, TypeError, KeyError, OSError) as error:
        reason = quoted(error) if not isinstance(error, KeyError) else f"it lacks the array {error}"
        raise SettingError("{dataset}: {reason:text}", dataset=name, reason=reason) from None


def load_npz(path: Path, name: str) -> Dataset:
    """Read a `.npz` of ``x_train``, ``y_train``, ``x_test``, ``y_test`` (and ``num_classes``, ``client_train``,
    ``normalize``) into a `Dataset`."""
    with np.load(path, allow_pickle=False) as arrays:
        splits = {split: (as_images(arrays[f"x_{split}"], f"x_{split}"), as_labels(arrays[f"y_{split}"], f"y_{split}"))
                  for split in ("train", "test")}
        given = int(arrays["num_classes"]) if "num_classes" in arrays else None
        client_ids = check_ids(arrays["client_train"], "client_train") if "client_train" in arrays else None
        standardise = as_flag(arrays["normalize"], "normalize") if "normalize" in arrays else True
    (train_images, train_labels), (test_images, test_labels) = splits["train"], splits["test"]
    if (train_images.dtype == torch.uint8) != (test_images.dtype == torch.uint8):
        train_dtype, test_dtype = (str(images.dtype).removeprefix("torch.") for images in (train_images, test_images))
        raise TypeError(f"`x_train` holds {train_dtype} and `x_test` {test_dtype}: both uint8 pixels, or both floats")
    largest = max(int(labels.max()) for labels in (train_labels, test_labels) if labels.numel())
    if client_ids is not None and len(client_ids) != len(train_labels):
        raise ValueError(f"`client_train` has {len(client_ids)} ids for {len(train_labels)} training samples; "
                         "give one per sample")
    # unstandardised: a mean of 0 and a deviation of 1 leave the (scaled) images as they are
    channels = train_images.shape[1]
    mean, std = (None, None) if standardise else ((0.0,) * channels, (1.0,) * channels)
    return Dataset(name, train_images, train_labels, test_images, test_labels,
                   num_classes=given if given is not None else largest + 1, train_client_ids=client_ids,
                   mean=mean, std=std)


def as_images(array: np.ndarray, key: str) -> torch.Tensor:
    """Return uint8 or float images as ``(N, C, H, W)`` from ``(N, H, W)``, ``(N, H, W, C)`` or ``(N, C, H, W)``."""
    if array.dtype != np.uint8 and array.dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"`{key}` must hold uint8 pixels or floats (float16, float32, float64), got {array.dtype}")
    if array.dtype != np.uint8 and not np.isfinite(array).all():
        first = int(np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(axis=1))[0])
        raise ValueError(f"`{key}` holds values that are not finite (nan or inf), the first in sample {first}")
    if array.ndim == 3:
        array = array[:, None]
    elif array.ndim == 4 and array.shape[-1] in (1, 3) and array.shape[1] not in (1, 3):
        array = array.transpose(0, 3, 1, 2)
    elif array.ndim != 4:
        raise ValueError(f"`{key}` must be (N, H, W), (N, H, W, C) or (N, C, H, W), got shape {array.shape}")
    return torch.from_numpy(np.ascontiguousarray(array))


def as_flag(array: np.ndarray, key: str) -> bool:
    """Return a 0-d boolean (or 0 or 1) as a bool."""
    if array.ndim != 0 or not (array.dtype == np.bool_ or (np.issubdtype(array.dtype, np.integer)
                                                            and int(array) in (0, 1))):
        raise TypeError(f"`{key}` must be a 0-d boolean (True or False, or 1 or 0), got {array.dtype} {array!r}")
    return bool(array)


def as_labels(array: np.ndarray, key: str) -> torch.Tensor:
    """Return integer class labels as int64 ``(N,)``."""
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"`{key}` must be integer class labels of shape (N,), got {array.dtype} {array.shape}")
    return torch.from_numpy(array.astype(np.int64))


def load_imagefolder(root: Path, name: str) -> Dataset:
    """Read ``root/train`` and ``root/test`` as torchvision's ``ImageFolder`` into a `Dataset` of uint8 tensors."""
    from torchvision.datasets import ImageFolder
    from torchvision.transforms.functional import pil_to_tensor

    splits, classes = {}, None
    for split in ("train", "test"):
        folder = ImageFolder(str(root / split))
        if classes is not None and folder.classes != classes:
            raise ValueError(f"`test/` has the classes {folder.classes}, `train/` {classes}: they must be the same")
        classes = folder.classes
        images = [pil_to_tensor(folder.loader(path)) for path, _ in folder.samples]
        sizes = sorted({tuple(image.shape) for image in images})
        if len(sizes) > 1:
            raise ValueError(f"images of mixed sizes in {split}/: {sizes[0]} and {sizes[-1]} (channels, height, "
                             "width); resize them to one size")
        splits[split] = torch.stack(images), torch.tensor(folder.targets, dtype=torch.int64)
    return Dataset(name, *splits["train"], *splits["test"], num_classes=len(classes), class_names=tuple(classes))
