"""Mobile-sized ImageNet networks from torchvision, fitted to small images: MobileNetV3 and EfficientNet."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import check_no_se, check_norm, small_image_stem, torchvision_norm

_NORMS = ("batch", "group")


def _fit_stem(model: nn.Module, *, in_channels: int, image_size: int) -> nn.Module:
    """Refit the first convolution (``features[0][0]`` in both families) to the input; return ``model``."""
    model.features[0][0] = small_image_stem(model.features[0][0], in_channels=in_channels, image_size=image_size)
    return model


@register_model("mobilenet_v3_small")
def mobilenet_v3_small(
    *, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False
) -> nn.Module:
    """Build MobileNetV3-Small (Howard et al., ICCV 2019) from torchvision, fitted to small images.

    From "Searching for MobileNetV3". Deviation: up to 32 px the stem convolution has stride 1
    instead of 2 (see :func:`~fedsim.models.layers.small_image_stem`), so the network
    down-samples 16x rather than 32x. Any ``image_size`` works: every stride-2 layer pads.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'batch', 'group'}, optional
        Default 'batch' (torchvision's ``eps=1e-3, momentum=0.01``); 'group' as for ``resnet18``.
    se : bool, default False
        Not an option: the network's own squeeze-and-excitation blocks are always there.
    """
    from torchvision.models import mobilenet_v3_small as torchvision_mobilenet_v3_small

    norm = check_norm(norm, _NORMS)
    check_no_se(se)
    model = torchvision_mobilenet_v3_small(weights=None, num_classes=num_classes, norm_layer=torchvision_norm(norm))
    return _fit_stem(model, in_channels=in_channels, image_size=image_size)


@register_model("efficientnet_b0")
def efficientnet_b0(
    *, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False
) -> nn.Module:
    """Build EfficientNet-B0 (Tan & Le, ICML 2019) from torchvision, fitted to small images.

    From "EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks". Deviation:
    up to 32 px the stem convolution has stride 1 instead of 2, as for ``mobilenet_v3_small``.
    Stochastic depth (0.2) and dropout (0.2) are torchvision's defaults.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'batch', 'group'}, optional
        Default 'batch'; 'group' as for ``resnet18``.
    se : bool, default False
        Not an option: the network's own squeeze-and-excitation blocks are always there.
    """
    from torchvision.models import efficientnet_b0 as torchvision_efficientnet_b0

    norm = check_norm(norm, _NORMS)
    check_no_se(se)
    model = torchvision_efficientnet_b0(weights=None, num_classes=num_classes, norm_layer=torchvision_norm(norm))
    return _fit_stem(model, in_channels=in_channels, image_size=image_size)
