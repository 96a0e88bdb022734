"""A name -> factory registry with a decorator, as timm's ``@register_model``."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Generic, TypeVar

from .checks import SettingError
from .references import CALLABLE, Wanted, did_you_mean, is_reference, load

T = TypeVar("T")


class Registry(Generic[T]):
    """Factories registered under names; an unknown name lists the known ones, and suggests the close ones.

    Parameters
    ----------
    kind : str
        What the registry holds, for error messages (``"model"``, ``"dataset"``).
    parameter : str, optional
        The setting users pass the name in, for error messages (``"model"``, ``"strategy"``); by
        default ``kind``. The command line words it as the flag that sets it (``--model``).
    from_reference : callable, optional
        Makes an entry of the object a reference to user code names (``package.module:Name`` or
        ``path/to/file.py:Name``, `fedsim.references`), given the object and the reference; it
        refuses an object of the wrong kind. Without it, the registry takes names only.
    wanted : fedsim.references.Wanted, optional
        What a reference names, listed from its module when the name it gives is missing
        (default: the module's functions and classes).

    Examples
    --------
    >>> shapes = Registry("shape")
    >>> @shapes.register("square")
    ... def square(side):
    ...     return side * side
    >>> shapes.get("square")(3)
    9
    >>> shapes.names()
    ['square']
    """

    def __init__(self, kind: str, parameter: str | None = None,
                 from_reference: Callable[[object, str], T] | None = None, wanted: Wanted = CALLABLE):
        self.kind = kind
        self.parameter = kind if parameter is None else parameter
        self.from_reference = from_reference
        self.wanted = wanted
        self._factories: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Return a decorator that registers its target under ``name``."""

        def decorator(factory: T) -> T:
            if name in self._factories:
                raise AssertionError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return decorator

    def get(self, name: str) -> T:
        """Return the factory registered under ``name``, or made from the user code a reference names."""
        if self.from_reference is not None and is_reference(name):
            return self.from_reference(load(name, self.parameter, self.wanted), name)
        try:
            return self._factories[name]
        except (KeyError, TypeError):
            raise SettingError("unknown {kind:text} {setting}; known: {known:text}{close:text}",
                               fields={"setting": self.parameter}, setting=name, kind=self.kind,
                               known=", ".join(sorted(self._factories)),
                               close=did_you_mean(name, self._factories)) from None

    def names(self, pattern: str = "*") -> list[str]:
        """Return the registered names matching the shell-style ``pattern``, sorted."""
        return sorted(name for name in self._factories if fnmatch.fnmatchcase(name, pattern))

    def __contains__(self, name: object) -> bool:
        return name in self._factories
