"""The symptom index (book/symptoms.md, issue 30): what a learner sees -> the section that explains it.

Every row links to an anchor that exists in the built book, and an error message quoted in a row is one the
section it links shows (in its prose, code or outputs), so a search for the message lands where it happens.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from bs4 import BeautifulSoup, Tag

from ..helpers import page
from ..toc import SYMPTOMS, toc_files

MESSAGES = "An error message"


def rows(soup: BeautifulSoup) -> list[tuple[str, Tag, Tag]]:
    """(the section's heading, the symptom cell, the explanation cell) for every row of the index."""
    found = []
    for table in soup.select("main table"):
        heading = table.find_previous(["h2", "h1"]).get_text(" ", strip=True).rstrip("#").strip()
        for tr in table.select("tbody tr"):
            symptom, explanation = tr.find_all("td")
            found.append((heading, symptom, explanation))
    return found


def target(book_html: Path, href: str) -> Tag | None:
    """The element an internal link points at, or None where the page or its id does not exist."""
    parts = urlsplit(href)
    name = str((book_html / SYMPTOMS).parent.joinpath(parts.path).resolve().relative_to(book_html.resolve()))
    if not (book_html / name).exists() or not parts.fragment:
        return None
    return page(book_html, name).find(id=parts.fragment)


def section_text(element: Tag) -> str:
    """The words of the section an anchor names (Sphinx puts a label's id on the section or on a span in it)."""
    section = element if element.name == "section" else element.find_parent("section")
    return " ".join(section.get_text(" ").split())


def test_the_index_is_in_the_toc_and_the_introduction_sends_a_learner_with_a_problem_there(book_html: Path) -> None:
    assert SYMPTOMS in toc_files()
    intro = page(book_html, "book/intro.html")
    assert intro.select_one("main a[href$='symptoms.html']"), "the introduction does not link the symptom index"


def test_every_row_links_to_an_anchor_that_exists(book_html: Path) -> None:
    found = rows(page(book_html, f"{SYMPTOMS}.html"))
    assert len(found) >= 15, f"only {len(found)} symptoms listed"
    broken = []
    for _, symptom, explanation in found:
        links = [a["href"] for a in explanation.select("a[href]") if "#" in a["href"]]
        if not links:
            broken.append(f"{symptom.get_text(strip=True)!r}: no link to a section")
        broken += [f"{symptom.get_text(strip=True)!r}: {href}" for href in links if target(book_html, href) is None]
    assert not broken, broken


def test_the_index_covers_what_learners_see(book_html: Path) -> None:
    seen = " ".join(symptom.get_text(" ", strip=True) for _, symptom, _ in rows(page(book_html, f"{SYMPTOMS}.html")))
    for symptom in ("is None", "NaN", "inf", "twice the value", "zeros",
                    "element 0 of tensors does not require grad and does not have a grad_fn",
                    "Trying to backward through the graph a second time",
                    "one of the variables needed for gradient computation has been modified by an inplace operation",
                    "grad can be implicitly created only for scalar outputs",
                    "a leaf Variable that requires grad is being used in an in-place operation",
                    "Can't call numpy() on Tensor that requires grad"):
        assert symptom in seen, symptom


def test_each_error_message_is_shown_by_the_first_section_its_row_links(book_html: Path) -> None:
    missing = []
    for heading, symptom, explanation in rows(page(book_html, f"{SYMPTOMS}.html")):
        if heading != MESSAGES:
            continue
        message = " ".join(symptom.get_text(" ", strip=True).removesuffix("(a warning)").split())
        first = target(book_html, explanation.select_one("a[href*='#']")["href"])
        if message not in section_text(first):
            missing.append(f"{message!r} is not in the section {first.get('id')}")
    assert not missing, missing
