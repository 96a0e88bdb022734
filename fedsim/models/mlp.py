"""FedAvg's multilayer perceptron, the "2NN"."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import check_no_se, check_norm


@register_model("mlp")
def mlp(*, num_classes: int, in_channels: int, image_size: int, norm: str | None = None, se: bool = False) -> nn.Module:
    """Build FedAvg's 2NN (McMahan et al., AISTATS 2017).

    From "Communication-Efficient Learning of Deep Networks from Decentralized Data": the flattened
    image -> FC 200 -> ReLU -> FC 200 -> ReLU -> FC ``num_classes``; 199,210 parameters at 1x28x28
    and 10 classes, as in the paper.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`.
    norm : {'none'}, optional
        The 2NN has no normalisation.
    se : bool, default False
        Not supported: there are no channels to reweight.
    """
    check_norm(norm, ("none",))
    check_no_se(se)
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_channels * image_size * image_size, 200),
        nn.ReLU(inplace=True),
        nn.Linear(200, 200),
        nn.ReLU(inplace=True),
        nn.Linear(200, num_classes),
    )
