"""How a setting's key may be spelled, and the error for one that is not a setting: its line, the nearest key.

Shared by `fedsim.config.run_config` (a ``config.json``), `fedsim.config.files` (a TOML file) and
`fedsim.config.comparison`; it imports none of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping


def field_values(mapping: Mapping, source: str, known, *, text: str | None = None, table: str | None = None) -> dict:
    """Return ``mapping`` with dashes in its keys read as underscores, refusing keys that are not fields.

    Parameters
    ----------
    mapping : mapping
        Key -> value, keys spelled with dashes or underscores.
    source : str
        Where the mapping comes from, for error messages.
    known : collection of str
        The keys accepted: `fedsim.config.RunConfig`'s fields, and a file's ``out`` and ``strategies``.
    text, table : optional
        The file's text and the table holding ``mapping``, so that errors give the line.

    Raises
    ------
    ValueError
        An unknown key (with the nearest known one), or one key spelled twice
        (``local-epochs`` and ``local_epochs``).
    """
    import difflib

    known = set(known)
    values, spelled = {}, {}
    for key, value in mapping.items():
        name = str(key).replace("-", "_")
        if name in ("dataset_option", "partition_option"):  # the flag's own spelling, --dataset-option
            name += "s"
        if name in spelled:
            raise ValueError(f"{source}{line_of(text, name, table, last=True)}: {spelled[name]!r} and {key!r} set "
                             f"the same setting; keep one of them")
        values[name], spelled[name] = value, key
    unknown = sorted(set(values) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown key {spelled[unknown[0]]!r} in {source}{line_of(text, unknown[0], table)}{hint}; "
                         f"known keys: {', '.join(sorted(known))}")
    return values


def line_of(text: str | None, name: str, table: str | None = None, *, last: bool = False) -> str:
    """Return ", line N" for the line that sets ``name`` in ``table`` (``None``: the top level), or "".

    Dashes or underscores, quoted or not. ``last`` finds the last such line (a key's second spelling).
    """
    if text is None:
        return ""
    spelled = "[-_]".join(map(re.escape, name.split("_")))
    found, current = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        header = re.match(r"\s*\[\s*([\w-]+)", line)
        if header:
            current = header.group(1)
        elif current == table and re.match(rf'\s*"?{spelled}"?\s*=', line):
            found.append(number)
    if not found:
        return ""
    return f", line {found[-1] if last else found[0]}"
