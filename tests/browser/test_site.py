"""The built site in a real headless browser (Debian's chromium, driven by Playwright's Python package).

The site is served over HTTP from a local thread: the search page fetches its index, which a file:// page
cannot. Requests to other hosts are refused (tests/chromium.py), so the tests run offline and see only what this
site does (MathJax included: the site serves its own copy). Without playwright or chromium the tests skip,
naming what is missing; with CHECKS_REQUIRE_BROWSER=1 (set by .ci/run) they fail instead. CHECKS_CHROMIUM names another browser binary.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

from ..chromium import PHONE, _open, built_pages
from ..helpers import embedded_records
from ..helpers import page as read_page
from ..toc import LEDGER, toc_chapters, toc_files, toc_part


@dataclass(frozen=True)
class Visit:
    """One built page as a default tab met it: what the page-level tests below read."""

    problems: list[str]  # console errors and uncaught exceptions until its images were decoded
    undecoded: list[str]  # images that do not decode
    links: list[str]  # every link's absolute href
    code_cells: int
    copy_buttons: int  # in those code cells
    untypeset: list[str] | None  # formulas MathJax left alone (None: the page has no formula)


DECODE_JS = """() => Promise.all([...document.images].map(image => {
    image.loading = "eager";
    return image.decode().then(() => null, () => null).then(() => image.naturalWidth > 0 ? null : image.src);
}))"""


@pytest.fixture(scope="module")
def visits(browser, site: str, book_html: Path) -> dict[str, Visit]:
    """Every built page opened once, in the order of built_pages, instead of once per test that reads it."""
    from playwright.sync_api import TimeoutError as Timeout

    context = browser.new_context()
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda message: message.type == "error" and problems.append(message.text))
    tab.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    visited = {}
    for name in built_pages(book_html):
        problems.clear()
        _open(tab, book_html, site, name)
        undecoded = [src for src in tab.evaluate(DECODE_JS) if src]
        seen = list(problems)
        links = tab.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
        cells = tab.locator("div.cell_input div.highlight").count()
        buttons = tab.locator("div.cell_input div.highlight button.copybtn").count()
        untypeset = None
        if 'class="math' in (book_html / name).read_text(encoding="utf-8"):
            try:
                tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                      timeout=15_000)
            except Timeout:
                untypeset = ["MathJax never started: its script did not load"]
            else:
                tab.evaluate("() => MathJax.startup.promise")
                untypeset = tab.evaluate("""() => [...document.querySelectorAll('main .math')]
                    .filter(node => !node.querySelector('mjx-container')).map(node => node.textContent.slice(0, 60))""")
        visited[name] = Visit(seen, undecoded, links, cells, buttons, untypeset)
    context.close()
    return visited


def test_every_page_loads_without_console_errors_and_its_images_decode(visits: dict[str, Visit]) -> None:
    problems = {}
    for name, visit in visits.items():
        found = visit.problems + [f"image does not decode: {src}" for src in visit.undecoded]
        if found:
            problems[name] = found
    assert not problems, json.dumps(problems, indent=1)


def test_every_formula_is_typeset_offline(visits: dict[str, Visit]) -> None:
    pages = [name for name, visit in visits.items() if visit.untypeset is not None]
    assert "book/how-good-is-a-check.html" in pages
    untypeset = {name: visits[name].untypeset for name in pages if visits[name].untypeset}
    assert not untypeset, json.dumps(untypeset, indent=1)


def test_the_browser_reaches_no_other_host(site: str, tab) -> None:
    tab.goto(site + "search.html", wait_until="load")
    answers = [tab.evaluate("url => fetch(url, {mode: 'no-cors'}).then(() => 'answered', () => 'refused')", url)
               for url in ("https://example.com/", "http://93.184.216.34/", site)]
    assert answers == ["refused", "refused", "answered"]


def test_no_page_loads_a_script_or_stylesheet_from_another_host(book_html: Path) -> None:
    remote = {}
    for name in built_pages(book_html):
        soup = read_page(book_html, name)
        sources = [tag.get("src") for tag in soup.find_all("script")] + \
                  [tag.get("href") for tag in soup.find_all("link", rel="stylesheet")]
        found = [source for source in sources if source and urlsplit(source).netloc]
        if found:
            remote[name] = found
    assert not remote, json.dumps(remote, indent=1)


@functools.cache
def _ids(path: Path) -> frozenset[str]:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return frozenset(tag["id"] for tag in soup.find_all(id=True))


def test_every_internal_link_resolves(book_html: Path, site: str, visits: dict[str, Visit]) -> None:
    broken = {}
    for name, visit in visits.items():
        for href in visit.links:
            if not href.startswith(site):
                continue
            parts = urlsplit(href)
            target = book_html / unquote(parts.path).lstrip("/")
            target = target / "index.html" if target.is_dir() else target
            if not target.is_file():
                broken.setdefault(name, []).append(f"{href}: no such file")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _ids(target):
                broken.setdefault(name, []).append(f"{href}: no element with that id")
    assert not broken, json.dumps(broken, indent=1)


def test_search_finds_autograd_grad(site: str, tab) -> None:
    tab.goto(site + "search.html?q=autograd.grad", wait_until="load")
    tab.wait_for_selector("#search-results ul.search li a", timeout=30_000)
    results = tab.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.href)")
    chapters = [href for href in results if "/book/" in href]
    assert chapters, results
    # Among the first chapters found, one whose text says it (the index also matches autograd and grad apart).
    found = []
    for href in chapters[:5]:
        tab.goto(href.split("?")[0])
        found.append("autograd.grad" in tab.inner_text("main"))
    assert any(found), chapters[:5]
    assert not tab.problems, tab.problems


def _luminance(css_colour: str) -> float:
    """Relative luminance (WCAG) of an 'rgb(r, g, b)' or 'rgba(...)' colour."""
    channels = [float(part) / 255 for part in css_colour[css_colour.index("(") + 1:-1].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(foreground: str, background: str) -> float:
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_plots_fit_a_phone_screen(browser, site: str) -> None:
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    tab = context.new_page()
    seen = 0
    for name in toc_files():
        tab.goto(site + f"{name}.html", wait_until="load")
        # The article's images: the launch menu's icons (.bd-content, outside the article) stay hidden until it opens.
        for image in tab.query_selector_all(".bd-article img"):
            box = image.bounding_box()
            seen += 1
            assert box and box["width"] > 0 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 0.5, (name, box)
        # The page itself never scrolls sideways; wide tables scroll inside their own box.
        assert tab.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], name
    context.close()
    assert seen, "no image found on any chapter page"


def test_every_code_cell_gets_a_copy_button(visits: dict[str, Visit]) -> None:
    for name in toc_chapters():
        visit = visits[f"{name}.html"]
        assert visit.code_cells, name
        assert visit.copy_buttons == visit.code_cells, name


def test_the_ledger_json_download_holds_every_chapters_checks(book_html: Path, site: str, tab) -> None:
    response = tab.goto(site + f"{LEDGER}.html", wait_until="load")
    assert response and response.ok, f"{LEDGER}.html does not load"
    link = tab.locator("a[href$='ledger.json']").first
    assert link.count(), "the ledger page has no link to ledger.json"
    if link.get_attribute("download") is not None:
        with tab.expect_download() as download:
            link.click()
        text = Path(download.value.path()).read_text(encoding="utf-8")
    else:
        answer = tab.request.get(link.evaluate("a => a.href"))
        assert answer.ok, answer.status
        text = answer.text()
    records = json.loads(text)["checks"]
    assert isinstance(records, list) and records
    assert all({"id", "check", "function", "how", "dtype", "device", "verdict"} <= record.keys() for record in records)
    ids = {record["id"] for record in records}
    missing = [chapter for chapter in toc_chapters()
               if not {record["id"] for record in embedded_records(read_page(book_html, f"{chapter}.html"))} & ids]
    assert not missing, f"chapters whose checks are not in ledger.json: {missing}"
    assert not tab.problems, tab.problems


# --- What a reader sees: every page at two widths and in both themes, measured once and photographed. ---

WIDE = {"width": 1280, "height": 900}
VIEWS = {"1280": WIDE, "390": PHONE}
THEMES = ("light", "dark")
CONTRAST = 4.5  # WCAG AA for body text

# One pass over a page: the verdict cells against the viewport and their scrolling box, each table against
# the text column (a table wider than it must scroll in its own box, with a cue and a first column that
# stays), the contrast of every piece of text in a table on its alpha-composited background, and each
# figure's rendered width beside the caption text size.
MEASURE_JS = """() => {
    const parse = colour => {
        const parts = colour.match(/rgba?\\(([^)]*)\\)/)[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
    const background = element => {
        const chain = [];
        for (let node = element; node; node = node.parentElement) chain.push(parse(getComputedStyle(node).backgroundColor));
        return chain.reverse().reduce((below, layer) => over(layer, below), [255, 255, 255, 1]);
    };
    const luminance = c => {
        const linear = c.slice(0, 3).map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
    };
    const contrast = (a, b) => {
        const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
        return (light + 0.05) / (dark + 0.05);
    };
    const visible = element => element.checkVisibility() && element.getClientRects().length > 0;
    const label = element => (element.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 50);
    const scrollsX = node => ["auto", "scroll"].includes(getComputedStyle(node).overflowX);
    const column = document.querySelector("article.bd-article").getBoundingClientRect();
    const viewport = document.documentElement.clientWidth;
    // Inside the viewport and every box around it that scrolls or clips.
    const within = element => {
        const box = element.getBoundingClientRect();
        let inside = box.left >= -0.5 && box.right <= viewport + 0.5;
        for (let node = element.parentElement; node && inside; node = node.parentElement) {
            if (!scrollsX(node) && getComputedStyle(node).overflowX !== "hidden") continue;
            const frame = node.getBoundingClientRect();
            inside = box.left >= frame.left - 0.5 && box.right <= frame.right + 0.5;
        }
        return inside;
    };
    // The ledger's filter panes are lists inside DataTables' controls, not tables of results.
    const tables = [...document.querySelectorAll("article.bd-article table")]
        .filter(table => visible(table) && !table.closest(".dtsp-panesContainer"));

    const verdicts = [];
    for (const table of tables) {
        const headings = [...table.querySelectorAll("thead th")].map(th => th.textContent.trim().toLowerCase());
        const at = headings.findIndex(text => text === "verdict" || text === "outcome");
        const cells = [...table.querySelectorAll("tbody > tr")].map(tr => tr.querySelector("td.checks-verdict") ||
            (at >= 0 ? tr.children[at] : null)).filter(cell => cell && visible(cell));
        for (const cell of cells) verdicts.push({text: label(cell), inside: within(cell)});
    }

    const overflowing = [];
    for (const table of tables) {
        let scroller = null;
        for (let node = table; node && node !== document.querySelector("article.bd-article"); node = node.parentElement) {
            if (scrollsX(node) && node.scrollWidth > node.clientWidth + 1) { scroller = node; break; }
        }
        const box = (scroller || table).getBoundingClientRect();
        const problem = [];
        if (box.right > column.right + 1 || box.left < column.left - 1) problem.push("wider than the text column");
        if (scroller) {
            if (!getComputedStyle(scroller).backgroundImage.includes("gradient")) problem.push("scrolls without a cue");
            const first = table.querySelector("tbody > tr > :first-child");
            if (first && getComputedStyle(first).position !== "sticky") problem.push("its first column scrolls away");
        }
        if (problem.length) overflowing.push({table: label(table.querySelector("tr") || table), problem});
    }

    const text = [];
    const boxes = [...tables, ...document.querySelectorAll("article.bd-article :is(div.checks-failure, div.checks-weak-notes, div.checks-ledger-summary, details.checks-tolerances)")];
    for (const box of boxes) {
        for (const element of [box, ...box.querySelectorAll("*")]) {
            if (![...element.childNodes].some(node => node.nodeType === 3 && node.textContent.trim()) || !visible(element)) continue;
            const back = background(element);
            const ratio = contrast(over(parse(getComputedStyle(element).color), back), back);
            text.push({text: label(element), ratio, size: parseFloat(getComputedStyle(element).fontSize)});
        }
        // Text a stylesheet adds (a card's column heading) is read too.
        for (const element of box.querySelectorAll("td")) {
            const before = getComputedStyle(element, "::before");
            if (!visible(element) || !before.content || before.content === "none" || before.content === "normal") continue;
            const back = background(element);
            text.push({text: "label " + before.content, size: parseFloat(before.fontSize),
                       ratio: contrast(over(parse(before.color), back), back)});
        }
    }

    // Every cell of every check table (the box a table lays itself out in: checks.teaching.display.table_box),
    // by what it holds.
    const kinds = {"checks-verdict": "verdict", "checks-analytical_gradient": "expected", "checks-observed_gradient": "observed"};
    const cells = [];
    for (const table of document.querySelectorAll("article.bd-article div.checks-table-box table")) {
        if (table.closest(".dtsp-panesContainer") || !visible(table)) continue;
        for (const cell of table.querySelectorAll("tbody > tr > td")) {
            if (!visible(cell)) continue;
            const kind = Object.entries(kinds).find(([css]) => cell.classList.contains(css));
            cells.push({kind: kind ? kind[1] : "other", table: table.className, text: label(cell), inside: within(cell)});
        }
    }
    // A failed check's code keeps its lines (Python's indentation) and scrolls inside its block if need be.
    const code = [...document.querySelectorAll("article.bd-article div.checks-failure pre.checks-code")].filter(visible)
        .map(pre => ({text: label(pre), whiteSpace: getComputedStyle(pre).whiteSpace, inside: within(pre),
                      scrolls: scrollsX(pre)}));
    // The longest line of each block of code a reader sees (cells, listings, included files; not outputs or
    // a failure record's code) that scrolls sideways in its block.
    const codeCells = [...document.querySelectorAll("article.bd-article div.highlight pre")]
        .filter(pre => visible(pre) && !pre.closest("div.cell_output, div.checks-failure"));
    const wideCode = codeCells.filter(pre => pre.scrollWidth > pre.clientWidth + 1)
        .map(pre => pre.textContent.split("\\n").reduce((a, b) => a.length >= b.length ? a : b));
    // Display mathematics stays inside the viewport: a long equation scrolls in its own block.
    const math = [...document.querySelectorAll("article.bd-article mjx-container[display='true']")].filter(visible)
        .map(node => ({text: (node.getAttribute("aria-label") || label(node)).slice(0, 60), inside: within(node)}));

    const caption = document.querySelector("article.bd-article figcaption") || document.querySelector("article.bd-article p");
    // Matplotlib's figures (PNG, with their text size recorded); the SVG pictures of autograd graphs are measured
    // by tests/book/test_graph_pictures.py.
    const figures = [...document.querySelectorAll(".bd-content figure img, .bd-content div.cell_output img")]
        .filter(image => visible(image) && !image.src.endsWith(".svg")).map(image => ({
            src: image.src, rendered: image.getBoundingClientRect().width, natural: image.naturalWidth,
            caption: parseFloat(getComputedStyle(image.closest("figure")?.querySelector("figcaption") || caption).fontSize),
        }));

    return {verdicts, overflowing, text, figures, cells, code, codeCells: codeCells.length, wideCode, math,
            pageWidth: document.documentElement.scrollWidth, viewport,
            screens: document.documentElement.scrollHeight / window.innerHeight};
}"""


# What a reader's eye needs in each theme, read in the wide view: the theme and page background, each plot's
# background (the first opaque one around it) and filter, each verdict cell's colour on its background.
LEGIBLE_JS = """() => {
    const background = element => {
        for (let node = element; node; node = node.parentElement) {
            const colour = getComputedStyle(node).backgroundColor;
            if (colour !== "transparent" && !colour.startsWith("rgba(0, 0, 0, 0)")) return colour;
        }
        return "rgb(255, 255, 255)";
    };
    return {
        theme: document.documentElement.dataset.theme,
        page: getComputedStyle(document.body).backgroundColor,
        images: [...document.querySelectorAll(".bd-content figure img, .bd-content div.cell_output img")]
            .map(image => ({background: background(image), filter: getComputedStyle(image).filter})),
        verdicts: [...document.querySelectorAll("table.checks-table td.checks-verdict")]
            .map(cell => ({colour: getComputedStyle(cell).color, background: background(cell)})),
    };
}"""


def _shot_name(name: str, width: str, theme: str) -> str:
    return f"{name.replace('/', '-')}-{width}-{theme}.png"


@pytest.fixture(scope="session")
def views(browser, site: str, book_html: Path) -> dict[tuple[str, str, str], dict]:
    """Every page of the toc measured at 1280 and 390 px, light and dark (at 1280 also what legibility in each
    theme needs, LEGIBLE_JS); screenshots in _build/screenshots.

    The ledger is measured after its table library has set it up (its filters and paging are what a
    reader meets).
    """
    shots = book_html.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    measured = {}
    for width, viewport in VIEWS.items():
        for theme in THEMES:
            phone = viewport is PHONE
            context = browser.new_context(viewport=viewport, color_scheme=theme, is_mobile=phone, has_touch=phone)
            tab = context.new_page()
            for name in toc_files():
                tab.goto(site + f"{name}.html", wait_until="load")
                if name == LEDGER:
                    tab.wait_for_selector("div.checks-ledger-table .dt-container", timeout=15_000)
                if 'class="math' in (book_html / f"{name}.html").read_text(encoding="utf-8"):
                    # Formulas are measured as typeset (test_every_formula_is_typeset_offline checks it happens).
                    tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                          timeout=15_000)
                    tab.evaluate("() => MathJax.startup.promise")
                assert tab.evaluate("document.documentElement.dataset.theme") == theme, (name, theme)
                measured[name, width, theme] = tab.evaluate(MEASURE_JS)
                if viewport is WIDE:
                    measured[name, width, theme]["legible"] = tab.evaluate(LEGIBLE_JS)
                tab.screenshot(path=shots / _shot_name(name, width, theme), full_page=True)
            context.close()
    return measured


def test_screenshots_of_every_page_at_both_widths_and_themes(views, book_html: Path) -> None:
    shots = book_html.parent / "screenshots"
    missing = [_shot_name(*key) for key in views if not (shots / _shot_name(*key)).stat().st_size]
    assert len(views) == len(toc_files()) * len(VIEWS) * len(THEMES) and not missing, missing


@pytest.mark.parametrize("scheme", THEMES)
def test_plots_and_check_tables_are_legible_in_both_themes(views, scheme: str) -> None:
    images = tables = 0
    for name in toc_chapters():
        found = views[name, "1280", scheme]["legible"]
        assert found["theme"] == scheme, name
        assert (_luminance(found["page"]) < 0.2) == (scheme == "dark"), (name, found["page"])
        for image in found["images"]:
            images += 1
            # Matplotlib's black text needs the light page it was drawn for.
            assert _luminance(image["background"]) > 0.9, (name, scheme)
            assert image["filter"] == "none", (name, scheme)
        for cell in found["verdicts"]:
            tables += 1
            assert _contrast(cell["colour"], cell["background"]) >= 4.5, (name, scheme, cell["colour"])
    assert images and tables, "no plot or check table found to test"


def test_the_verdict_of_every_check_row_is_in_view_without_scrolling_sideways(views) -> None:
    hidden = {f"{name} at {width} px, {theme}": [cell["text"] for cell in found["verdicts"] if not cell["inside"]]
              for (name, width, theme), found in views.items()}
    assert not {key: cells for key, cells in hidden.items() if cells}, json.dumps(hidden, indent=1)
    assert sum(len(found["verdicts"]) for found in views.values()) > 100, "too few verdict cells found to test"


def test_no_table_overflows_its_column_without_a_scroll_cue_and_a_fixed_first_column(views) -> None:
    problems = {f"{name} at {width} px, {theme}": found["overflowing"]
                for (name, width, theme), found in views.items() if found["overflowing"]}
    assert not problems, json.dumps(problems, indent=1)
    # The page itself never scrolls sideways.
    wide = [key for key, found in views.items() if found["pageWidth"] > found["viewport"]]
    assert not wide, wide


def test_the_text_of_every_table_and_failure_record_has_enough_contrast_in_both_themes(views) -> None:
    low = {f"{name} at {width} px, {theme}": [f"{item['text']!r}: {item['ratio']:.2f}" for item in found["text"]
                                              if item["ratio"] < CONTRAST]
           for (name, width, theme), found in views.items()}
    assert not {key: items for key, items in low.items() if items}, json.dumps(low, indent=1)
    for theme in THEMES:
        assert sum(len(found["text"]) for key, found in views.items() if key[2] == theme) > 1000, theme


SMALLEST_TEXT = 12  # px: the smallest text a check table or failure record may use, at either width


def test_on_a_phone_the_verdict_expected_and_observed_of_every_check_row_are_in_view(views) -> None:
    hidden = {}
    for (name, width, theme), found in views.items():
        if width != "390":
            continue
        out = [f"{cell['kind']}: {cell['text']}" for cell in found["cells"]
               if cell["kind"] in ("verdict", "expected", "observed") and not cell["inside"]]
        if out:
            hidden[f"{name}, {theme}"] = out
    assert not hidden, json.dumps(hidden, indent=1)
    phone = [cell for key, found in views.items() if key[1] == "390" for cell in found["cells"]]
    for kind in ("verdict", "expected", "observed"):
        assert sum(cell["kind"] == kind for cell in phone) > 100, f"too few {kind} cells measured"
    # The ledger's table and the rows under a chapter's cells are both measured.
    assert any("checks-ledger" in cell["table"] for cell in phone) and any("checks-rows" in cell["table"] for cell in phone)


def test_on_a_desktop_every_column_of_every_check_table_is_in_view(views) -> None:
    hidden = {}
    for (name, width, theme), found in views.items():
        if width != "1280":
            continue
        out = [f"{cell['kind']}: {cell['text']}" for cell in found["cells"] if not cell["inside"]]
        if out:
            hidden[f"{name}, {theme}"] = out
    assert not hidden, json.dumps(hidden, indent=1)
    assert sum(len(found["cells"]) for key, found in views.items() if key[1] == "1280") > 1000


def test_the_text_of_every_check_table_and_failure_record_is_at_least_12_px(views) -> None:
    small = {f"{name} at {width} px, {theme}": sorted({f"{item['text']!r}: {item['size']:.1f} px" for item in found["text"]
                                                       if item["size"] < SMALLEST_TEXT})
             for (name, width, theme), found in views.items()}
    assert not {key: items for key, items in small.items() if items}, json.dumps(small, indent=1)
    assert any(item["text"].startswith("label ") for found in views.values() for item in found["text"])


def test_a_failed_check_s_code_keeps_its_indentation_on_a_phone(views) -> None:
    blocks = [(key, block) for key, found in views.items() for block in found["code"]]
    assert any(key[1] == "390" for key, _ in blocks), "no failure record's code measured on a phone"
    wrong = [f"{key}: {block['text']!r} ({block['whiteSpace']}, inside: {block['inside']})" for key, block in blocks
             if block["whiteSpace"] != "pre" or not block["inside"] or not block["scrolls"]]
    assert not wrong, json.dumps(wrong, indent=1)


def test_on_a_desktop_every_line_of_visible_code_is_in_view(views) -> None:
    """Code the reader is meant to read and paste is read without scrolling sideways at 1280 px. (On a phone
    a code block scrolls inside itself; the page does not: see the test above on tables.)"""
    wide = {f"{name}, {theme}": found["wideCode"] for (name, width, theme), found in views.items()
            if width == "1280" and found["wideCode"]}
    assert not wide, json.dumps(wide, indent=1, ensure_ascii=False)
    assert sum(found["codeCells"] for key, found in views.items() if key[1] == "1280") > 200, "too few code cells measured"


# A learner reads the first two parts straight through: no page of them is longer than this many screens
# of the wide view (1280 × 900).
SCREENS = 12


def test_no_page_of_the_first_two_parts_is_longer_than_12_screens_at_1280_px(views) -> None:
    pages = toc_part("First steps") + toc_part("When gradients surprise you")
    screens = {name: views[name, "1280", "light"]["screens"] for name in pages}
    long = {name: round(count, 1) for name, count in screens.items() if count > SCREENS}
    assert not long, f"pages over {SCREENS} screens of 1280 × 900: {long}"


def test_display_mathematics_fits_a_phone(views) -> None:
    phone = [(key, node) for key, found in views.items() if key[1] == "390" for node in found["math"]]
    assert len(phone) > 10, "too few display formulas measured"
    wide = [f"{key[0]} ({key[2]}): {node['text']!r}" for key, node in phone if not node["inside"]]
    assert not wide, json.dumps(wide, indent=1)


def _smallest_text(book_html: Path, src: str) -> tuple[float, float] | None:
    """(points, dpi) of a figure's smallest text, as checks.teaching.figures records it in the PNG; None if not."""
    from PIL import Image

    from checks.teaching.figures import TEXT_SIZE_KEY, recorded_text_size

    with Image.open(book_html / unquote(urlsplit(src).path).lstrip("/")) as image:
        recorded = getattr(image, "text", {}).get(TEXT_SIZE_KEY)
    return None if recorded is None else recorded_text_size(recorded)


def test_every_figure_s_text_is_as_large_as_the_caption_on_a_phone(views, book_html: Path) -> None:
    small = {}
    for (name, width, theme), found in views.items():
        if width != "390" or theme != "light":
            continue
        for figure in found["figures"]:
            recorded = _smallest_text(book_html, figure["src"])
            if recorded is None:
                small.setdefault(name, []).append(f"{figure['src']}: text size not recorded (draw it after "
                                                  "checks.teaching.figures.use())")
                continue
            points, dpi = recorded
            rendered = points * dpi / 72 * figure["rendered"] / figure["natural"]
            if rendered < figure["caption"] - 0.5:
                small.setdefault(name, []).append(f"{figure['src']}: text {rendered:.1f} px, caption "
                                                  f"{figure['caption']:.1f} px")
    assert sum(len(found["figures"]) for key, found in views.items() if key[1] == "390") > 0
    assert not small, json.dumps(small, indent=1)


def test_the_ledger_s_filter_narrows_its_rows_to_the_outcome_picked(browser, site: str, book_html: Path) -> None:
    # The table lists the checks; a study's runs (measurements) are tallied in a table of their own.
    entries = [item for item in json.loads((book_html / "ledger.json").read_text(encoding="utf-8"))["checks"]
               if not item["measurement"]]
    failures = sum(item["status"] == "expected failure" for item in entries)
    assert 0 < failures < len(entries)
    context = browser.new_context(viewport=WIDE)
    tab = context.new_page()
    errors = []
    tab.on("console", lambda message: message.type == "error" and errors.append(message.text))
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(site + f"{LEDGER}.html", wait_until="load")
    tab.wait_for_selector("div.checks-ledger-table .dt-container", timeout=15_000)
    shown = "() => document.querySelector('div.checks-ledger-table .dt-info').textContent"
    assert f"of {len(entries)} entries" in tab.evaluate(shown).replace(",", "")
    # Pick "expected failure" in the outcome pane: the table then counts exactly those rows, all of them.
    tab.locator("div.dtsp-searchPane").first.get_by_text("expected failure", exact=True).click()
    tab.wait_for_function(f"() => ({shown})().includes('of {failures} entries') || "
                          f"({shown})().includes('to {failures} of {failures}')", timeout=10_000)
    tab.select_option("div.checks-ledger-table select", "500")
    # The redraw for the page length comes first (slow on a loaded machine): every picked row in view.
    tab.wait_for_function(f"() => document.querySelectorAll('table.checks-ledger tbody td.checks-verdict').length"
                          f" === {failures}", timeout=30_000)
    outcomes = tab.eval_on_selector_all("table.checks-ledger tbody td.checks-verdict", "cells => cells.map(c => c.textContent)")
    assert outcomes == ["expected failure"] * failures, outcomes
    # Sorting by a column reorders the rows: by chapter, ascending.
    tab.locator("table.checks-ledger thead th", has_text="chapter").first.click()
    # DataTables redraws after the click; wait for it (a sort that never happens times out and fails).
    tab.wait_for_function("""() => {
        const cells = [...document.querySelectorAll('table.checks-ledger tbody td.checks-chapter')];
        const names = cells.map(cell => cell.textContent);
        return names.every((name, i) => i === 0 || names[i - 1].localeCompare(name) <= 0);
    }""", timeout=30_000)
    chapters = tab.eval_on_selector_all("table.checks-ledger tbody td.checks-chapter", "cells => cells.map(c => c.textContent)")
    assert chapters == sorted(chapters)
    context.close()
    assert not errors, errors
