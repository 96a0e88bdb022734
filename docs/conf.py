"""Sphinx configuration of fedsim's site: ``make docs`` builds it into ``docs/_build/html``, offline.

Sphinx rather than MkDocs, as PyTorch, torchvision, scikit-learn and Flower have it: fedsim's
docstrings are numpydoc, which Sphinx renders as they are written; its nitpicky mode fails the
build on a reference that resolves to nothing, in a docstring or a page; and sphinx-gallery runs
the gallery's scripts and draws their figures as scikit-learn's and torchvision's galleries do.
Pages are Markdown (MyST), so that the README's and the pages' code blocks are written, read on
GitHub and tested alike. Warnings are errors (``-W`` in the Makefile), so a renamed function, a
public name without a docstring or a page outside the contents fails the build, not a reader.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent / "_ext")]

project = "fedsim"
author = "the fedsim developers"
copyright = "the fedsim developers"  # noqa: A001 (Sphinx's name)
release = version = __import__("fedsim").__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "fedsim_reference",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "gallery_src", "gallery/*.md5", "gallery/*.ipynb", "gallery/*.py", "gallery/*.zip"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = f"fedsim {release}"
html_static_path = ["_static"]
html_favicon = "_static/favicon.png"  # a browser asks for one: without it, every page logs a 404

# Every name a page or docstring refers to must resolve; names of other projects cannot be linked
# offline (no intersphinx inventory can be fetched), so they are the only ones let through.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|torch|nn|scipy|flwr|datasets|matplotlib|argparse|pathlib|os|collections|typing|"
               r"concurrent|dataclasses|enum|io|abc)\..*"),
    (r"py:.*", r"(Path|Mapping|Sequence|Iterable|Iterator|Callable|Any|Optional|Union|Literal|Tensor|Module|"
               r"ndarray|Figure|Axes|Dataset|Partitioner|ArrayRecord|Message|Context|RecordDict|MetricRecord|"
               r"ConfigRecord|Grid|Optimizer|Generator|Self)"),
    (r"py:class", r"(int|float|str|bool|dict|list|tuple|None|object|type|bytes|callable|optional|array-like|"
                  r"default|of|or|\.\.\.)"),
]

# A docstring's `name` is a cross-reference (numpydoc's convention): to the reference where it is
# documented, shown as code where it exists undocumented (`fedsim_reference`), an error otherwise.
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# A public name without a docstring fails the build (GL08), as a broken cross-reference does.
numpydoc_validation_checks = {"GL08"}

sphinx_gallery_conf = {
    "examples_dirs": ["gallery_src"],
    "gallery_dirs": ["gallery"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("gallery_figures.returned_figures", "matplotlib"),
    "matplotlib_animations": False,
    "plot_gallery": "True",
}
