"""The model registry: ``register_model``, ``create_model`` and ``list_models``, as in timm."""

from __future__ import annotations

from torch import nn

from fedsim.checks import SettingError, SettingTypeError, check_integer
from fedsim.references import calling, check_callable, quoted
from fedsim.registry import Registry

def user_model(factory, reference: str):
    """Return the registry entry of a user's model factory (or `nn.Module` class) that ``reference`` names.

    The factory takes ``num_classes``, ``in_channels`` and ``image_size`` (and the model's own
    options) and returns an `nn.Module`; whatever else it does is one error naming ``model``.
    """
    check_callable(factory, reference, "model", "a model factory (num_classes, in_channels, image_size)")

    def build(*, num_classes, in_channels, image_size, norm=None, se=False, **options):
        if norm is not None or se:
            raise SettingError("{model} is a user's model: {norm:name} and `se` do not apply; set them in its factory",
                               model=reference, norm=norm)
        model = calling(reference, "model", factory, num_classes=num_classes, in_channels=in_channels,
                        image_size=image_size, **options)
        if not isinstance(model, nn.Module):
            raise SettingTypeError("{model} returned a {kind:text}, not a torch.nn.Module", model=reference,
                                   kind=type(model).__name__)
        return model

    return build


_MODELS = Registry("model", from_reference=user_model)

#: Decorator that registers a factory ``(*, num_classes, in_channels, image_size, norm, se, **kwargs)``.
register_model = _MODELS.register


def create_model(
    name: str,
    *,
    num_classes: int,
    in_channels: int = 1,
    image_size: int = 28,
    norm: str | None = None,
    se: bool = False,
    **kwargs,
) -> nn.Module:
    """Build the classifier registered under ``name``, freshly initialised (never pretrained).

    Parameters
    ----------
    name : str
        A name from :func:`list_models`.
    num_classes : int
        Number of output logits, >= 1.
    in_channels : int, default 1
        Image channels: 1 for MNIST, 3 for CIFAR.
    image_size : int, default 28
        Height and width of the (square) input: 8 for sklearn's digits, 28 for MNIST, 32 for CIFAR.
        Models that cannot take a size raise here, not at the first forward.
    norm : str, optional
        Normalisation layer, among those the model supports (``'none'``, ``'batch'``, ``'group'``,
        ``'layer'``); None takes the model's default.
    se : bool, default False
        Add squeeze-and-excitation blocks (``cnn`` and ``simple-cnn`` only).
    **kwargs
        Model-specific options, documented on each model's factory (``gradient_checkpointing``
        for ``vit-tiny``, for instance).

    Returns
    -------
    torch.nn.Module
        Maps a ``(batch, in_channels, image_size, image_size)`` tensor to ``(batch, num_classes)`` logits.

    Raises
    ------
    ValueError
        For an unknown ``name`` (the message lists the known ones) or a value a model cannot take.
    TypeError
        For an argument of the wrong type or an option the model does not have.

    Examples
    --------
    >>> import torch
    >>> model = create_model("cnn", num_classes=10)
    >>> model(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    """
    factory = _MODELS.get(name)
    num_classes = check_integer("num_classes", num_classes, minimum=1)
    in_channels = check_integer("in_channels", in_channels, minimum=1)
    image_size = check_integer("image_size", image_size, minimum=1)
    if norm is not None and not isinstance(norm, str):
        raise SettingTypeError("{norm:name} must be a string or None, got {got:text} of type {kind:text}", norm=norm,
                               got=repr(norm), kind=type(norm).__name__)
    if not isinstance(se, bool):
        raise TypeError(f"`se` must be a bool, got {se!r} of type {type(se).__name__}")
    try:
        return factory(
            num_classes=num_classes, in_channels=in_channels, image_size=image_size, norm=norm, se=se, **kwargs
        )
    except ValueError as error:
        # The model-level checks do not know the name the model was registered under.
        raise SettingError("model {name:text}: {error:text}", name=repr(name), error=quoted(error)) from None


def model_factory(name: str):
    """Return the factory registered (or referenced) as ``name``."""
    return _MODELS.get(name)


def list_models(pattern: str = "*") -> list[str]:
    """Return the registered model names matching the shell-style ``pattern``, sorted.

    Examples
    --------
    >>> list_models("resnet*")
    ['resnet18']
    """
    return _MODELS.names(pattern)
