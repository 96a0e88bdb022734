"""Figure files: check where a figure can be written before drawing it, then write it atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ._io import atomic_open, check_writable


def check_figure_path(path) -> Path:
    """Check that a figure can be written to ``path``, before the work that makes it; return it as a `Path`.

    The extension, in any case, names the format: one of those matplotlib writes
    (`matplotlib.backend_bases.FigureCanvasBase.get_supported_filetypes`), such as ``png``, ``pdf``
    and ``svg``. The folder may be missing, as `save_figure` creates it; then the nearest folder that
    exists must be writable. Nothing is created.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TypeError
        If ``path`` is not a str or path.
    ValueError
        If the extension is missing or not a format matplotlib writes, if ``path`` is a folder, or if a
        file stands where one of its folders should be.
    PermissionError
        If the folder it would be written to is not writable.

    Examples
    --------
    >>> check_figure_path("figures/labels.SVG").name
    'labels.SVG'
    >>> check_figure_path("figures/labels.docx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: `path`='figures/labels.docx' has the extension '.docx', not a figure format: end it in one of ...
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike, got {type(path).__name__}")
    path = Path(path)
    formats = _figure_formats()
    if path.suffix.lower().lstrip(".") not in formats:
        found = f"the extension {path.suffix!r}, not a figure format" if path.suffix else "no extension"
        raise ValueError(
            f"`path`={str(path)!r} has {found}: end it in one of {', '.join('.' + name for name in formats)}"
        )
    return check_writable(path)


def save_figure(fig, path, dpi: int) -> None:
    """Write ``fig`` to ``path`` in the format its extension names, atomically, creating its folder.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or os.PathLike
        Ends in the extension of a format matplotlib writes (``.png``, ``.pdf``, ``.svg``, ...), checked
        by `check_figure_path`. The write goes through `partitions._io.atomic_open`: a reader never
        sees half a figure.
    dpi : int
        Resolution of raster formats, and of the images a vector format embeds.
    """
    path = check_figure_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as stream:
        fig.savefig(stream, format=path.suffix.lower().lstrip("."), dpi=dpi)


def require_matplotlib() -> None:
    """Raise an `ImportError` that says how to install matplotlib, when it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(
            "partitions.plot needs matplotlib, which is not installed: pip install matplotlib "
            "(or pip install 'fedsim[plot]')"
        ) from None


def _figure_formats() -> dict[str, str]:
    """Return the file formats matplotlib writes, extension -> description."""
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    return FigureCanvasBase.get_supported_filetypes()
