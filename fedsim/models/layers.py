"""Pieces the classifier families share: option checks, the norm factory, SE, stem surgery.

Only ``torch`` is imported here, so that ``import fedsim.models`` stays cheap; the families
import ``torchvision`` inside their factories.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from fedsim.checks import SettingError

#: Largest input (pixels per side) that gets the small-image stem: a stride-1 first convolution
#: and no stem max-pool, as in He et al. (2016)'s CIFAR ResNets, so 28 and 32 px keep their detail.
SMALL_IMAGE_MAX = 32

#: Groups per GroupNorm layer. Hsieh et al., "The Non-IID Data Quagmire of Decentralized Machine
#: Learning" (ICML 2020) show BatchNorm breaks under label skew and GroupNorm does not; Reddi et al.,
#: "Adaptive Federated Optimization" (ICLR 2021) use two groups per layer in their ResNet-18.
GROUP_NORM_GROUPS = 2

NormLayer = Callable[[int], nn.Module]


def check_norm(norm: str | None, supported: Sequence[str]) -> str:
    """Return ``norm``, or the model's default ``supported[0]`` when it is None.

    Raises
    ------
    ValueError
        If the model does not support ``norm``; the message lists what it supports.
    """
    if norm is None:
        return supported[0]
    if norm not in supported:
        choices = ", ".join(repr(name) for name in supported)
        raise SettingError("{norm} is not supported; this model supports {choices:text} (default {default:text})",
                           norm=norm, choices=choices, default=repr(supported[0]))
    return norm


def check_no_se(se: bool) -> None:
    """Raise if squeeze-and-excitation is requested from a model that has no place for it."""
    if se:
        raise ValueError("`se`=True is not supported by this model; 'cnn' and 'simple-cnn' take it")


def check_image_size(image_size: int, minimum: int, why: str) -> None:
    """Raise if ``image_size`` is below the smallest size the architecture can take.

    Parameters
    ----------
    image_size : int
        Requested input height and width.
    minimum : int
        Smallest supported value.
    why : str
        What shrinks the input (``"two 5x5 valid convolutions and two 2x2 pools"``).
    """
    if image_size < minimum:
        raise ValueError(f"`image_size`={image_size} is too small: the smallest supported is {minimum} ({why})")


def group_norm(channels: int, groups: int = GROUP_NORM_GROUPS) -> nn.GroupNorm:
    """Return a GroupNorm over ``channels`` (Wu & He, "Group Normalization", ECCV 2018).

    The group count is ``gcd(groups, channels)`` so it always divides the channels.
    """
    return nn.GroupNorm(math.gcd(groups, channels), channels)


def make_norm(norm: str) -> NormLayer:
    """Return a factory ``channels -> module`` for the 2-D normalisation named ``norm``.

    ``'none'`` gives ``nn.Identity`` (which ignores the channel count), ``'batch'``
    ``nn.BatchNorm2d`` and ``'group'`` :func:`group_norm`.
    """
    factories: dict[str, NormLayer] = {"none": nn.Identity, "batch": nn.BatchNorm2d, "group": group_norm}
    return factories[norm]


def torchvision_norm(norm: str) -> NormLayer | None:
    """Return the ``norm_layer`` argument for a torchvision builder.

    ``'batch'`` gives None so that each torchvision model keeps its own BatchNorm settings
    (MobileNetV3 uses ``eps=1e-3, momentum=0.01``).
    """
    return None if norm == "batch" else make_norm(norm)


class SqueezeExcitation(nn.Module):
    """Reweight channels by a gate computed from their global average.

    Hu et al., "Squeeze-and-Excitation Networks" (CVPR 2018), with reduction ratio ``r``.
    Deviation: the bottleneck keeps at least 4 units, so that narrow layers (6 channels in
    ``simple-cnn``) are squeezed rather than collapsed to a single unit.

    Parameters
    ----------
    channels : int
        Channels of the input feature map.
    reduction : int, default 16
        Ratio ``r`` of channels to bottleneck units.
    """

    def __init__(self, channels: int, reduction: int = 16):
        super().__init__()
        hidden = max(channels // reduction, 4)
        self.fc1 = nn.Conv2d(channels, hidden, kernel_size=1)
        self.fc2 = nn.Conv2d(hidden, channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = x.mean(dim=(2, 3), keepdim=True)
        gate = torch.sigmoid(self.fc2(torch.relu(self.fc1(gate))))
        return x * gate


def kaiming_fan_out(conv: nn.Conv2d) -> None:
    """Initialise ``conv`` as torchvision's ResNet, VGG, MobileNet and EfficientNet do."""
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
    if conv.bias is not None:
        nn.init.zeros_(conv.bias)


def replace_conv(
    conv: nn.Conv2d,
    *,
    in_channels: int,
    kernel_size: int | None = None,
    stride: int | None = None,
    padding: int | None = None,
    init: Callable[[nn.Conv2d], None] | None = kaiming_fan_out,
) -> nn.Conv2d:
    """Return a fresh copy of a stem convolution with new input channels and, optionally, geometry.

    Pretrained weights are never used, so the replacement is only re-initialised (by ``init``,
    or PyTorch's default when None) rather than adapted from the old kernel.
    """
    new = nn.Conv2d(
        in_channels,
        conv.out_channels,
        kernel_size=conv.kernel_size if kernel_size is None else kernel_size,
        stride=conv.stride if stride is None else stride,
        padding=conv.padding if padding is None else padding,
        groups=conv.groups,
        bias=conv.bias is not None,
    )
    if init is not None:
        init(new)
    return new


def small_image_stem(conv: nn.Conv2d, *, in_channels: int, image_size: int) -> nn.Conv2d:
    """Return the first convolution of a mobile network fitted to ``in_channels`` and the image size.

    Up to :data:`SMALL_IMAGE_MAX` pixels the stride drops to 1: the ImageNet stride-2 stem would
    leave a 28 px digit at 1x1 after the network's 32x down-sampling.
    """
    stride = 1 if image_size <= SMALL_IMAGE_MAX else None
    return replace_conv(conv, in_channels=in_channels, stride=stride)
