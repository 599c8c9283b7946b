"""Pictures of the real autograd graph (issue 30): drawn at build time by torchviz's make_dot as SVG, in cells a
reader can paste, on pages of the book's first two parts.
"""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup

from ..helpers import page
from ..toc import toc_files

# The pages of the first two parts that draw a graph, and the nodes each drawing must show.
DRAWN = {
    "book/small-function": [{"MulBackward0": 1, "AccumulateGrad": 1}],
    "book/backward-functions": [{"MulBackward0": 1, "SinBackward0": 1, "AccumulateGrad": 1}],
    "book/grad-is-none": [{"PowBackward0": 2, "AccumulateGrad": 1}],
    "book/debugging": [{"PowBackward0": 1, "AccumulateGrad": 1}, {"NegBackward0": 1, "AccumulateGrad": 1},
                       {"MulBackward0": 3, "AccumulateGrad": 1}, {"MulBackward0": 4, "SumBackward0": 1}],
}


def graphs(book_html: Path, name: str) -> list[tuple[str, str]]:
    """(the cell's code, the SVG text) of every graph picture a code cell of the page shows."""
    soup = page(book_html, f"{name}.html")
    found = []
    for image in soup.select("div.cell div.cell_output img[src$='.svg']"):
        cell = image.find_parent("div", class_="cell")
        svg = (book_html / name).parent.joinpath(image["src"]).read_text(encoding="utf-8")
        found.append((cell.select_one("div.cell_input").get_text(), svg))
    return found


def nodes(svg: str) -> list[str]:
    """The node labels of a graphviz SVG (each node is a <g class="node"> with its label in <text>)."""
    soup = BeautifulSoup(svg, "html.parser")
    return [" ".join(text.get_text() for text in node.find_all("text")).strip() for node in soup.select("g.node")]


def test_the_pages_draw_the_graphs_autograd_recorded(book_html: Path) -> None:
    first_parts = toc_files()[: toc_files().index("book/finite-differences")]
    assert all(name in first_parts for name in DRAWN)
    for name, expected in DRAWN.items():
        drawn = graphs(book_html, name)
        assert len(drawn) == len(expected), (name, len(drawn))
        for (code, svg), counts in zip(drawn, expected):
            assert "make_dot(" in code, f"{name}: the graph is not drawn by a visible make_dot call"
            assert svg.lstrip().startswith("<?xml") and "<svg" in svg, f"{name}: not an SVG"
            labels = nodes(svg)
            for label, count in counts.items():
                assert sum(found == label for found in labels) == count, (name, label, labels)
            # The leaf is named by params={"x": x}, with its shape.
            assert any(re.fullmatch(r"x\s*\(.*\)", found) for found in labels), (name, labels)


def test_graph_is_defined_where_the_book_first_uses_the_word(book_html: Path) -> None:
    first = toc_files()[1]
    paragraph = next(p for p in page(book_html, f"{first}.html").select("main p") if re.search(r"\bgraph\b", p.get_text()))
    assert re.search(r"records a graph, one node for each operation", " ".join(paragraph.get_text().split()))


def test_every_graph_picture_has_a_description(book_html: Path) -> None:
    for name in DRAWN:
        for image in page(book_html, f"{name}.html").select("div.cell_output img[src$='.svg']"):
            assert "make_dot" in image.get("alt", "") and "graph" in image["alt"], (name, image.get("alt"))
