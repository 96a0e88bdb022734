"""The small convolutional networks of the federated-learning literature: FedAvg's CNN and NIID-Bench's."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import SqueezeExcitation, check_image_size, check_norm, make_norm

_CONV_NORMS = ("none", "batch", "group")


def _conv_stage(in_channels: int, out_channels: int, *, padding: int | str, norm: str, se: bool) -> nn.Sequential:
    """Return conv5x5 -> norm -> ReLU -> (SE) -> 2x2 max-pool."""
    layers = [
        # a bias in front of BatchNorm or GroupNorm is cancelled by their mean subtraction
        nn.Conv2d(in_channels, out_channels, kernel_size=5, padding=padding, bias=norm == "none"),
        make_norm(norm)(out_channels),
        nn.ReLU(inplace=True),
    ]
    if se:
        layers.append(SqueezeExcitation(out_channels))
    layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


@register_model("cnn")
def cnn(*, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False) -> nn.Module:
    """Build FedAvg's CNN (McMahan et al., AISTATS 2017).

    From "Communication-Efficient Learning of Deep Networks from Decentralized Data":
    conv5x5(32) -> 2x2 max-pool -> conv5x5(64) -> 2x2 max-pool -> FC 512 -> ReLU -> FC ``num_classes``.
    With 'same' padding at 1x28x28 and 10 classes it has the paper's 1,663,370 parameters.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'none', 'batch', 'group'}, optional
        Normalisation after each convolution; default 'none', as in the paper. Deviation: 'batch'
        and 'group' are additions (see :data:`fedsim.models.layers.GROUP_NORM_GROUPS`).
    se : bool, default False
        Add a squeeze-and-excitation block to each conv stage (Hu et al., CVPR 2018); an addition.
    """
    norm = check_norm(norm, _CONV_NORMS)
    check_image_size(image_size, 4, "two 2x2 max-pools")
    side = image_size // 4
    return nn.Sequential(
        _conv_stage(in_channels, 32, padding="same", norm=norm, se=se),
        _conv_stage(32, 64, padding="same", norm=norm, se=se),
        nn.Flatten(),
        nn.Linear(64 * side * side, 512),
        nn.ReLU(inplace=True),
        nn.Linear(512, num_classes),
    )


@register_model("simple-cnn")
def simple_cnn(
    *, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False
) -> nn.Module:
    """Build NIID-Bench's LeNet-style ``SimpleCNN`` (Li et al., ICDE 2022).

    From "Federated Learning on Non-IID Data Silos: An Experimental Study":
    conv5x5(6) -> 2x2 max-pool -> conv5x5(16) -> 2x2 max-pool -> FC 120 -> FC 84 -> FC ``num_classes``,
    with valid (unpadded) convolutions as in NIID-Bench, so the flattened size is 16x5x5 at 32 px
    (their CIFAR model) and 16x4x4 at 28 px (their MNIST model).

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'none', 'batch', 'group'}, optional
        Normalisation after each convolution; default 'none', as in NIID-Bench.
    se : bool, default False
        Add a squeeze-and-excitation block to each conv stage (Hu et al., CVPR 2018); an addition.
    """
    norm = check_norm(norm, _CONV_NORMS)
    check_image_size(image_size, 16, "two 5x5 valid convolutions and two 2x2 max-pools")
    side = ((image_size - 4) // 2 - 4) // 2
    return nn.Sequential(
        _conv_stage(in_channels, 6, padding=0, norm=norm, se=se),
        _conv_stage(6, 16, padding=0, norm=norm, se=se),
        nn.Flatten(),
        nn.Linear(16 * side * side, 120),
        nn.ReLU(inplace=True),
        nn.Linear(120, 84),
        nn.ReLU(inplace=True),
        nn.Linear(84, num_classes),
    )
