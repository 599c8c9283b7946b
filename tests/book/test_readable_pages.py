"""What a learner found, fixed and held: read from the built pages (issue 24, "Readable at a glance, and plain").

The intro's column glossary names the real columns; a table with a verdict column has no column headed
"pass"; a pass whose call raised, or a .grad that held nothing, is not labelled "stored"; the modules
chapter checks the layer it printed; `.detach()` is explained before code uses it; the decision guide's
tables keep shape and device; no page says "telemetry" or "auditor"; the ledger counts a chapter's
exercises apart; and no page or notebook shows a path of the machine that built it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from checks.teaching.display import RAISED_PREFIX, RECORDS_MIME

from ..chromium import built_pages
from ..helpers import embedded_records, main_text, page, tables
from ..toc import LEDGER, ROOT, toc_chapters, toc_files

CHAPTERS = toc_chapters()


def check_tables(soup: BeautifulSoup, css: str) -> list:
    return [table for table in soup.select(f"div.checks-table-box table.{css}") if "checks-ledger" not in table["class"]]


def headings(table) -> list[str]:
    return [" ".join(th.get_text().split()) for th in table.select("thead th")]


def test_the_intro_s_column_glossary_names_the_columns_of_the_real_tables(book_html: Path) -> None:
    shown = {heading for chapter in CHAPTERS for table in check_tables(page(book_html, f"{chapter}.html"), "checks-table")
             for heading in headings(table)}
    intro = page(book_html, "book/intro.html")
    glossary = next(table for table in intro.select("main table") if headings(table)[:2] == ["column", "what it is"])
    listed = {" ".join(row.select_one("td").get_text().split()) for row in glossary.select("tbody tr")}
    assert listed == shown, (listed, shown)


@pytest.mark.parametrize("name", toc_files())
def test_no_table_heads_a_column_pass_beside_its_verdict(book_html: Path, name: str) -> None:
    for table in page(book_html, f"{name}.html").select("main table"):
        names = [heading.lower() for heading in headings(table)]
        assert not ("verdict" in names and "pass" in names), (name, names)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_rows_say_how_their_value_was_observed_for_what_happened(book_html: Path, chapter: str) -> None:
    soup = page(book_html, f"{chapter}.html")
    records = {record["id"]: record for record in embedded_records(soup)}
    for row in soup.select("div.checks-table-box tbody tr[id]"):
        record = records.get(row["id"])
        how = row.select_one('[data-field="how"]')
        if record is None or how is None:
            continue
        words = how.get_text()
        if RAISED_PREFIX in record["message"]:
            assert " raised " in words and "nothing" in words and "stored in .grad" not in words, (row["id"], words)
        elif record["how"] == "stored" and record["observed_gradient"] is None:
            assert words == "read from .grad: none there", (row["id"], words)
        elif record["how"] == "stored":
            assert words == "stored in .grad", (row["id"], words)


def test_the_modules_batch_is_a_leaf_that_does_not_require_grad(book_html: Path) -> None:
    soup = page(book_html, "book/modules.html")
    printed = next(cell for cell in soup.select("div.cell") if "print(X.is_leaf, X.requires_grad, X.grad)" in
                   cell.select_one("div.cell_input").get_text())
    assert printed.select_one("div.cell_output pre").get_text().split() == ["True", "False", "None"]
    text = " ".join(main_text(soup).split())
    assert "not a leaf: requires_grad=False" not in text and "is a leaf too" in text


def test_detach_is_explained_in_prose_before_code_uses_it(book_html: Path) -> None:
    for chapter in CHAPTERS:
        soup = page(book_html, f"{chapter}.html")
        main = soup.select_one("main")
        code = [cell for cell in main.select("div.cell_input") if ".detach()" in cell.get_text()]
        if not code:
            continue
        explained = [p for p in main.select("p") if ".detach()" in p.get_text()]
        assert explained, f"{chapter} uses .detach() in code and never explains it"
        position = {id(element): number for number, element in enumerate(main.find_all(True))}
        assert position[id(explained[0])] < position[id(code[0])], f"{chapter}: .detach() is used before it is explained"
        return  # the first chapter that uses it; later ones may rely on it
    pytest.fail("no chapter uses .detach() in its code")


def test_the_decision_guide_s_check_tables_keep_shape_dtype_and_device(book_html: Path) -> None:
    rows = [row for table in tables(page(book_html, "book/decision-guide.html")) for row in table]
    assert rows and all({"shape", "dtype", "device"} <= set(row) for row in rows)


@pytest.mark.parametrize("name", toc_files())
def test_no_page_says_telemetry_or_auditor(book_html: Path, name: str) -> None:
    text = main_text(page(book_html, f"{name}.html")).lower()
    assert "telemetry" not in text and "auditor" not in text


def test_the_ledger_counts_each_chapter_s_exercises_apart(book_html: Path) -> None:
    soup = page(book_html, f"{LEDGER}.html")
    table = soup.select_one("table.checks-ledger-chapters")
    names = headings(table)
    checked = 0
    for row in table.select("tbody tr"):
        cells = dict(zip(names, (td.get_text(strip=True) for td in row.select("td"))))
        chapter = row.select_one("a")["href"].split("#")[0]
        chapter_page = page(book_html, str(Path(LEDGER).parent / chapter))
        in_exercises = [record for section in chapter_page.select("section#exercises")
                        for script in section.find_all("script", type=RECORDS_MIME) for record in json.loads(script.string)]
        assert int(cells["in its exercises' solutions"]) == len(in_exercises), chapter
        assert int(cells["in its text"]) + len(in_exercises) == int(cells["checks"]), chapter
        checked += bool(in_exercises)
    assert checked > 5
    assert "They include the checks of the chapter's exercises" in main_text(soup).replace("’", "'")


def machine_paths(book_html: Path) -> list[str]:
    """Absolute paths of the machine that built the book: the checkout, the build folder, the Python
    environment, the temporary folder and the home folder."""
    paths = {str(ROOT), str(book_html.resolve().parent.parent), sys.prefix, tempfile.gettempdir() + "/",
             os.path.expanduser("~") + "/", "/tmp/", "site-packages"}
    return sorted(path for path in paths if len(path) > 4)


def test_no_page_or_notebook_shows_a_path_of_the_machine_that_built_it(book_html: Path) -> None:
    paths = machine_paths(book_html)
    files = [book_html / name for name in built_pages(book_html)]
    files += sorted(book_html.rglob("*.ipynb")) + sorted((book_html.parent / "notebooks").rglob("*.ipynb"))
    assert any(path.suffix == ".ipynb" for path in files), "no notebook found to read"
    found = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".html":  # what the page shows, not the theme's script and link addresses
            text = BeautifulSoup(text, "html.parser").get_text()
        hits = [machine for machine in paths if machine in text]
        if hits:
            found[str(path.relative_to(book_html.parent))] = hits
    assert not found, found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_plain_number_tolerance_appears_only_in_a_chapter_s_exercises(book_html: Path, chapter: str) -> None:
    """A chapter's own checks write their tolerance's reason; the reader's plain number is for exercises."""
    soup = page(book_html, f"{chapter}.html")
    in_exercises = {record["id"] for section in soup.select("section#exercises")
                    for script in section.find_all("script", type=RECORDS_MIME) for record in json.loads(script.string)}
    plain = [record for record in embedded_records(soup) if record["tolerance"].get("plain")]
    assert all(record["id"] in in_exercises for record in plain), [record["check"] for record in plain]
    for record in plain:
        row = soup.find(id=record["id"])
        assert "plain number" in row.get_text(), record["check"]  # shown as what it is, not as rtol/atol
