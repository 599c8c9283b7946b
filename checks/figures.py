"""Figures a reader can read on a phone: a shared matplotlib style, and the text size each figure records.

`use()` (call it after importing pyplot, before drawing) sets a style whose smallest text stays as large as
the page's caption text when a figure shrinks to a 390 px screen, and makes every figure the notebook
shows carry, in its PNG, the size of its smallest text and its resolution (TEXT_SIZE_KEY), so the browser
tests can measure the text's rendered size on the page.
"""

from __future__ import annotations

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.text import Text

TEXT_SIZE_KEY = "checks-smallest-text"
# A panel 4.8 in wide at 100 dpi is 480 px: on a 390 px phone column (about 350 px) it shrinks to ~0.7,
# so 13 pt text (18 px) renders at ~13 px, the caption's size there. Multi-panel figures: stack panels
# (one column) rather than shrinking four of them into a phone's width.
STYLE = {
    "figure.figsize": (4.8, 3.2),
    "figure.dpi": 100,
    "font.size": 13,
    "axes.titlesize": 13,
    "axes.labelsize": 13,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.loc": "best",
    "lines.markersize": 6,
}


def smallest_text_points(figure: Figure) -> float:
    """The size, in points, of the smallest visible text drawn in the figure."""
    sizes = [text.get_fontsize() for text in figure.findobj(Text) if text.get_visible() and text.get_text().strip()]
    return min(sizes) if sizes else float("inf")


def png(figure: Figure) -> str:
    """The figure as the notebook shows it (IPython's tight PNG, base64), recording its smallest text as
    '<points> pt at <dpi> dpi'."""
    from IPython.core.pylabtools import print_figure

    return print_figure(figure, fmt="png", bbox_inches="tight", base64=True,
                        metadata={TEXT_SIZE_KEY: f"{smallest_text_points(figure):g} pt at {figure.dpi:g} dpi"})


def use() -> None:
    """Apply STYLE and have the running notebook show figures through png()."""
    mpl.rcParams.update(STYLE)
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, png)
