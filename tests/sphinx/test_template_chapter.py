"""What CONTRIBUTING.md tells a contributor works: the template, built alone as one page, is a chapter, with
the exercises every chapter ends with; and the guide's steps are numbered in order."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..conftest import ROOT, jupyter_book
from ..helpers import embedded_records, main_text, page
from ..book.test_exercises import exercises, unanswered

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build


def test_the_template_builds_alone_with_a_pass_and_a_declared_failure(tmp_path: Path) -> None:
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "_template.md", tmp_path / "book" / "mine.md")
    result = jupyter_book("build", str(tmp_path / "book" / "mine.md"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "_page" / "book-mine" / "html"
    outcomes = sorted(item["status"] for item in ledger.load(html))
    assert outcomes.count("expected failure") >= 1 and "pass" in outcomes
    assert not ledger.problems(ledger.load(html))
    assert "We expected 12 ; backward() stored 12" in main_text(page(html, "mine.html"))
    # Ends with exercises in sphinx-exercise's gated form, each solution's checks executed and in the ledger.
    soup = page(html, "mine.html")
    assert soup.select("main section > h2")[-1].get_text(strip=True).rstrip("#") == "Exercises"
    pairs = exercises(soup)
    assert len(pairs) >= 2 and all(exercise.find_parent("section")["id"] == "exercises" for exercise, _ in pairs)
    in_ledger = {item["anchor"] for item in ledger.load(html)}
    for exercise, solution in pairs:
        records = embedded_records(solution)
        assert records and {record["id"] for record in records} <= in_ledger
        assert "dropdown" in solution["class"] and not unanswered(exercise, solution)


def test_the_template_and_the_guide_say_where_a_new_chapter_is_listed() -> None:
    template = (ROOT / "book" / "_template.md").read_text(encoding="utf-8")
    guide = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for text in (template, guide):
        assert "_toc.yml" in text and "book/intro.md" in text


def test_the_guide_numbers_its_steps_in_order() -> None:
    guide = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    steps = re.search(r"^## Write a chapter\n(.*?)(?=^## )", guide, re.MULTILINE | re.DOTALL).group(1)
    numbers = [int(number) for number in re.findall(r"^(\d+)\. ", steps, re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
