"""On a 390 px phone (issue 30), every display formula and every table of the book's first two parts fits
the text column, or scrolls inside a box that shows it scrolls; nothing is cut.

Measured in chromium, light and dark: an element fits when its content (a formula as typeset, a table at its
natural width) lies inside the column. Otherwise the nearest box around it that scrolls sideways must hold it
within the column, carry the scroll cue itself (checks.css/reader.css: shadows painted as backgrounds, the
covering ones scrolling with the content), show that cue at its right edge before the reader scrolls, and
clip nothing vertically. The page itself never scrolls sideways.
"""

from __future__ import annotations

import json

import pytest

from ..chromium import PHONE
from ..toc import toc_files

FIRST_PARTS = toc_files()[1: toc_files().index("book/finite-differences")]

MEASURE = """() => {
    const article = document.querySelector("article.bd-article");
    // The text column: the article's content box.
    const frame = article.getBoundingClientRect(), padding = getComputedStyle(article);
    const column = {left: frame.left + parseFloat(padding.paddingLeft), right: frame.right - parseFloat(padding.paddingRight)};
    column.width = column.right - column.left;
    const scrolls = node => ["auto", "scroll"].includes(getComputedStyle(node).overflowX);
    const label = node => (node.getAttribute("aria-label") || node.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 60);
    const visible = node => node.checkVisibility() && node.getClientRects().length > 0;
    // The typeset formula's own width (mjx-math) or the table's natural width.
    const content = node => node.tagName === "TABLE" ? node : (node.querySelector("mjx-math") || node);
    const found = [];
    const blocks = [...article.querySelectorAll("div.math, table")]
        .filter(node => visible(node) && !node.closest(".dtsp-panesContainer") && !node.parentElement.closest("table"));
    for (const node of blocks) {
        const inner = content(node).getBoundingClientRect();
        const item = {kind: node.tagName === "TABLE" ? "table" : "math", text: label(node),
                      width: Math.round(inner.width), column: Math.round(column.width)};
        let scroller = null;
        for (let up = content(node); up && up !== article; up = up.parentElement) {
            if (scrolls(up) && up.scrollWidth > up.clientWidth + 1) { scroller = up; break; }
        }
        item.fits = !scroller && inner.left >= column.left - 0.5 && inner.right <= column.right + 0.5;
        if (scroller) {
            const box = scroller.getBoundingClientRect();
            const style = getComputedStyle(scroller);
            item.scroller = scroller.tagName.toLowerCase() + "." + [...scroller.classList].join(".");
            item.inColumn = box.left >= column.left - 0.5 && box.right <= column.right + 0.5;
            item.cue = (style.backgroundImage.match(/gradient/g) || []).length >= 2
                && style.backgroundAttachment.includes("scroll") && style.backgroundAttachment.includes("local");
            item.clippedVertically = scroller.scrollHeight > scroller.clientHeight + 1
                && ["hidden", "clip"].includes(style.overflowY);
            scroller.scrollLeft = 0;
            // Scrolled back to its start, the content begins inside the box: nothing sticks out to the left,
            // out of reach of scrolling (a centred formula wider than its box would).
            item.cutLeft = content(node).getBoundingClientRect().left < scroller.getBoundingClientRect().left - 0.5;
            scroller.dataset.cueProbe = String(found.length);
            item.probe = found.length;
        }
        found.push(item);
    }
    return {found, pageWidth: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth};
}"""


def _cue_contrast(tab, probe: int) -> float:
    """How much the scroll cue changes the right edge of a scrolling box before the reader scrolls: the right
    6 px strip screenshotted as shown and with the box's backgrounds removed, the largest difference of a
    pixel's grey level (0-255). A cue hidden under opaque content, or painted on another box, changes nothing."""
    from io import BytesIO

    from PIL import Image, ImageChops

    box = tab.evaluate(f"""() => {{
        const node = document.querySelector('[data-cue-probe="{probe}"]');
        node.scrollIntoView({{block: "center"}});
        const r = node.getBoundingClientRect();
        return {{x: r.right - 6, y: Math.max(0, r.top), width: 6, height: Math.min(r.height, 300)}};
    }}""")
    shown = Image.open(BytesIO(tab.screenshot(clip=box))).convert("L")
    tab.evaluate(f"() => document.querySelector('[data-cue-probe=\"{probe}\"]').style.backgroundImage = 'none'")
    bare = Image.open(BytesIO(tab.screenshot(clip=box))).convert("L")
    tab.evaluate(f"() => document.querySelector('[data-cue-probe=\"{probe}\"]').style.backgroundImage = ''")
    return float(ImageChops.difference(shown, bare).getextrema()[1])


@pytest.fixture(scope="module")
def phone_views(browser, site: str) -> dict[tuple[str, str], dict]:
    measured = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport=PHONE, color_scheme=scheme, is_mobile=True, has_touch=True)
        tab = context.new_page()
        for name in FIRST_PARTS:
            tab.goto(site + f"{name}.html", wait_until="load")
            tab.wait_for_function("() => !document.querySelector('div.math') || (window.MathJax && MathJax.startup"
                                  " && MathJax.startup.promise)", timeout=15_000)
            tab.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
            view = tab.evaluate(MEASURE)
            for item in view["found"]:
                if "probe" in item:
                    item["edge"] = _cue_contrast(tab, item["probe"])
            measured[name, scheme] = view
        context.close()
    return measured


def test_every_formula_and_table_fits_or_scrolls_with_a_cue(phone_views) -> None:
    problems = {}
    counted = {"math": 0, "table": 0, "scrolls": 0}
    for (name, scheme), view in phone_views.items():
        for item in view["found"]:
            counted[item["kind"]] += 1
            if item["fits"]:
                continue
            counted["scrolls"] += 1
            wrong = [why for why, bad in (("not a scrolling box inside the column", not item.get("inColumn")),
                                          ("no scroll cue on the box that scrolls", not item.get("cue")),
                                          ("cut at the top or bottom", item.get("clippedVertically")),
                                          ("cut at the left, out of reach of scrolling", item.get("cutLeft")),
                                          ("no visible shadow at the right edge before scrolling", item.get("edge", 0) < 24))
                     if bad]
            if wrong:
                problems.setdefault(f"{name} ({scheme})", []).append({**item, "problems": wrong})
        if view["pageWidth"] > view["viewport"]:
            problems.setdefault(f"{name} ({scheme})", []).append("the page scrolls sideways")
    assert counted["math"] > 10 and counted["table"] > 10, counted
    assert not problems, json.dumps(problems, indent=1)
