"""The in-memory dataset every loader returns: images (uint8 pixels or floats), labels and their statistics."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from partitions._checks import check_integer
from partitions.natural import check_ids

#: Augmentation policies `augment` knows, by the name a `Dataset` carries.
AUGMENTATIONS = ("none", "crop-flip")

# Images summed at once by `channel_stats`: bounds the int32 squares to ~50 MB for CIFAR.
_STATS_CHUNK = 4096


@dataclass(frozen=True, eq=False)
class Dataset:
    """Hold a dataset's train and test split in memory as tensors.

    Images are tensors of shape ``(N, C, H, W)`` with square ``H == W``: ``uint8`` pixels (0 to
    255), or floating-point values taken as they are (a researcher's arrays, already scaled or
    standardised); both splits hold the same kind. Labels are ``int64`` class indices of shape
    ``(N,)``, or for a multi-label dataset a multi-hot ``(N, num_classes)`` matrix of floats or
    booleans.

    Parameters
    ----------
    name : str
        The registry name the dataset was loaded under.
    train_images, train_labels, test_images, test_labels : torch.Tensor
        The two splits.
    num_classes : int
        Number of classes (label columns for a multi-label dataset).
    multilabel : bool, default False
        Whether a sample carries a set of labels rather than one.
    mean, std : tuple of float, optional
        Per-channel mean and standard deviation that `fedsim.data.normalize` standardises with, as
        ``torchvision.transforms.Normalize`` takes them: of uint8 pixels scaled to [0, 1], of
        float images in their own units. Computed from ``train_images`` when not given (`channel_stats`);
        ``(0.0,) * C`` and ``(1.0,) * C`` leave the images unstandardised.
    class_names : tuple of str, optional
        A name per class, when the source provides them.
    augmentation : {"none", "crop-flip"}, default "none"
        The training augmentation `augment` applies: ``"crop-flip"`` is the CIFAR recipe
        (random 4-pixel-padded crop and horizontal flip), ``"none"`` leaves images as they are.
    train_client_ids : array_like of int or str, optional
        The client (writer, speaker, device) each training sample came from, where the data comes
        split already, as LEAF's FEMNIST does. ``partition="natural"`` gives each id its own
        client (`partitions.natural`).

    Examples
    --------
    >>> images = torch.zeros(4, 1, 2, 2, dtype=torch.uint8)
    >>> labels = torch.tensor([0, 1, 0, 1])
    >>> data = Dataset("toy", images, labels, images, labels, num_classes=2)
    >>> data.in_channels, data.image_size, data.mean, data.std
    (1, 2, (0.0,), (0.0,))
    """

    name: str
    train_images: torch.Tensor = field(repr=False)
    train_labels: torch.Tensor = field(repr=False)
    test_images: torch.Tensor = field(repr=False)
    test_labels: torch.Tensor = field(repr=False)
    num_classes: int
    multilabel: bool = False
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    class_names: tuple[str, ...] | None = None
    augmentation: str = "none"
    train_client_ids: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        check_integer("num_classes", self.num_classes, minimum=1)
        if self.augmentation not in AUGMENTATIONS:
            raise ValueError(f"`augmentation` must be one of {AUGMENTATIONS}, got {self.augmentation!r}")
        for split in ("train", "test"):
            _check_split(self, split)
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))
            if len(self.class_names) != self.num_classes:
                raise ValueError(
                    f"`class_names` has {len(self.class_names)} names for `num_classes`={self.num_classes}"
                )
        if self.train_client_ids is not None:
            ids = check_ids(self.train_client_ids, "train_client_ids").copy()
            if len(ids) != self.num_train:
                raise ValueError(f"`train_client_ids` has {len(ids)} ids for {self.num_train} training samples; "
                                 "give one per sample")
            object.__setattr__(self, "train_client_ids", ids)
        if self.mean is None or self.std is None:
            mean, std = channel_stats(self.train_images)
            object.__setattr__(self, "mean", mean if self.mean is None else self.mean)
            object.__setattr__(self, "std", std if self.std is None else self.std)
        for stat in ("mean", "std"):
            values = tuple(float(v) for v in getattr(self, stat))
            if len(values) != self.in_channels:
                raise ValueError(f"`{stat}` has {len(values)} values for {self.in_channels} channels")
            object.__setattr__(self, stat, values)

    @property
    def pixels(self) -> bool:
        """Whether the images are uint8 pixels (scaled to [0, 1] before standardising), not float values."""
        return self.train_images.dtype == torch.uint8

    @property
    def in_channels(self) -> int:
        """Number of image channels, ``C``."""
        return self.train_images.shape[1]

    @property
    def image_size(self) -> int:
        """Side of the square images, ``H == W``."""
        return self.train_images.shape[-1]

    @property
    def num_train(self) -> int:
        """Number of training samples."""
        return self.train_images.shape[0]

    @property
    def num_test(self) -> int:
        """Number of test samples."""
        return self.test_images.shape[0]

    def __repr__(self) -> str:
        kind = "multi-label" if self.multilabel else "single-label"
        return (
            f"Dataset({self.name!r}, train={self.num_train}, test={self.num_test}, "
            f"images={self.in_channels}x{self.image_size}x{self.image_size}, "
            f"num_classes={self.num_classes}, {kind}, augmentation={self.augmentation!r})"
        )


def channel_stats(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Return the per-channel mean and (population) standard deviation of images: uint8 pixels scaled to [0, 1],
    float values as they are.

    The sums of uint8 pixels are taken in exact integer arithmetic, chunk by chunk, so that the
    result does not depend on the float accumulation order and the memory stays bounded. Float
    images are summed in float64 in two passes, the mean and then the squared deviations from
    it, so that a mean large against the spread does not cancel the variance away.

    Examples
    --------
    >>> channel_stats(torch.tensor([[[[0, 255]]]], dtype=torch.uint8))
    ((0.5,), (0.5,))
    >>> channel_stats(torch.tensor([[[[1000.0, 1002.0]]]]))
    ((1001.0,), (1.0,))
    """
    check_images(images, "images")
    channels = images.shape[1]
    count = images.numel() // channels
    if count == 0:
        raise ValueError("`images` is empty: no statistics to compute")
    if images.dtype != torch.uint8:
        return _float_stats(images, count)
    total = torch.zeros(channels, dtype=torch.int64)
    total_sq = torch.zeros(channels, dtype=torch.int64)
    for chunk in images.split(_STATS_CHUNK):
        chunk = chunk.to(torch.int32)
        total += chunk.sum(dim=(0, 2, 3), dtype=torch.int64).cpu()
        total_sq += (chunk * chunk).sum(dim=(0, 2, 3), dtype=torch.int64).cpu()
    means, stds = [], []
    for s, sq in zip(total.tolist(), total_sq.tolist()):
        # Python integers are exact: n * sum(x^2) - sum(x)^2 cannot cancel catastrophically.
        means.append(s / count / 255)
        stds.append((count * sq - s * s) ** 0.5 / count / 255)
    return tuple(means), tuple(stds)


def _float_stats(images: torch.Tensor, count: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """`channel_stats` of float images, in float64, chunk by chunk."""
    channels = images.shape[1]
    total = torch.zeros(channels, dtype=torch.float64)
    for chunk in images.split(_STATS_CHUNK):
        total += chunk.to(torch.float64).sum(dim=(0, 2, 3)).cpu()
    mean = total / count
    if not torch.isfinite(mean).all():
        raise ValueError("`images` hold values that are not finite (nan or inf): no statistics to compute; "
                         "give the images finite values, or `mean` and `std` yourself")
    squares = torch.zeros(channels, dtype=torch.float64)
    centre = mean.view(-1, 1, 1).to(images.device)
    for chunk in images.split(_STATS_CHUNK):
        squares += ((chunk.to(torch.float64) - centre) ** 2).sum(dim=(0, 2, 3)).cpu()
    return tuple(mean.tolist()), tuple((squares / count).sqrt().tolist())


def check_images(images, name: str) -> None:
    """Raise `TypeError` unless ``images`` is an (N, C, H, W) tensor of uint8 pixels or floats; ``name`` names it."""
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or not (
            images.dtype == torch.uint8 or images.is_floating_point()):
        got = f"{images.dtype} {tuple(images.shape)}" if isinstance(images, torch.Tensor) else type(images).__name__
        raise TypeError(f"`{name}` must be a uint8 or floating-point (N, C, H, W) tensor, got {got}")


def _check_split(dataset: Dataset, split: str) -> None:
    """Raise if the images or labels of ``split`` do not have the documented types and shapes."""
    images = getattr(dataset, f"{split}_images")
    labels = getattr(dataset, f"{split}_labels")
    check_images(images, f"{split}_images")
    if (images.dtype == torch.uint8) != dataset.pixels:
        raise TypeError(f"`{split}_images` are {images.dtype} but `train_images` are {dataset.train_images.dtype}: "
                        "both splits hold uint8 pixels, or both floats")
    if images.shape[0] == 0:
        raise ValueError(f"`{split}_images` is empty: the {split} split needs at least one sample")
    if images.shape[-1] != images.shape[-2]:
        raise ValueError(f"`{split}_images` must be square, got H x W = {images.shape[-2]} x {images.shape[-1]}")
    if images.shape[1:] != dataset.train_images.shape[1:]:
        raise ValueError(
            f"`{split}_images` are {tuple(images.shape[1:])} but `train_images` are "
            f"{tuple(dataset.train_images.shape[1:])}"
        )
    if not isinstance(labels, torch.Tensor) or labels.shape[0] != images.shape[0]:
        raise ValueError(f"`{split}_labels` must be a tensor with one row per image ({images.shape[0]})")
    if dataset.multilabel:
        if labels.ndim != 2 or labels.shape[1] != dataset.num_classes:
            raise ValueError(
                f"`{split}_labels` of a multi-label dataset must be (N, {dataset.num_classes}), "
                f"got {tuple(labels.shape)}"
            )
        if not (labels.dtype == torch.bool or labels.is_floating_point()):
            raise TypeError(f"`{split}_labels` of a multi-label dataset must be float or bool, got {labels.dtype}")
        return
    if labels.dtype != torch.int64 or labels.ndim != 1:
        raise TypeError(f"`{split}_labels` must be an int64 (N,) tensor, got {labels.dtype} {tuple(labels.shape)}")
    if labels.numel() and not 0 <= int(labels.min()) <= int(labels.max()) < dataset.num_classes:
        raise ValueError(
            f"`{split}_labels` must lie in [0, {dataset.num_classes}), got "
            f"[{int(labels.min())}, {int(labels.max())}]"
        )
