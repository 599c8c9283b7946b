"""What CONTRIBUTING.md tells a contributor works: the template, built alone as one page, is a chapter, with
the exercises every chapter ends with; and the guide's steps are numbered in order."""

from __future__ import annotations

import io
import re
import shutil
from contextlib import redirect_stdout
from pathlib import Path
from unittest.mock import patch

import pytest
import torch

import checks
import checks.teaching.records
from checks.sphinx import ledger

from ..conftest import ROOT, jupyter_book
from ..helpers import embedded_records, main_text, page
from ..book.test_exercises import exercises, unanswered
from ..book.test_plain_code import cells

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build


def test_the_template_builds_alone_with_checks_in_each_dtype_and_a_declared_failure(tmp_path: Path) -> None:
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "_template.md", tmp_path / "book" / "mine.md")
    result = jupyter_book("build", str(tmp_path / "book" / "mine.md"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "_page" / "book-mine" / "html"
    entries = ledger.load(html)
    outcomes = sorted(item["status"] for item in entries)
    assert outcomes.count("expected failure") >= 1 and "pass" in outcomes
    # checks.each_cell re-ran every check in float64 too: each label has a row per dtype.
    dtypes: dict[str, set[str]] = {}
    for item in entries:
        dtypes.setdefault(item["check"], set()).add(item["dtype"])
    assert all(found >= {"float32", "float64"} for found in dtypes.values()), dtypes
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


def test_the_templates_exercise_leaves_a_blank_that_runs_and_records_nothing() -> None:
    blanks = [cell for cell in cells("book/_template") if "skip-execution" in cell.tags and "..." in cell.source]
    assert blanks, "the template has no exercise cell with a blank (...) tagged skip-execution"
    namespace = {"torch": torch, "checks": checks}
    collected: list[object] = []
    with redirect_stdout(io.StringIO()) as said, patch.object(checks.teaching.records, "collect", collected.append):
        exec(compile(blanks[0].source, "exercise", "exec"), namespace)  # noqa: S102 (the template's own cell)
    assert "fill in the blank" in said.getvalue() and not collected, said.getvalue()


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
