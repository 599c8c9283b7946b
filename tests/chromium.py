"""The browser the tests read the site with: Debian's chromium driven by Playwright, and the site served locally.

One browser and one server for the whole session (tests/conftest.py registers these fixtures): Playwright's
sync API refuses a second instance while one is running. Requests to other hosts go to a proxy that refuses
every connection, so the tests run offline, and a page that asks another host for anything logs a console error
(which the tests read). Without playwright or chromium the tests skip, naming what is missing; with
CHECKS_REQUIRE_BROWSER=1 (set by .ci/run) they fail instead. CHECKS_CHROMIUM names another browser binary.
"""

from __future__ import annotations

import functools
import http.server
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    # Offline by a proxy that refuses every connection (a bound port that never listens), bypassed for the
    # local site only. Chromium applies it without asking Playwright: a route handler in Python would see
    # every request of every page, which costs about a third of each page load.
    with socket.socket() as refusing, sync_playwright() as playwright:
        refusing.bind(("127.0.0.1", 0))
        proxy = {"server": f"http://127.0.0.1:{refusing.getsockname()[1]}", "bypass": "127.0.0.1"}
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, proxy=proxy)
        yield launched
        launched.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    # Every page declares the site's icon (checks.sphinx.reader): a request of a missing /favicon.ico is a 404 here,
    # as on any server, and chromium logs it as a console error of the page that asked.
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


@pytest.fixture
def tab(browser, site: str) -> Iterator[object]:
    context = browser.new_context()
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

