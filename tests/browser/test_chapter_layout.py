"""How chapters lay out in chromium: display formulas and the gradcheck table fit their column at a phone's and
a wide screen's width, and the precision figure's text reads at caption size on a phone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..book.test_grad_none_no_gradient_in_place_pages import CHAPTERS
from ..chromium import PHONE, _open


def test_precision_figure_text_is_caption_size_on_a_phone(book_html: Path, site: str, tab) -> None:
    from urllib.parse import unquote, urlsplit

    from PIL import Image

    from checks.teaching.figures import TEXT_SIZE_KEY, recorded_text_size

    tab.set_viewport_size(PHONE)
    _open(tab, book_html, site, "book/precision.html")
    sizes = tab.evaluate("""() => {
        const image = document.querySelector('main figure img');
        const caption = document.querySelector('main figure figcaption');
        return {src: image.src, natural: image.naturalWidth, shown: image.getBoundingClientRect().width,
                right: image.getBoundingClientRect().right, caption: parseFloat(getComputedStyle(caption).fontSize)};
    }""")
    # The figure's smallest text, as the PNG records it, shown at scale shown/natural.
    with Image.open(book_html / unquote(urlsplit(sizes["src"]).path).lstrip("/")) as image:
        points, dpi = recorded_text_size(image.text[TEXT_SIZE_KEY])
    assert points * dpi / 72 * sizes["shown"] / sizes["natural"] >= sizes["caption"] - 0.5, (points, dpi, sizes)
    assert sizes["right"] <= PHONE["width"], sizes


@pytest.mark.parametrize("width", [390, 1280])
def test_finite_difference_equation_fits_its_column(book_html: Path, site: str, tab, width: int) -> None:
    tab.set_viewport_size({"width": width, "height": 900})
    _open(tab, book_html, site, "book/finite-differences.html")
    tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000)
    tab.evaluate("() => MathJax.startup.promise")
    box = tab.evaluate("""() => {
        const formula = document.querySelector('main div.math mjx-container');
        const column = formula.closest('article') || document.querySelector('main');
        return {scroll: formula.scrollWidth, client: formula.clientWidth,
                right: formula.getBoundingClientRect().right, column: column.getBoundingClientRect().right};
    }""")
    # Nothing of the formula is hidden behind a scrollbar or past the text column.
    assert box["scroll"] <= box["client"] + 1 and box["right"] <= box["column"] + 1, box


def test_gradcheck_table_fits_a_wide_screen_s_column(book_html: Path, site: str, tab) -> None:
    tab.set_viewport_size({"width": 1280, "height": 900})
    _open(tab, book_html, site, "book/finite-differences.html")
    box = tab.evaluate("""() => {
        const table = document.querySelector('table.gradcheck-table');
        return {table: table.scrollWidth, column: table.parentElement.clientWidth};
    }""")
    assert box["table"] <= box["column"] + 1, box


@pytest.mark.parametrize("width", [390, 1280])
def test_display_math_of_the_surprises_chapters_fits_the_column(book_html: Path, site: str, tab, width: int) -> None:
    tab.set_viewport_size({"width": width, "height": 900})
    formulas = 0
    for chapter in CHAPTERS:
        _open(tab, book_html, site, f"{chapter}.html")
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000)
        tab.evaluate("() => MathJax.startup.promise")
        boxes = tab.evaluate("""() => [...document.querySelectorAll('main div.math mjx-container')].map(formula => {
            const column = (formula.closest('article') || document.querySelector('main')).getBoundingClientRect();
            const box = formula.getBoundingClientRect();
            return {text: formula.closest('div.math').textContent.slice(0, 60), scroll: formula.scrollWidth,
                    client: formula.clientWidth, right: box.right, column: column.right};
        })""")
        formulas += len(boxes)
        # Nothing of a formula is hidden behind a scrollbar or past the text column.
        cut = [box for box in boxes if box["scroll"] > box["client"] + 1 or box["right"] > box["column"] + 1]
        assert not cut, f"{chapter} at {width} px: {cut}"
    assert formulas, "no display formula found to measure"


