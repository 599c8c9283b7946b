"""Figures a reader can read on a phone: a shared matplotlib style, and the text size each figure records.

`use()` (call it after importing pyplot, before drawing) sets a style whose smallest text stays as large as
the page's caption text when a figure shrinks to a 390 px screen, and makes every figure the notebook
shows carry, in its PNG, the size of its smallest text and its resolution (TEXT_SIZE_KEY), so the browser
tests can measure the text's rendered size on the page.
"""

from __future__ import annotations

import math

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator

TEXT_SIZE_KEY = "checks-smallest-text"
# On a 390 px phone the text column is about 342 px wide and a caption's text 16 px. A panel 3.6 in wide at
# 100 dpi (about 370 px with a tight bounding box) shrinks to ~0.92 there, so 13 pt (18 px) renders at
# ~16.7 px. Multi-panel figures: stack the panels (one column, each this size) rather than shrinking four
# of them into a phone's width. Constrained layout keeps labels and legends inside the figure.
STYLE = {
    "figure.figsize": (3.6, 2.7),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "font.size": 13,
    "axes.titlesize": 13,
    "axes.labelsize": 13,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "legend.loc": "best",
}


def log_ticks(axis: Axes, which: str = "xy", ticks: int = 5) -> None:
    """At most `ticks` decades labelled on each log axis named in `which`, written 1e-8 rather than 10⁻⁸:
    matplotlib's superscript exponent is set at 70 % of the tick size, under the caption's on a phone."""
    label = FuncFormatter(lambda value, _: f"1e{round(math.log10(value))}" if value > 0 else "")
    for name in which:
        ruler = axis.xaxis if name == "x" else axis.yaxis
        ruler.set_major_locator(LogLocator(base=10, numticks=ticks))
        ruler.set_major_formatter(label)


def smallest_text_points(figure: Figure) -> float:
    """The size, in points, of the smallest visible text drawn in the figure."""
    figure.draw_without_rendering()  # tick labels get their text only when the figure is drawn
    sizes = [text.get_fontsize() for text in figure.findobj(Text) if text.get_visible() and text.get_text().strip()]
    return min(sizes) if sizes else float("inf")


def png(figure: Figure) -> str:
    """The figure as the notebook shows it (IPython's tight PNG, base64), recording its smallest text as
    '<points> pt at <dpi> dpi'."""
    from IPython.core.pylabtools import print_figure

    return print_figure(figure, fmt="png", bbox_inches="tight", base64=True,
                        metadata={TEXT_SIZE_KEY: f"{smallest_text_points(figure):g} pt at {figure.dpi:g} dpi"})


def recorded_text_size(recorded: str) -> tuple[float, float]:
    """(points, dpi) from what png() records, '<points> pt at <dpi> dpi'."""
    points, _, _, dpi, _ = recorded.split()
    return float(points), float(dpi)


def use() -> None:
    """Apply STYLE and have the running notebook show figures through png()."""
    mpl.rcParams.update(STYLE)
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        # The inline backend registers its own PNG formatter when pyplot first resolves the backend (at the
        # first figure): resolve it now, so that this registration comes last.
        import matplotlib.pyplot as plt

        plt.close(plt.figure())
        shell.display_formatter.formatters["image/png"].for_type(Figure, png)
