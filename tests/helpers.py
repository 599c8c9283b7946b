"""Reading the built HTML the way a reader sees it."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup

import checks.__main__
from checks.teaching.display import HEADINGS, RECORDS_MIME


def page(book_html: Path, name: str) -> BeautifulSoup:
    return BeautifulSoup((book_html / name).read_text(encoding="utf-8"), "html.parser")


def tables(soup: BeautifulSoup) -> list[list[dict[str, str]]]:
    """Every check table on the page as rows of {field's heading: text}, from the fields' data-field marks.

    A table folds fields into shared cells (shape · dtype · device) and under the check's name; each field
    is marked with its key, read back under its old heading (checks.teaching.display.HEADINGS). A folded vector
    reads as the whole value.
    """
    found = []
    for table in soup.select("table.checks-table:not(.checks-ledger)"):
        rows = []
        for tr in table.select("tbody tr"):
            row = {}
            for element in tr.select("[data-field]"):
                whole = element.select_one("details.checks-vector")
                if whole is not None:
                    whole = copy.copy(whole)
                    whole.summary.decompose()
                text = (whole or element).get_text()
                row[HEADINGS.get(element["data-field"], element["data-field"])] = " ".join(text.split())
            rows.append(row)
        found.append(rows)
    return found


def table_of_class(soup: BeautifulSoup, css: str) -> list[dict[str, str]]:
    """A chapter's own table (found by its class) as rows of {column heading: cell text}."""
    table = soup.select_one(f"table.{css}")
    assert table is not None, f"no table.{css} on the page"
    headings = [th.get_text(strip=True) for th in table.select("thead th")]
    return [dict(zip(headings, (td.get_text(strip=True) for td in tr.find_all(["td", "th"])))) for tr in
            table.select("tbody tr")]


def embedded_records(soup: BeautifulSoup) -> list[dict]:
    return [record for script in soup.find_all("script", type=RECORDS_MIME) for record in json.loads(script.string)]


def weak_note(soup: BeautifulSoup, row) -> tuple[str, str]:
    """A weak row's note under its table, found by the link in its verdict: (what it says, the declaration
    above its group)."""
    item = soup.select_one(row.select_one("td.checks-verdict a.checks-weak-note")["href"])
    reason = item.find_parent("ul").find_previous_sibling("p", class_="checks-weak-reason")
    return item.get_text(" ", strip=True), reason.get_text(" ", strip=True)


def main_text(soup: BeautifulSoup) -> str:
    return (soup.find("main") or soup).get_text(" ", strip=True)


def visible_code(soup: BeautifulSoup) -> str:
    """The source of every code cell a reader sees (hidden cells are not in the HTML at all)."""
    return "\n".join(cell.get_text() for cell in soup.select("div.cell_input"))


def without_exercises(soup: BeautifulSoup) -> BeautifulSoup:
    """The page without its closing Exercises section: the chapter's own tables and records only."""
    copy = BeautifulSoup(str(soup), "html.parser")
    for section in copy.select("section#exercises"):
        section.decompose()
    return copy


@dataclass(frozen=True)
class Verified:
    """What `python -m checks` answered: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def verify(html: Path) -> Verified:
    """`python -m checks html`, by the command's own main() in this process: the same answer without a new
    Python importing torch for every call (tests/sphinx/test_ledger.py runs it once as a module)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        returncode = checks.__main__.main([str(html)])
    return Verified(returncode, out.getvalue(), err.getvalue())
