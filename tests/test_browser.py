"""The built site in a real headless browser (Debian's chromium, driven by Playwright's Python package).

The site is served over HTTP from a local thread: the search page fetches its index, which a file:// page
cannot. Requests to other hosts get an empty answer, so the tests run offline and see only what this site
does (MathJax included: the site serves its own copy). Without playwright or chromium the tests skip, naming what is missing; with
CHECKS_REQUIRE_BROWSER=1 (set by .ci/run) they fail instead. CHECKS_CHROMIUM names another browser binary.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

from .helpers import embedded_records, page as read_page
from .toc import LEDGER, toc_chapters, toc_files

CHROMIUM = os.environ.get("CHECKS_CHROMIUM", "/usr/bin/chromium")
# Playwright adds --no-sandbox itself (needed as root); the rest keep chromium off the network it cannot reach.
CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PHONE = {"width": 390, "height": 844}


def _unavailable(reason: str) -> None:
    if os.environ.get("CHECKS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and CHECKS_REQUIRE_BROWSER=1 says the browser tests must run")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright's Python package is not installed (pip install -r requirements.txt)")
    if not Path(CHROMIUM).exists():
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium, or set CHECKS_CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def site(book_html: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(book_html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _offline(route) -> None:
    route.fulfill(status=200, body="", content_type="text/plain")


@pytest.fixture
def tab(browser, site: str) -> Iterator[object]:
    context = browser.new_context()
    context.route(lambda url: not url.startswith(site), _offline)
    opened = context.new_page()
    opened.problems = []
    opened.on("console", lambda message: message.type == "error" and opened.problems.append(message.text))
    opened.on("pageerror", lambda error: opened.problems.append(f"uncaught: {error}"))
    yield opened
    context.close()


def built_pages(book_html: Path) -> list[str]:
    """Every page of the build (theme templates under _static are not pages)."""
    return sorted(path.relative_to(book_html).as_posix() for path in book_html.rglob("*.html")
                  if not path.relative_to(book_html).parts[0].startswith("_"))


def _open(tab, book_html: Path, site: str, name: str) -> None:
    """Load a page; a redirecting page (index.html) is followed to the page it sends the reader to."""
    if 'http-equiv="refresh"' in (book_html / name).read_text(encoding="utf-8").lower():
        tab.goto(site + name)
        tab.wait_for_url(lambda url: url != site + name, wait_until="load")
    else:
        tab.goto(site + name, wait_until="load")


def test_every_page_loads_without_console_errors_and_its_images_decode(book_html: Path, site: str, tab) -> None:
    problems = {}
    for name in built_pages(book_html):
        tab.problems.clear()
        _open(tab, book_html, site, name)
        broken = tab.evaluate("""() => Promise.all([...document.images].map(image => {
            image.loading = "eager";
            return image.decode().then(() => null, () => null).then(() => image.naturalWidth > 0 ? null : image.src);
        }))""")
        found = tab.problems + [f"image does not decode: {src}" for src in broken if src]
        if found:
            problems[name] = found
    assert not problems, json.dumps(problems, indent=1)


def test_every_formula_is_typeset_offline(book_html: Path, site: str, tab) -> None:
    untypeset = {}
    pages = [name for name in built_pages(book_html) if 'class="math' in (book_html / name).read_text(encoding="utf-8")]
    assert "book/how-good-is-a-check.html" in pages
    from playwright.sync_api import TimeoutError as Timeout

    for name in pages:
        _open(tab, book_html, site, name)
        try:
            tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                  timeout=15_000)
        except Timeout:
            untypeset[name] = ["MathJax never started: its script did not load"]
            continue
        tab.evaluate("() => MathJax.startup.promise")
        left = tab.evaluate("""() => [...document.querySelectorAll('main .math')]
            .filter(node => !node.querySelector('mjx-container')).map(node => node.textContent.slice(0, 60))""")
        if left:
            untypeset[name] = left
    assert not untypeset, json.dumps(untypeset, indent=1)


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


def test_every_internal_link_resolves(book_html: Path, site: str, tab) -> None:
    broken = {}
    for name in built_pages(book_html):
        _open(tab, book_html, site, name)
        for href in tab.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)"):
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
    tab.goto(chapters[0].split("?")[0])
    assert "autograd.grad" in tab.inner_text("main")
    assert not tab.problems, tab.problems


def _luminance(css_colour: str) -> float:
    """Relative luminance (WCAG) of an 'rgb(r, g, b)' or 'rgba(...)' colour."""
    channels = [float(part) / 255 for part in css_colour[css_colour.index("(") + 1:-1].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(foreground: str, background: str) -> float:
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


BACKGROUND_JS = """element => {
    for (let node = element; node; node = node.parentElement) {
        const colour = getComputedStyle(node).backgroundColor;
        if (colour !== "transparent" && !colour.startsWith("rgba(0, 0, 0, 0)")) return colour;
    }
    return "rgb(255, 255, 255)";
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_plots_and_check_tables_are_legible_in_both_themes(browser, site: str, scheme: str) -> None:
    context = browser.new_context(color_scheme=scheme)
    context.route(lambda url: not url.startswith(site), _offline)
    tab = context.new_page()
    images = tables = 0
    for name in toc_chapters():
        tab.goto(site + f"{name}.html", wait_until="load")
        assert tab.evaluate("document.documentElement.dataset.theme") == scheme, name
        page_background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (_luminance(page_background) < 0.2) == (scheme == "dark"), (name, page_background)
        for image in tab.query_selector_all(".bd-content figure img, .bd-content div.cell_output img"):
            images += 1
            # Matplotlib's black text needs the light page it was drawn for.
            assert _luminance(image.evaluate(BACKGROUND_JS)) > 0.9, (name, scheme)
            assert image.evaluate("image => getComputedStyle(image).filter") == "none", (name, scheme)
        for cell in tab.query_selector_all("table.checks-table td.checks-verdict"):
            tables += 1
            colour = cell.evaluate("cell => getComputedStyle(cell).color")
            assert _contrast(colour, cell.evaluate(BACKGROUND_JS)) >= 4.5, (name, scheme, colour)
    context.close()
    assert images and tables, "no plot or check table found to test"


def test_plots_fit_a_phone_screen(browser, site: str) -> None:
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    context.route(lambda url: not url.startswith(site), _offline)
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


def test_every_code_cell_gets_a_copy_button(site: str, tab) -> None:
    for name in toc_chapters():
        tab.goto(site + f"{name}.html", wait_until="load")
        cells = tab.locator("div.cell_input div.highlight").count()
        assert cells, name
        assert tab.locator("div.cell_input div.highlight button.copybtn").count() == cells, name


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
    records = json.loads(text)
    assert isinstance(records, list) and records
    assert all({"id", "check", "function", "how", "dtype", "device", "verdict"} <= record.keys() for record in records)
    ids = {record["id"] for record in records}
    missing = [chapter for chapter in toc_chapters()
               if not {record["id"] for record in embedded_records(read_page(book_html, f"{chapter}.html"))} & ids]
    assert not missing, f"chapters whose checks are not in ledger.json: {missing}"
    assert not tab.problems, tab.problems
