"""Errors and warnings that carry the settings they name, so that each layer words a setting its own way.

`partitions` and `fedsim` name a setting by its parameter, as ```alpha`=0.0``; fedsim's command
line names it by the flag that sets it, as ```--alpha`=0.0`` (`fedsim.cli.flag_messages`). The
message is a template whose placeholders are the settings, so that no layer rewrites another's text:

- ``{alpha}`` is the setting with its value: ```alpha`=0.0``;
- ``{alpha:name}`` is the setting alone: ```alpha``` (no value needed);
- ``{shape:text}`` is a value that is no setting, as it is: ``(3, 4)``; a `Worded` value (a reason
  given by another check) is worded as the message that holds it.

Literal braces in a template are doubled, as in `str.format`.
"""

from __future__ import annotations

import string

#: What `Wording`'s ``word`` receives as the value of a setting named alone (``{name:name}``).
NAMED_ALONE = object()


def parameter_word(name: str, value=NAMED_ALONE) -> str:
    """Return how the libraries name a setting: ```name```, or ```name`=value`` with its value's ``repr``."""
    return f"`{name}`" if value is NAMED_ALONE else f"`{name}`={value!r}"


class Worded:
    """The settings and wording of a `SettingError`, `SettingTypeError` or `SettingWarning`.

    Parameters
    ----------
    template : str
        The message, with placeholders as the module's text describes them.
    fields : dict of str to str, optional
        The setting a placeholder stands for, where the two names differ: a check of any setting
        writes ``{setting}`` with ``fields={"setting": name}``.
    **values
        Each placeholder's value.
    """

    def __init__(self, template: str, /, *, fields: dict[str, str] | None = None, **values):
        self.template, self.values, self.fields = template, values, dict(fields or {})
        super().__init__(self.worded())

    @property
    def settings(self) -> list[str]:
        """Return the settings the message names, in its order, those of a reason it holds included."""
        named = []
        for _, name, spec, _ in string.Formatter().parse(self.template):
            value = self.values.get(name)
            if spec == "text" and isinstance(value, Worded):  # a reason given by another check names its own
                named.extend(value.settings)
            elif name is not None and spec != "text":
                named.append(self.fields.get(name, name))
        return named

    def worded(self, word=parameter_word) -> str:
        """Return the message with each setting worded by ``word(name, value)``.

        ``word`` receives a setting's name (`fields` says which setting a placeholder stands for),
        and `NAMED_ALONE` as the value of a setting named alone.
        """
        return self.template.format_map(_Placeholders(self, word))

    def __reduce__(self):
        # rebuilt from the template in another process (a DDP rank's error, a worker's), not from the worded text
        return _rebuilt, (type(self), self.template, self.fields, self.values)


def _rebuilt(kind: type, template: str, fields: dict, values: dict) -> Worded:
    """Return a `Worded` error or warning of ``kind`` as it was raised (`Worded.__reduce__`)."""
    return kind(template, fields=fields, **values)


class _Placeholders(dict):
    """The placeholders of ``worded``'s template; a setting named alone (``{name:name}``) needs no value."""

    def __init__(self, worded: Worded, word):
        super().__init__()
        self.worded, self.word = worded, word

    def __missing__(self, name: str) -> _Placeholder:
        value = self.worded.values.get(name, NAMED_ALONE)
        return _Placeholder(self.worded.fields.get(name, name), value, self.word)


class _Placeholder:
    """One placeholder's value, formatted by its spec: a setting with its value, alone, or plain text."""

    def __init__(self, name: str, value, word):
        self.name, self.value, self.word = name, value, word

    def __format__(self, spec: str) -> str:
        if self.value is NAMED_ALONE and spec != "name":
            raise KeyError(f"the placeholder of {self.name!r} has no value; give one, or write {{{self.name}:name}}")
        if spec == "text":
            return self.value.worded(self.word) if isinstance(self.value, Worded) else str(self.value)
        if spec == "name":
            return self.word(self.name)
        if spec:
            raise ValueError(f"unknown placeholder spec {spec!r} for {self.name!r}: use name, text or none")
        return self.word(self.name, self.value)


class SettingError(Worded, ValueError):
    """A setting's value is out of its range, or settings contradict each other (module text).

    Examples
    --------
    >>> error = SettingError("{alpha} must be > 0, got {alpha:text}", alpha=0.0)
    >>> str(error), error.settings
    ('`alpha`=0.0 must be > 0, got 0.0', ['alpha'])
    >>> error.worded(lambda name, value=None: f"--{name}")
    '--alpha must be > 0, got 0.0'
    """


class SettingTypeError(Worded, TypeError):
    """A setting's value is of the wrong type (module text)."""


class SettingPermissionError(Worded, PermissionError):
    """A setting names a file this process may not write (module text)."""


class SettingWarning(Worded, UserWarning):
    """A setting's value runs, but probably not as meant (module text)."""


for _public in (SettingError, SettingTypeError, SettingPermissionError, SettingWarning):
    _public.__module__ = "partitions"  # as tracebacks and doctests name them: partitions.SettingError
