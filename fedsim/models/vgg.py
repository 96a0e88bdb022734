"""VGG-11 for small images."""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from .factory import register_model
from .layers import check_no_se, check_norm, kaiming_fan_out, replace_conv

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
    """Build VGG-11 (Simonyan & Zisserman, ICLR 2015) with torchvision's layers, fitted to small images.

    From "Very Deep Convolutional Networks for Large-Scale Image Recognition", configuration A,
    built by torchvision's ``make_layers`` (with BatchNorm when ``norm='batch'``, as ``vgg11_bn``).
    Deviations, as in the usual CIFAR variants: the feature map is averaged to 1x1 and the
    classifier is 512 -> 512 -> 512 -> ``num_classes`` (instead of 25088 -> 4096 -> 4096), which
    takes the parameter count from 133M to about 9.7M. Each max-pool that would shrink the map
    below 1x1 is dropped (the last one at 28 px, the last two at 8 px), starting from the deepest.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'none', 'batch'}, optional
        Default 'none', as in the paper; 'batch' gives the features of torchvision's ``vgg11_bn``.
    se : bool, default False
        Not supported.
    dropout : float, default 0.5
        Dropout after each hidden classifier layer, as in the paper.
    """
    from torchvision.models.vgg import cfgs, make_layers

    norm = check_norm(norm, ("none", "batch"))
    check_no_se(se)
    # torchvision's VGG class is not used: it would first build (and initialise, ~3 s) the 120M-weight
    # ImageNet classifier only for it to be replaced; its own feature builder is.
    features = make_layers(cfgs["A"], batch_norm=norm == "batch")
    features[0] = replace_conv(features[0], in_channels=in_channels, init=None)
    for layer in features:
        if isinstance(layer, nn.Conv2d):
            kaiming_fan_out(layer)
    # floor-halving image_size this many times still leaves at least one pixel
    pools_kept = image_size.bit_length() - 1
    pools = [index for index, layer in enumerate(features) if isinstance(layer, nn.MaxPool2d)]
    for index in pools[pools_kept:]:
        # Identity rather than deletion keeps the state_dict keys of torchvision's layout
        features[index] = nn.Identity()
    classifier = nn.Sequential(
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(dropout),
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(dropout),
        nn.Linear(_HIDDEN, num_classes),
    )
    for layer in classifier:
        if isinstance(layer, nn.Linear):
            # torchvision's VGG initialisation of the classifier
            nn.init.normal_(layer.weight, 0, 0.01)
            nn.init.zeros_(layer.bias)
    # the attribute names of torchvision's VGG, so its state_dict keys carry over for the features
    return nn.Sequential(
        OrderedDict(features=features, avgpool=nn.AdaptiveAvgPool2d(1), flatten=nn.Flatten(), classifier=classifier)
    )
