"""What every engine starts from: the run's device, its number type and the seeded initial model."""

from __future__ import annotations

import torch

from .models import create_model
from .seeding import Stream, derive_seed
from .training import seeded_global_rng

def resolve_device(name: str) -> torch.device:
    """Return the device for ``--device`` (``auto`` picks CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("`device`='cuda' but no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(name)


def build_model(config, data, device: torch.device | None = None) -> torch.nn.Module:
    """Create the run's model on its device, in its dtype, initialised from the seed alone.

    The initialisation is drawn in float32 on the CPU whatever the run's device and dtype, so
    that every strategy and engine starts from the same weights, and a float64 run starts from
    the float32 run's weights widened.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        Reads ``model``, ``norm``, ``seed``, ``device`` and ``dtype``.
    data : fedsim.data.Dataset
        Gives the number of classes, input channels and image size.
    device : torch.device, optional
        Overrides ``config.device`` (a torchrun rank picks its own GPU).
    """
    options = {} if config.norm is None else {"norm": config.norm}
    with seeded_global_rng(derive_seed(config.seed, Stream.MODEL), torch.device("cpu")):
        model = create_model(config.model, num_classes=data.num_classes, in_channels=data.in_channels,
                             image_size=data.image_size, **options)
    device = resolve_device(config.device) if device is None else device
    return model.to(device=device, dtype=config.torch_dtype)
