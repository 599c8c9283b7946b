"""Reader features of the built pages: where the numbers came from, buttons, alt text and page weight."""

from __future__ import annotations

import platform
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import torch
import yaml

from checks.sphinx.reader import FAVICON, environment_line, insert_after_title
from checks.core.devices import available_devices

from ..helpers import page
from ..toc import ROOT, toc_files

PAGES = toc_files()
# A chapter page (its HTML and its images; the theme's CSS and JS are shared and cached) may weigh this
# much: about 10 s on a slow 3G connection (400 kbit/s). The embedded records and the tables count.
PAGE_BUDGET_BYTES = 512 * 1024
# The ledger lists every executed check (a study's runs tallied), so it grows with the book: its budget is
# that of its frame and summaries plus this much per listed check, which a heavier row would exceed.
LEDGER_ROW_BYTES = 1024


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"].rstrip("/")


def test_environment_line_names_python_torch_and_each_device() -> None:
    line = environment_line(["cpu"])
    assert f"Python {platform.python_version()}" in line
    assert f"PyTorch {torch.__version__}" in line
    assert "on cpu (" in line


def test_environment_line_goes_under_the_title() -> None:
    assert insert_after_title("<h1>T</h1><p>x</p>", "<p>E</p>") == "<h1>T</h1><p>E</p><p>x</p>"
    assert insert_after_title("<p>x</p>", "<p>E</p>") == "<p>E</p><p>x</p>"


@pytest.mark.parametrize("name", PAGES)
def test_every_page_states_the_environment_that_built_it(book_html: Path, name: str) -> None:
    lines = page(book_html, f"{name}.html").select("p.checks-build-environment")
    assert len(lines) == 1, f"{name}: {len(lines)} environment lines"
    text = lines[0].get_text()
    # The tests run under the interpreter and torch that built the book (conftest builds it from here).
    assert f"Python {platform.python_version()}" in text and f"PyTorch {torch.__version__}" in text
    assert [device for device in available_devices() if f"{device} (" in text] == available_devices()


@pytest.mark.parametrize("name", PAGES)
def test_every_page_declares_an_icon_the_site_serves(book_html: Path, name: str) -> None:
    # Without one, a browser asks the site for /favicon.ico, which it lacks: a 404 on every page.
    icons = page(book_html, f"{name}.html").select('link[rel~="icon"][href]')
    assert len(icons) == 1, f"{name}: {len(icons)} icons declared"
    served = (book_html / name).parent / urlsplit(icons[0]["href"]).path
    assert served.is_file() and served.read_bytes() == FAVICON.read_bytes(), f"{name}: the icon {icons[0]['href']} is not served"


@pytest.mark.parametrize("name", PAGES)
def test_every_page_has_repository_issue_edit_and_download_buttons(book_html: Path, name: str) -> None:
    soup = page(book_html, f"{name}.html")
    links = {a["href"] for a in soup.select(".article-header-buttons a[href]")}
    url = repository_url()
    source = next(f"{name}{suffix}" for suffix in (".md", ".ipynb") if (ROOT / f"{name}{suffix}").exists())
    assert url in links
    assert any(link.startswith(f"{url}/issues/new") for link in links), links
    assert f"{url}/edit/main/{source}" in links
    assert any(link.endswith(f"_sources/{source}") for link in links), links


@pytest.mark.parametrize("name", PAGES)
def test_every_code_cell_can_be_copied_and_every_image_has_alt_text(book_html: Path, name: str) -> None:
    soup = page(book_html, f"{name}.html")
    scripts = [script.get("src", "") for script in soup.find_all("script")]
    if soup.select("div.cell_input div.highlight pre"):
        assert any("copybutton.js" in src for src in scripts), f"{name}: sphinx-copybutton is not loaded"
    missing = [img.get("src") for img in soup.find_all("img") if not (img.get("alt") or "").strip()]
    assert not missing, f"{name}: images without alt text: {missing}"


def page_weight(book_html: Path, name: str) -> tuple[int, int]:
    """Bytes of a page's HTML and of the local images it shows (each image counted once)."""
    path = book_html / f"{name}.html"
    images = {
        (path.parent / urlsplit(img["src"]).path).resolve()
        for img in page(book_html, f"{name}.html").find_all("img", src=True)
        if not urlsplit(img["src"]).scheme and not img["src"].startswith("data:")
    }
    return path.stat().st_size, sum(image.stat().st_size for image in images)


@pytest.mark.parametrize("name", PAGES)
def test_every_page_keeps_within_its_weight_budget(book_html: Path, name: str) -> None:
    html_bytes, image_bytes = page_weight(book_html, name)
    assert html_bytes > 0
    total = html_bytes + image_bytes
    budget = PAGE_BUDGET_BYTES
    if name == "book/ledger":
        rows = len(page(book_html, f"{name}.html").select("table.checks-ledger tbody tr"))
        budget = PAGE_BUDGET_BYTES // 4 + LEDGER_ROW_BYTES * rows
    assert total <= budget, (
        f"{name} weighs {total / 1024:.0f} KiB (HTML {html_bytes / 1024:.0f} KiB + images "
        f"{image_bytes / 1024:.0f} KiB), over its budget of {budget / 1024:.0f} KiB"
    )
