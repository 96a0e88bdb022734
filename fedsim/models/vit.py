"""A tiny Vision Transformer for small images, with optional gradient checkpointing."""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .factory import register_model
from .layers import check_no_se, check_norm, replace_conv


class CheckpointedSequential(nn.Sequential):
    """Run each child under activation checkpointing while training with autograd on.

    Chen et al., "Training Deep Nets with Sublinear Memory Cost" (2016): each block's activations
    are recomputed in the backward pass instead of stored. Non-reentrant checkpointing replays the
    RNG state, so dropout masks, and therefore gradients, match the plain forward. As a subclass
    of ``nn.Sequential`` with the same children, its ``state_dict`` keys are unchanged.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self:
            if self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x


def _init_patch_embedding(conv: nn.Conv2d) -> None:
    """Initialise the patch projection as torchvision's ViT does (LeCun normal, zero bias)."""
    fan_in = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
    nn.init.trunc_normal_(conv.weight, std=math.sqrt(1 / fan_in))
    nn.init.zeros_(conv.bias)


@register_model("vit-tiny")
def vit_tiny(
    *,
    num_classes: int,
    in_channels: int,
    image_size: int,
    norm: str | None = None,
    se: bool = False,
    patch_size: int = 4,
    num_layers: int = 6,
    num_heads: int = 3,
    hidden_dim: int = 192,
    mlp_dim: int = 768,
    gradient_checkpointing: bool = False,
) -> nn.Module:
    """Build a ViT-Tiny-width Vision Transformer (Dosovitskiy et al., ICLR 2021) from torchvision.

    From "An Image is Worth 16x16 Words". Sized as DeiT-Ti (Touvron et al., ICML 2021: 3 heads,
    192 dimensions, MLP 768) but with 6 layers instead of 12, and 4x4 patches (49 tokens at 28 px,
    64 at 32 px) instead of 16x16. torchvision initialises the head to zero, as in the paper.

    Parameters
    ----------
    num_classes, in_channels, image_size : int
        As in :func:`fedsim.models.create_model`; ``image_size`` must be a multiple of ``patch_size``.
    norm : {'layer'}, optional
        Transformers here use LayerNorm only.
    se : bool, default False
        Not supported.
    patch_size, num_layers, num_heads, hidden_dim, mlp_dim : int
        Architecture, as torchvision's ``VisionTransformer``; ``hidden_dim`` must be a multiple of ``num_heads``.
    gradient_checkpointing : bool, default False
        Recompute each encoder block's activations in the backward pass (see
        :class:`CheckpointedSequential`): less memory, about one more forward of compute.
    """
    from torchvision.models import VisionTransformer

    check_norm(norm, ("layer",))
    check_no_se(se)
    if image_size % patch_size:
        raise ValueError(
            f"`image_size`={image_size} must be a multiple of `patch_size`={patch_size}; "
            f"use image_size={max(patch_size, image_size // patch_size * patch_size)} or another patch_size"
        )
    if hidden_dim % num_heads:
        raise ValueError(f"`hidden_dim`={hidden_dim} must be a multiple of `num_heads`={num_heads}")
    model = VisionTransformer(
        image_size=image_size,
        patch_size=patch_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        mlp_dim=mlp_dim,
        num_classes=num_classes,
    )
    model.conv_proj = replace_conv(model.conv_proj, in_channels=in_channels, init=_init_patch_embedding)
    if gradient_checkpointing:
        model.encoder.layers = CheckpointedSequential(OrderedDict(model.encoder.layers.named_children()))
    return model
