"""ResNet-18 for small images."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import SMALL_IMAGE_MAX, check_no_se, check_norm, replace_conv, torchvision_norm


@register_model("resnet18")
def resnet18(
    *, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False
) -> nn.Module:
    """Build ResNet-18 (He et al., CVPR 2016) from torchvision, fitted to small images.

    From "Deep Residual Learning for Image Recognition". Up to 32 px the stem is the paper's CIFAR
    one: a 3x3 stride-1 convolution and no max-pool, instead of ImageNet's 7x7 stride-2
    convolution and max-pool, which would leave a 32 px image at 1x1 before the last stage.
    Larger images keep the ImageNet stem. Any ``image_size`` works: the stride-2 stages pad.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'batch', 'group'}, optional
        Default 'batch', as in the paper. 'group' swaps every BatchNorm for a GroupNorm with
        :data:`~fedsim.models.layers.GROUP_NORM_GROUPS` groups, as in Reddi et al. (ICLR 2021)
        and Hsieh et al. (ICML 2020): no running statistics to disagree across clients.
    se : bool, default False
        Not supported.
    """
    from torchvision.models import resnet18 as torchvision_resnet18

    norm = check_norm(norm, ("batch", "group"))
    check_no_se(se)
    model = torchvision_resnet18(weights=None, num_classes=num_classes, norm_layer=torchvision_norm(norm))
    if image_size <= SMALL_IMAGE_MAX:
        model.conv1 = replace_conv(model.conv1, in_channels=in_channels, kernel_size=3, stride=1, padding=1)
        model.maxpool = nn.Identity()
    else:
        model.conv1 = replace_conv(model.conv1, in_channels=in_channels)
    return model
