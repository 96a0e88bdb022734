"""VGG-11 for small images."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import check_no_se, check_norm, replace_conv

_HIDDEN = 512


@register_model("vgg11")
def vgg11(
    *,
    num_classes: int,
    in_channels: int,
    image_size: int,
    norm: str | None = None,
    se: bool = False,
    dropout: float = 0.5,
) -> nn.Module:
    """Build VGG-11 (Simonyan & Zisserman, ICLR 2015) from torchvision, fitted to small images.

    From "Very Deep Convolutional Networks for Large-Scale Image Recognition", configuration A.
    Deviations, as in the usual CIFAR variants: the feature map is averaged to 1x1 and the
    classifier is 512 -> 512 -> 512 -> ``num_classes`` (instead of 25088 -> 4096 -> 4096), which
    takes the parameter count from 129M to about 9.7M. Each max-pool that would shrink the map
    below 1x1 is dropped (the last one at 28 px, the last two at 8 px), starting from the deepest.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'none', 'batch'}, optional
        Default 'none', as in the paper; 'batch' builds torchvision's ``vgg11_bn``.
    se : bool, default False
        Not supported.
    dropout : float, default 0.5
        Dropout before each hidden classifier layer, as in the paper.
    """
    from torchvision.models import vgg11 as plain_vgg11, vgg11_bn

    norm = check_norm(norm, ("none", "batch"))
    check_no_se(se)
    builder = vgg11_bn if norm == "batch" else plain_vgg11
    model = builder(weights=None, num_classes=num_classes, dropout=dropout)
    model.features[0] = replace_conv(model.features[0], in_channels=in_channels)
    # floor-halving image_size this many times still leaves at least one pixel
    pools_kept = image_size.bit_length() - 1
    pools = [index for index, layer in enumerate(model.features) if isinstance(layer, nn.MaxPool2d)]
    for index in pools[pools_kept:]:
        # Identity rather than deletion keeps the state_dict keys of torchvision's layout
        model.features[index] = nn.Identity()
    model.avgpool = nn.AdaptiveAvgPool2d(1)
    model.classifier = nn.Sequential(
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(dropout),
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(dropout),
        nn.Linear(_HIDDEN, num_classes),
    )
    for layer in model.classifier:
        if isinstance(layer, nn.Linear):
            # torchvision's VGG initialisation for its classifier
            nn.init.normal_(layer.weight, 0, 0.01)
            nn.init.zeros_(layer.bias)
    return model
