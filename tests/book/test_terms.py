"""Every word the book coins is defined where it is first used, and so is every word a reader of its first
chapters needs before it is taught: read from the built pages, in the order of the table of contents.

The book's definitions live on its glossary page (book/glossary.md, Sphinx's glossary directive); a chapter
defines a word in the sentence that first uses it and marks that use with {term}`word`, which links to the
glossary entry. The test finds each word's first use in the prose of the book (code cells, their outputs and
code spans excluded: they show names, not the word) and requires that link in the same paragraph, list item
or heading. A word the book never uses (replaced by a plain one) has no first use, and is listed as such.
"""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup, Tag

from ..helpers import page
from ..toc import GLOSSARY, toc_files

# The words the book coins, and those a reader needs before they are taught (issue 24), with the pattern
# of a use in prose (the singular noun: "records" is also a verb, "to plan" another sense).
COINED = {
    "witness": r"\bwitness\b",
    "record": r"\brecord\b",
    "plan": r"\bplan\b",
    "ledger": r"\bledger\b",
    "provenance": r"\bprovenance\b",
    "allowance": r"\ballowance\b",
    "derivative scale": r"\bderivative scale\b",
    "mutant": r"\bmutants?\b",
    "tableau": r"\btableau\b",
    "stencil": r"\bstencil\b",
}
NEEDED = {
    "machine epsilon": r"\\varepsilon|ε|\bmachine epsilon\b",
    "Jacobian": r"\bJacobian\b",
    "leaf": r"\bleaf\b",
}
TERMS = {**COINED, **NEEDED}
PROSE = ("p", "li", "h1", "h2", "h3", "h4", "figcaption", "td", "th")
# Not prose: code cells and what they printed, code spans, the line saying how the page was built.
NOT_PROSE = "div.cell, pre, code, .checks-build-environment, div.checks-table-box, div.checks-failure"


def glossary_ids(book_html: Path) -> dict[str, str]:
    """term -> the id of its glossary entry (Sphinx makes it from the term's text)."""
    soup = page(book_html, f"{GLOSSARY}.html")
    return {" ".join(dt.get_text().split()).removesuffix("#").removesuffix("¶").strip(): dt["id"]
            for dt in soup.select("dl.glossary dt[id]")}


def in_output(element: Tag) -> bool:
    """Inside a code cell, its output, a check table or a failure record: not the book's prose."""
    return any(parent.name == "pre" or set(parent.get("class", [])) & {"cell", "checks-table-box", "checks-failure"}
               for parent in element.parents)


def prose_text(element: Tag) -> str:
    copy = BeautifulSoup(str(element), "html.parser")
    for hidden in copy.select(NOT_PROSE):
        hidden.decompose()
    return " ".join(copy.get_text(" ").split())


def first_uses(book_html: Path) -> dict[str, tuple[str, Tag] | None]:
    """term -> (page, the prose element of its first use), in toc order; None where the book never uses it."""
    found: dict[str, tuple[str, Tag] | None] = dict.fromkeys(TERMS)
    for name in toc_files():
        if name == GLOSSARY:
            continue
        main = page(book_html, f"{name}.html").select_one("article.bd-article")
        for element in main.find_all(PROSE):
            if in_output(element):
                continue
            text = prose_text(element)
            for term, pattern in TERMS.items():
                if found[term] is None and re.search(pattern, text, re.IGNORECASE if term != "Jacobian" else 0):
                    found[term] = (name, element)
    return found


def links_to(element: Tag, entry: str) -> bool:
    return any(a["href"].endswith(f"#{entry}") and "glossary" in a["href"] for a in element.select("a[href]"))


def test_the_glossary_defines_every_coined_and_needed_word(book_html: Path) -> None:
    ids = glossary_ids(book_html)
    soup = page(book_html, f"{GLOSSARY}.html")
    for term in TERMS:
        assert term in ids, f"the glossary has no entry {term!r}: {sorted(ids)}"
        definition = soup.select_one(f"dt#{ids[term]}").find_next_sibling("dd")
        assert definition is not None and len(definition.get_text().split()) >= 8, term


def test_each_word_is_defined_where_the_book_first_uses_it(book_html: Path) -> None:
    ids = glossary_ids(book_html)
    uses = first_uses(book_html)
    listed = {term: "never used (a plain word instead)" if use is None else
              f"{use[0]}: {prose_text(use[1])[:120]}" for term, use in uses.items()}
    undefined = {term: listed[term] for term, use in uses.items()
                 if use is not None and not links_to(use[1], ids[term])}
    assert not undefined, f"first uses without the glossary link ({{term}}`...`):\n{undefined}\nall first uses:\n{listed}"
    assert sum(use is not None for use in uses.values()) >= 8, listed
