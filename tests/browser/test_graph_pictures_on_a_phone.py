"""The graph pictures on a phone (issue 30): drawn as SVG, their text stays legible at 390 px."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup

from ..book.test_graph_pictures import DRAWN
from ..chromium import PHONE


def test_a_graph_s_text_is_at_least_12_px_on_a_phone(browser, site: str, book_html: Path) -> None:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    tab = context.new_page()
    sizes = {}
    for name in DRAWN:
        tab.goto(site + f"{name}.html", wait_until="load")
        for image in tab.evaluate("""() => [...document.querySelectorAll("article.bd-article div.cell_output img")]
                .filter(image => image.src.endsWith(".svg") && image.checkVisibility())
                .map(image => ({src: image.getAttribute("src"), width: image.getBoundingClientRect().width,
                                right: image.getBoundingClientRect().right,
                                column: document.querySelector("article.bd-article").getBoundingClientRect().right}))"""):
            svg = BeautifulSoup((book_html / name).parent.joinpath(image["src"]).read_text(encoding="utf-8"), "html.parser")
            view_width = float(svg.svg["viewbox"].split()[2])
            smallest = min(float(text["font-size"]) for text in svg.find_all("text"))
            sizes[f"{name}: {image['src']}"] = smallest * image["width"] / view_width
            assert image["right"] <= image["column"] + 0.5, (name, image)
    context.close()
    # Every graph (the one inside a folded solution may count as hidden).
    assert len(sizes) >= sum(len(expected) for expected in DRAWN.values()) - 1, sizes
    small = {key: round(size, 1) for key, size in sizes.items() if size < 12}
    assert not small, small
