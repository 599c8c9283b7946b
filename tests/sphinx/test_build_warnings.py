"""A contributor is told at build time: an undeclared failing check, or a declared failure that passed, is a
Sphinx warning naming the chapter, the check, expected, observed and the formula (so `jupyter-book build -W`
fails on it, even when nothing was read again); a chapter file the toc leaves out is a warning, and the pages of
chapters no longer built leave the site and the ledger. One scratch book through four builds."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..conftest import jupyter_book
from ..helpers import Verified, verify
from .test_ledger_builds import chapter, small_book

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

WRONG = "wrong = checks.Expectation('x*x', lambda x: x * x, '3*x', lambda x: 3 * x, 'a slip')\n"
CHAPTERS = {
    "slip": chapter("Slip", WRONG + "checks.plan(wrong, 3.0).run()"),
    "demo": chapter("Demo", "checks.plan(square, 3.0).run()\nchecks.plan(square, 3.0, expected_failure=True).run()"),
    "gone": chapter("Gone", "checks.plan(square, 2.0).run()"),
}


@dataclass(frozen=True)
class Builds:
    html: Path
    first: subprocess.CompletedProcess[str]  # a clean build of slip, demo and gone
    pruned: subprocess.CompletedProcess[str]  # slip left out of the toc (its file kept), gone deleted
    pruned_files: set[str]  # every file under the build folder after that build
    pruned_ledger: list[ledger.Entry]
    pruned_verified: Verified
    restored: subprocess.CompletedProcess[str]  # slip back in the toc
    strict: subprocess.CompletedProcess[str]  # -W with nothing changed since


def build(output: Path, source: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return jupyter_book("build", *options, "--path-output", str(output), str(source))


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    output = tmp_path_factory.mktemp("warnings")
    source = small_book(output / "src", CHAPTERS)
    html = output / "_build" / "html"
    first = build(output, source)
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-6000:]
    toc = (source / "_toc.yml").read_text()
    (source / "_toc.yml").write_text(toc.replace("  - file: book/slip\n", "").replace("  - file: book/gone\n", ""))
    (source / "book" / "gone.md").unlink()
    pruned = build(output, source)
    assert pruned.returncode == 0, pruned.stdout[-6000:] + pruned.stderr[-6000:]
    files = {path.relative_to(output / "_build").as_posix() for path in (output / "_build").rglob("*") if path.is_file()}
    pruned_ledger, pruned_verified = ledger.load(html), verify(html)
    (source / "_toc.yml").write_text(toc.replace("  - file: book/gone\n", ""))
    restored = build(output, source)
    assert restored.returncode == 0, restored.stdout[-6000:] + restored.stderr[-6000:]
    return Builds(html, first, pruned, files, pruned_ledger, pruned_verified, restored,
                  build(output, source, "-W"))


def warnings(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def test_an_undeclared_failure_is_a_warning_with_expected_observed_and_formula(builds: Builds) -> None:
    log = warnings(builds.first)
    assert "slip.md: WARNING: unexpected failure: x*x at x=3 (float64 on cpu, stored) in chapter 'Slip'" in log
    assert "expected 9, from the formula 3*x (a slip)\n    observed 6\n" in log
    assert "Greatest absolute difference: 3 at index ()" in log
    assert "build succeeded, 2 warnings." in log, "the build completes, and says how many warnings it gave"


def test_a_declared_failure_that_passed_is_a_warning(builds: Builds) -> None:
    log = warnings(builds.first)
    assert "demo.md: WARNING: unexpected pass: x*x at x=3 (float64 on cpu, stored) in chapter 'Demo'" in log
    assert "expected 6, from the formula 2*x (power rule)\n    observed 6\n" in log
    assert "gone.md: WARNING" not in log, "a chapter whose checks all pass gives no warning"


def test_warnings_as_errors_fail_on_a_problem_even_when_nothing_is_read_again(builds: Builds) -> None:
    assert "0 added, 0 changed, 0 removed" in warnings(builds.strict)
    assert builds.strict.returncode != 0
    assert "unexpected failure: x*x at x=3 (float64 on cpu, stored) in chapter 'Slip'" in warnings(builds.strict)


def test_a_chapter_left_out_of_the_toc_is_a_warning_and_leaves_the_site(builds: Builds) -> None:
    log = warnings(builds.pruned)
    assert "book/slip.md is not in _toc.yml, so it is not built and none of its checks run" in log
    assert "add '- file: book/slip' to _toc.yml" in log
    for name in ("slip", "gone"):  # left out of the toc, and deleted
        # Sphinx's own cache (.doctrees) may keep what it likes; nothing a reader or the notebooks branch gets.
        stale = sorted(path for path in builds.pruned_files if f"book/{name}." in path and not path.startswith("."))
        assert not stale, f"{name}: pages of a chapter no longer built are left behind: {stale}"
    assert "html/book/demo.html" in builds.pruned_files and "notebooks/book/demo.ipynb" in builds.pruned_files
    assert {item["chapter"] for item in builds.pruned_ledger} == {"Demo"}
    assert builds.pruned_verified.returncode == 1
    assert "- book/slip.md is not in the book's table of contents (_toc.yml)" in builds.pruned_verified.stdout


def test_a_chapter_put_back_in_the_toc_is_built_and_warned_of_again(builds: Builds) -> None:
    log = warnings(builds.restored)
    assert "is not in _toc.yml" not in log
    assert "unexpected failure: x*x at x=3 (float64 on cpu, stored) in chapter 'Slip'" in log
    assert (builds.html / "book" / "slip.html").is_file()
