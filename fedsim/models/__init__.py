"""Classifiers by name: ``create_model("resnet18", num_classes=10, in_channels=3, image_size=32)``.

The registry follows timm (``register_model``, ``create_model``, ``list_models``). Importing this
package registers every family; ``torchvision`` is imported only when a model that needs it is built.
"""

from . import cnn, mlp, mobile, resnet, swin, vgg, vit  # noqa: F401  (each registers its models)
from .factory import create_model, list_models, register_model

__all__ = ["create_model", "list_models", "register_model"]
