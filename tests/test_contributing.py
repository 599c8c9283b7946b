"""What CONTRIBUTING.md tells a contributor works: the template, built alone as one page, is a chapter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checks.build import ledger

from .conftest import ROOT, jupyter_book
from .helpers import main_text, page

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build


def test_the_template_builds_alone_with_a_pass_and_a_declared_failure(tmp_path: Path) -> None:
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "_template.md", tmp_path / "book" / "mine.md")
    result = jupyter_book("build", str(tmp_path / "book" / "mine.md"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "_page" / "book-mine" / "html"
    outcomes = sorted(item["outcome"] for item in ledger.load(html))
    assert outcomes.count("expected failure") >= 1 and "pass" in outcomes
    assert not ledger.problems(ledger.load(html))
    assert "We expected 12 ; backward() stored 12" in main_text(page(html, "mine.html"))
