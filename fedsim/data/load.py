"""The dataset registry: `load_dataset` by name, `register_dataset`, `list_datasets`."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path

from fedsim.checks import SettingTypeError, check_integer
from fedsim.references import calling, check_callable, split_format
from fedsim.registry import Registry

from .dataset import Dataset
from .files import removed_on_failure

#: Environment variable naming the folder datasets live in (one sub-folder per dataset).
DATA_ENV = "FEDSIM_DATA"

def user_dataset(loader, reference: str) -> Callable[..., Dataset]:
    """Return the registry entry of a user's dataset loader that ``reference`` names.

    The loader returns a `Dataset`; it takes ``root``, ``download`` and ``seed`` if it declares
    them, and its other keyword parameters are its options, as a registered factory's are.
    Whatever fails in it is one error naming ``dataset``.
    """
    check_callable(loader, reference, "dataset", "a dataset loader returning a fedsim.data.Dataset")

    @functools.wraps(loader)  # keeps the signature, which tells `load_dataset` the options
    def load(**arguments) -> Dataset:
        data = calling(reference, "dataset", loader, **arguments)
        if not isinstance(data, Dataset):
            raise SettingTypeError("{dataset} returned a {kind:text}, not a fedsim.data.Dataset", dataset=reference,
                                   kind=type(data).__name__)
        return data

    return load


_DATASETS: Registry[Callable[..., Dataset]] = Registry("dataset", from_reference=user_dataset)

# Arguments `load_dataset` passes to a factory that declares them; every other parameter of a
# factory is one of its options.
_COMMON = ("root", "download", "seed")


def register_dataset(name: str) -> Callable[[Callable[..., Dataset]], Callable[..., Dataset]]:
    """Return a decorator that registers a dataset factory under ``name``.

    The factory takes keyword arguments and returns a `Dataset`. Of ``root`` (a `pathlib.Path`),
    ``download`` (bool) and ``seed`` (int), it receives those it declares; its other
    keyword parameters are the dataset's options, and `load_dataset` rejects any other::

        @register_dataset("constant")
        def constant(*, value=0):
            images = torch.full((2, 1, 4, 4), value, dtype=torch.uint8)
            labels = torch.tensor([0, 1])
            return Dataset("constant", images, labels, images, labels, num_classes=2)

        load_dataset("constant", value=255).mean  # (1.0,)
    """
    return _DATASETS.register(name)


def dataset_factory(name: str) -> Callable[..., Dataset]:
    """Return the loader registered (or referenced) as ``name``."""
    return _DATASETS.get(name)


def list_datasets(pattern: str = "*") -> list[str]:
    """Return the registered dataset names that match the shell-style ``pattern``, sorted.

    Examples
    --------
    >>> list_datasets("cifar*")
    ['cifar10', 'cifar100']
    """
    return _DATASETS.names(pattern)


def default_root() -> Path:
    """Return the folder datasets are read from and downloaded to when no ``root`` is given.

    It is ``$FEDSIM_DATA`` when that is set, else ``~/.cache/fedsim/data``.
    """
    configured = os.environ.get(DATA_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "fedsim" / "data"


def load_dataset(name: str, *, root=None, download: bool = False, seed: int = 0, **options) -> Dataset:
    """Load the dataset registered under ``name`` into memory.

    Parameters
    ----------
    name : str
        A name from `list_datasets`: ``"mnist-5k"`` (embedded, the default of the toolkit),
        ``"digits"`` (embedded), ``"mnist"``, ``"fashion-mnist"``, ``"emnist"``, ``"cifar10"``,
        ``"cifar100"`` (files under ``root``) or ``"multi-mnist"`` (built from another one).
        Or a user's own: ``"npz:FILE"`` or ``"imagefolder:DIR"`` (`fedsim.data.formats`), or a
        loader by reference, ``"package.module:load"`` or ``"path/to/file.py:load"``.
    root : str or path-like, optional
        Folder holding the dataset files, laid out as torchvision lays them out. Defaults to
        `default_root`. The embedded datasets ignore it.
    download : bool, default False
        Let torchvision download missing files (needs a network). Without it, missing files
        raise a `RuntimeError` that says which files must be where.
    seed : int, default 0
        Seed of datasets built at random (``"multi-mnist"``). The train/test splits of the
        other datasets are fixed and do not depend on it, so runs stay comparable.
    **options
        Dataset-specific options, such as ``split`` for ``"emnist"``, ``label_granularity``
        for ``"cifar100"`` or ``image_size`` for ``"digits"``; see each factory's docstring.

    Returns
    -------
    Dataset

    Examples
    --------
    >>> data = load_dataset("mnist-5k")
    >>> data.num_train, data.num_test, data.num_classes, data.image_size
    (4000, 1000, 10, 28)
    """
    if split_format(name) is not None:
        if options:
            raise SettingTypeError("{dataset} takes no options; got {options:text}", dataset=name,
                                   options=", ".join(sorted(options)))
        from .formats import load_format

        return load_format(name)
    factory = _DATASETS.get(name)
    if not isinstance(download, bool):
        raise SettingTypeError("{download:name} must be a bool, got {got:text}", download=download, got=repr(download))
    check_integer("seed", seed, minimum=0)
    parameters = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    known = sorted(
        key for key, p in parameters.items() if key not in _COMMON and p.kind is not inspect.Parameter.VAR_KEYWORD
    )
    for key in options:
        if key in _COMMON or not (takes_any or key in known):
            raise TypeError(
                f"dataset {name!r} has no option `{key}`; its options: {', '.join(known) or 'none'}"
            )
    common = {
        "root": default_root() if root is None else Path(root).expanduser(),
        "download": download,
        "seed": seed,
    }
    arguments = {key: value for key, value in common.items() if key in parameters}
    if not download:
        return factory(**arguments, **options)
    with removed_on_failure(common["root"]):  # a failed download leaves no empty folders behind
        return factory(**arguments, **options)
