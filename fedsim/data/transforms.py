"""Batch transforms on image tensors: normalisation, training augmentation, feature noise, resizing."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from partitions._checks import check_integer

from .dataset import Dataset

# Zero padding of the random crop in the CIFAR recipe (He et al., "Deep Residual Learning for
# Image Recognition", CVPR 2016): 4 pixels on each side of a 32x32 image.
CROP_PADDING = 4


def normalize(images: torch.Tensor, dataset: Dataset, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standardise each channel of a batch with the dataset's statistics; uint8 pixels are scaled to [0, 1] first.

    For uint8 pixels, the same arithmetic as ``ToTensor`` followed by ``Normalize(dataset.mean,
    dataset.std)`` in torchvision, on a whole batch at once; float images (`Dataset`) are
    standardised as they are, ``(x - mean) / std``.

    Parameters
    ----------
    images : torch.Tensor
        Images of shape ``(N, C, H, W)`` (or one ``(C, H, W)`` image), on any device, of the
        dataset's kind: uint8 pixels or floats.
    dataset : Dataset
        Supplies ``mean`` and ``std``.
    dtype : torch.dtype, default torch.float32
        Floating-point type of the result.

    Examples
    --------
    >>> from fedsim.data import load_dataset
    >>> data = load_dataset("mnist-5k")
    >>> x = normalize(data.train_images, data)
    >>> round(x.mean().item(), 4), round(x.std().item(), 2)
    (0.0, 1.0)
    """
    if (images.dtype != torch.uint8) if dataset.pixels else not images.is_floating_point():
        kind = "uint8" if dataset.pixels else "floating point"
        raise TypeError(f"`images` must be {kind}, as `Dataset` stores them, got {images.dtype}")
    shape = (-1, 1, 1)
    mean = torch.tensor(dataset.mean, dtype=dtype, device=images.device).view(shape)
    std = torch.tensor(dataset.std, dtype=dtype, device=images.device).view(shape)
    scaled = images.to(dtype) / 255 if dataset.pixels else images.to(dtype)
    return (scaled - mean) / std


def augment(images: torch.Tensor, dataset: Dataset, generator: torch.Generator) -> torch.Tensor:
    """Apply the dataset's training augmentation to a batch, deterministically given ``generator``.

    For ``dataset.augmentation == "crop-flip"`` (CIFAR) every image is zero-padded by
    `CROP_PADDING` pixels, cropped back to its size at a random offset and flipped
    horizontally with probability 1/2, as torchvision's ``RandomCrop(32, padding=4)`` and
    ``RandomHorizontalFlip()``, but drawn for the whole batch from ``generator``. Apply it to
    the uint8 images before `normalize`, so the padding is black as in torchvision (float
    images are padded with zeros in their own units). For
    ``"none"`` (the digit datasets, where a flip changes the class) the images come back as
    they are.

    Parameters
    ----------
    images : torch.Tensor
        Images of shape ``(N, C, H, W)`` of any dtype, on any device.
    dataset : Dataset
        Supplies the ``augmentation`` policy.
    generator : torch.Generator
        Source of the random offsets and flips; the draws happen on its device.

    Examples
    --------
    >>> batch = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    >>> labels = torch.zeros(8, dtype=torch.int64)
    >>> data = Dataset("toy", batch, labels, batch, labels, num_classes=1, augmentation="crop-flip")
    >>> a = augment(batch, data, torch.Generator().manual_seed(0))
    >>> b = augment(batch, data, torch.Generator().manual_seed(0))
    >>> a.shape == batch.shape, torch.equal(a, b)
    (True, True)
    """
    if dataset.augmentation == "none":
        return images
    if dataset.augmentation != "crop-flip":
        raise AssertionError(f"no augmentation {dataset.augmentation!r}")
    if images.ndim != 4:
        raise ValueError(f"`images` must be a (N, C, H, W) batch, got shape {tuple(images.shape)}")
    n, channels, height, width = images.shape
    pad = CROP_PADDING
    offsets = torch.randint(0, 2 * pad + 1, (2, n), generator=generator, device=generator.device)
    flips = torch.rand(n, generator=generator, device=generator.device) < 0.5
    offsets, flips = offsets.to(images.device), flips.to(images.device)
    rows = offsets[0, :, None] + torch.arange(height, device=images.device)
    cols = offsets[1, :, None] + torch.arange(width, device=images.device)
    # Reading the crop's columns right to left is the horizontal flip: one gather does both.
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    padded = F.pad(images, (pad, pad, pad, pad))
    # Two gathers (rows, then columns) beat one 4-D advanced index by ~2x on CPU.
    crops = padded.gather(2, rows[:, None, :, None].expand(n, channels, height, width + 2 * pad))
    return crops.gather(3, cols[:, None, None, :].expand(n, channels, height, width))


def add_feature_noise(images: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """Return ``images`` plus Gaussian noise of standard deviation ``sigma``.

    The feature-noise skew of NIID-Bench (Li et al., "Federated Learning on Non-IID Data
    Silos: An Experimental Study", ICDE 2022) adds this noise to the normalised inputs of
    client ``i`` with the level ``partitions.feature_noise_levels`` gives it. NIID-Bench
    draws fresh noise each time a sample is read; drawing it per batch from ``generator``
    does the same, reproducibly.

    Parameters
    ----------
    images : torch.Tensor
        Floating-point images (usually the output of `normalize`).
    sigma : float
        Standard deviation of the noise, >= 0; 0 returns ``images`` unchanged.
    generator : torch.Generator
        Source of the noise; the draws happen on its device.

    Examples
    --------
    >>> x = torch.zeros(100_000)
    >>> round(add_feature_noise(x, 0.5, torch.Generator().manual_seed(0)).std().item(), 2)
    0.5
    """
    if not images.is_floating_point():
        raise TypeError(f"`images` must be floating point (normalise them first), got {images.dtype}")
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not math.isfinite(sigma) or sigma < 0:
        raise ValueError(f"`sigma` must be a finite number >= 0, got {sigma!r}")
    if sigma == 0:
        return images
    noise = torch.randn(images.shape, generator=generator, device=generator.device, dtype=images.dtype)
    return images + sigma * noise.to(images.device)


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize images to ``size x size`` by bilinear interpolation, rounding uint8 pixels back to uint8.

    Downsampling is antialiased (as PIL and torchvision's ``Resize`` do), so a digit shrunk
    to half its size keeps its strokes instead of aliasing them away.

    Examples
    --------
    >>> resize(torch.full((1, 1, 8, 8), 200, dtype=torch.uint8), 28).unique().tolist()
    [200]
    """
    check_integer("image_size", size, minimum=1)
    if images.shape[-1] == size and images.shape[-2] == size:
        return images
    shrinking = size < max(images.shape[-2:])
    resized = F.interpolate(
        images if images.is_floating_point() else images.float(), size=(size, size), mode="bilinear",
        align_corners=False, antialias=shrinking,
    )
    return resized if images.is_floating_point() else resized.round_().clamp_(0, 255).to(torch.uint8)
