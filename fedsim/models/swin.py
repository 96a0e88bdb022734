"""A tiny Swin Transformer for small images."""

from __future__ import annotations

from torch import nn

from .factory import register_model
from .layers import check_image_size, check_no_se, check_norm, replace_conv


@register_model("swin-tiny")
def swin_tiny(
    *,
    num_classes: int,
    in_channels: int,
    image_size: int,
    norm: str | None = None,
    se: bool = False,
    patch_size: int = 2,
    window_size: int = 4,
    embed_dim: int = 64,
    depths: tuple[int, ...] = (2, 2, 2),
    num_heads: tuple[int, ...] = (2, 4, 8),
    stochastic_depth_prob: float = 0.1,
) -> nn.Module:
    """Build a small Swin Transformer (Liu et al., ICCV 2021) from torchvision, fitted to small images.

    From "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows". Deviations
    from Swin-T (4x4 patches, 7x7 windows, 96 dimensions, depths 2-2-6-2): 2x2 patches, 4x4
    windows, 64 dimensions and three stages of depth 2, with 32-dimensional heads as in the paper.
    At 32 px the stages see 16x16, 8x8 and 4x4 tokens; at 28 px torchvision pads 14x14 and 7x7
    maps up to whole windows.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`; ``image_size`` must be at least ``patch_size``.
    norm : {'layer'}, optional
        Transformers here use LayerNorm only.
    se : bool, default False
        Not supported.
    patch_size, window_size : int
        Side of the square patches and attention windows.
    embed_dim : int
        Width of the first stage; it doubles at each patch merging.
    depths, num_heads : tuple of int
        Blocks and attention heads per stage, one entry per stage.
    stochastic_depth_prob : float, default 0.1
        Largest drop-path rate, reached in the last block (torchvision's default).
    """
    from torchvision.models.swin_transformer import SwinTransformer

    check_norm(norm, ("layer",))
    check_no_se(se)
    check_image_size(image_size, patch_size, f"{patch_size}x{patch_size} patch embedding")
    if len(depths) != len(num_heads):
        raise ValueError(f"`depths` and `num_heads` need one entry per stage, got {len(depths)} and {len(num_heads)}")
    model = SwinTransformer(
        patch_size=[patch_size, patch_size],
        embed_dim=embed_dim,
        depths=list(depths),
        num_heads=list(num_heads),
        window_size=[window_size, window_size],
        stochastic_depth_prob=stochastic_depth_prob,
        num_classes=num_classes,
    )
    # the patch embedding keeps PyTorch's default initialisation, as in torchvision's Swin
    model.features[0][0] = replace_conv(model.features[0][0], in_channels=in_channels, init=None)
    return model
