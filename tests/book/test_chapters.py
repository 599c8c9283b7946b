"""Every chapter named in `_toc.yml` builds, executes and shows checks; no chapter is left out of the toc."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import embedded_records, page
from ..toc import ROOT, chapters_outside_toc, toc_chapters, toc_files

CHAPTERS = toc_chapters()


def test_the_toc_names_chapters_that_exist() -> None:
    assert CHAPTERS, "_toc.yml lists no chapters"
    missing = [name for name in toc_files() if not any((ROOT / f"{name}{suffix}").exists() for suffix in (".md", ".ipynb"))]
    assert not missing, f"_toc.yml names files that do not exist: {missing}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_toc_chapter_is_built_and_executed(book_html: Path, chapter: str) -> None:
    built = book_html / f"{chapter}.html"
    assert built.exists(), f"{chapter} is in _toc.yml but the build wrote no {built.name}"
    outputs = page(book_html, f"{chapter}.html").select("div.cell_output")
    assert outputs, f"{chapter}: no code cell output on the page, so its code was not executed"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_toc_chapter_contributes_executed_checks(book_html: Path, chapter: str) -> None:
    records = embedded_records(page(book_html, f"{chapter}.html"))
    assert records, f"{chapter} shows no check (no records embedded by checks.teaching.display.records_html)"
    assert all(record["executed"] and record["verdict"] in ("pass", "fail") for record in records)


def test_no_chapter_is_left_out_of_the_toc() -> None:
    outside = chapters_outside_toc()
    assert not outside, (
        f"chapter files not in _toc.yml (add each to its chapters list, or prefix a template with '_'): {outside}"
    )


TOC = """format: jb-book
root: book/intro
parts:
  - caption: First
    chapters:
      - file: book/one
        sections:
          - file: book/one-detail.md
  - caption: Second
    chapters:
      - file: book/two
"""


def _project(tmp_path: Path, toc: str, files: list[str]) -> Path:
    (tmp_path / "_toc.yml").write_text(toc)
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# page\n")
    return tmp_path


def test_toc_reading_follows_parts_and_sections(tmp_path: Path) -> None:
    root = _project(tmp_path, TOC, [])
    assert toc_files(root) == ["book/intro", "book/one", "book/one-detail", "book/two"]
    assert toc_chapters(root) == ["book/one", "book/one-detail", "book/two"]


def test_a_chapter_missing_from_the_toc_is_found_and_templates_are_not(tmp_path: Path) -> None:
    files = ["book/intro.md", "book/one.md", "book/one-detail.md", "book/two.ipynb", "book/stray.md",
             "book/_template.md", "book/.ipynb_checkpoints/one.md", "book/_build/x.md"]
    root = _project(tmp_path, TOC, files)
    assert chapters_outside_toc(root) == ["book/stray.md"]


def test_a_toc_without_a_root_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, "format: jb-book\nchapters: []\n", [])
    with pytest.raises(ValueError, match="no 'root:'"):
        toc_files(root)


def test_the_introduction_lists_every_chapter_in_toc_order(book_html: Path) -> None:
    # Each item's first link is its chapter (a later one may define a word, in the glossary).
    listed = [item.select_one("a") for item in page(book_html, "book/intro.html").select("section#the-chapters ol > li")]
    linked = ["book/" + a["href"].removesuffix(".html") for a in listed]
    assert linked == [name for name in toc_files() if name != "book/intro"]
