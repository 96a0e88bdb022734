"""The gallery's figures: those `partitions.plot` returns, which pyplot does not hold.

`partitions.plot` builds each figure as a `matplotlib.figure.Figure` of its own, outside pyplot's
list of open figures (a library should not leave figures open in its caller's session), so
sphinx-gallery's own matplotlib scraper, which reads that list, sees none. This scraper saves
every new figure a script's block left in a variable; ``conf.py`` names it before the
matplotlib one, which takes (and closes) the figures a script draws with pyplot itself.
"""

from __future__ import annotations


def returned_figures(block, block_vars, gallery_conf):
    """Save each figure the block bound to a name that was not saved before; return their reST."""
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    saved = block_vars.setdefault("saved_figure_ids", set())
    figures = [value for value in block_vars["example_globals"].values()
               if isinstance(value, Figure) and value.canvas.manager is None  # pyplot's: the next scraper's
               and id(value) not in saved]
    paths = []
    for figure, path in zip(figures, block_vars["image_path_iterator"]):
        figure.savefig(path, dpi=100)
        saved.add(id(figure))
        paths.append(path)
    return figure_rst(paths, gallery_conf["src_dir"])
