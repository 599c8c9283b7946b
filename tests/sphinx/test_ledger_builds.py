"""The ledger across builds: the same whether chapters execute several at a time or one at a time, the same
after a no-change rebuild, complete when a chapter is added later, and problems (an unexpected failure or
pass) caught after a build that still completes."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..conftest import PARALLEL, ROOT, build_book, jupyter_book
from ..helpers import page, verify, weak_note
from .test_build_behaviour import CHAPTER_HEADER

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build


def ledger_rows(html: Path) -> list[str]:
    return [str(row) for row in page(html, "book/ledger.html").select("table.checks-ledger tbody tr")]


# Real chapters of the book, executed in a scratch book of their own: enough of them that a parallel build
# runs two at once, few enough that building them twice is cheaper than a second build of the whole book.
REAL_CHAPTERS = ("small-function", "failures", "finite-differences")


@pytest.fixture(scope="module")
def both_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The source of a scratch book of real chapters and two clean builds of it (their html folders):
    several chapters at a time, then one at a time."""
    source = small_book(tmp_path_factory.mktemp("real") / "src",
                        {name: (ROOT / "book" / f"{name}.md").read_text(encoding="utf-8") for name in REAL_CHAPTERS})
    built = []
    for processes in (PARALLEL, 1):
        output = tmp_path_factory.mktemp(f"processes-{processes}")
        result = jupyter_book("build", "--path-output", str(output), str(source), processes=processes)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
        # Each chapter says how many kernels ran at once: the two builds did execute differently.
        executed = re.findall(r"Executed notebook in [0-9.]+ seconds \((\d+) at a time\)", result.stdout)
        assert executed == [str(processes)] * len(REAL_CHAPTERS), result.stdout[-6000:]
        built.append(output / "_build" / "html")
    return source, built[0], built[1]


def test_a_parallel_and_a_sequential_clean_build_give_the_same_ledger(both_builds: tuple[Path, Path, Path]) -> None:
    # Records hold no timestamps or timings, so the two ledgers are compared whole, but for where the
    # sources are seen from each (the builds are in different folders).
    _, parallel, sequential = both_builds
    first, second = (json.loads((html / ledger.LEDGER_JSON).read_text()) for html in (parallel, sequential))
    for stamp in (first, second):
        assert stamp["build"].pop("sources")
    assert {item["chapter"] for item in first["checks"]} == {item["chapter"] for item in first["build"]["chapters"]}
    assert len(first["build"]["chapters"]) == len(REAL_CHAPTERS)
    assert first == second
    assert ledger_rows(sequential) == ledger_rows(parallel)


def test_a_no_change_rebuild_keeps_the_ledger(both_builds: tuple[Path, Path, Path]) -> None:
    source, _, html = both_builds
    before = (html / ledger.LEDGER_JSON).read_text()
    rows = ledger_rows(html)
    build_book(html.parents[1], source, clean=False)
    assert (html / ledger.LEDGER_JSON).read_text() == before
    assert ledger_rows(html) == rows


def chapter(title: str, check: str) -> str:
    return (CHAPTER_HEADER + f"# {title}\n\n```{{code-cell}} ipython3\nimport checks\n"
            f"square = checks.Expectation('x*x', lambda x: x * x, '2*x', lambda x: 2 * x, 'power rule')\n"
            f"{check}\n```\n")


def small_book(root: Path, chapters: dict[str, str]) -> Path:
    """A book of the given chapters and a ledger page, with the real book's configuration."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    (root / "book").mkdir(exist_ok=True)
    shutil.copy(ROOT / "book" / "ledger.md", root / "book" / "ledger.md")
    (root / "book" / "intro.md").write_text("# Intro\n")
    for name, text in chapters.items():
        (root / "book" / f"{name}.md").write_text(text)
    files = "".join(f"  - file: book/{name}\n" for name in (*chapters, "ledger"))
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: book/intro\nchapters:\n{files}")
    return root


SUM = ("total = checks.Expectation('x.sum()', lambda x: x.sum(), 'ones_like(x)', lambda x: x * 0 + 1, "
       "'sum rule')\n")


@dataclass(frozen=True)
class Growing:
    """One scratch book through three builds: a chapter; a second one added; the second one edited."""

    html: Path
    alone: list[ledger.Entry]  # the ledger after each build
    added: list[ledger.Entry]
    added_rows: int  # rows of the ledger page after the second build
    edited: list[ledger.Entry]
    edited_log: str  # what the third build printed


@pytest.fixture(scope="module")
def growing(tmp_path_factory: pytest.TempPathFactory) -> Growing:
    # One book for two tests: the second build of the first test is where the second test starts.
    output = tmp_path_factory.mktemp("growing")
    first = {"one": chapter("One", "checks.plan(square, 3.0).run()")}
    html = build_book(output, small_book(output / "src", first), clean=False)
    alone = ledger.load(html)
    later = {**first, "two": chapter("Two", SUM + "checks.plan(total, [1.0, 2.0]).run()")}
    source = small_book(output / "src", later)
    build_book(output, source, clean=False)
    added, added_rows = ledger.load(html), len(ledger_rows(html))
    (source / "book" / "two.md").write_text(chapter("Two", SUM + "checks.plan(total, [5.0, 6.0, 7.0]).run()"))
    result = jupyter_book("build", "--path-output", str(output), str(source))
    assert result.returncode == 0, result.stdout[-4000:]
    return Growing(html, alone, added, added_rows, ledger.load(html), result.stdout)


def test_a_chapter_added_later_joins_the_ledger(growing: Growing) -> None:
    assert {item["chapter"] for item in growing.alone} == {"One"}
    assert {item["chapter"] for item in growing.added} == {"One", "Two"}
    assert growing.added_rows == len(growing.added)


def test_a_chapter_not_read_again_keeps_its_records_and_an_edited_one_replaces_its_own(growing: Growing) -> None:
    before = {item["id"]: item for item in growing.added}
    assert "book/two" in growing.edited_log and "book/one" not in growing.edited_log  # only the edited one re-read
    after = growing.edited
    assert {key for key, item in before.items() if item["chapter"] == "One"} == \
        {item["id"] for item in after if item["chapter"] == "One"}
    two = [item["x"] for item in after if item["chapter"] == "Two"]
    assert two and all(x == [5.0, 6.0, 7.0] for x in two)
    assert len(ledger_rows(growing.html)) == len(after)


def test_problems_do_not_stop_the_build_but_fail_python_dash_m_checks(tmp_path: Path) -> None:
    wrong = "wrong = checks.Expectation('x*x', lambda x: x * x, '3*x', lambda x: 3 * x, 'a slip')\n"
    chapters = {
        "slip": chapter("Slip", wrong + "checks.plan(wrong, 3.0).run()"),
        "demo": chapter("Demo", "checks.plan(square, 3.0, expected_failure=True).run()"),
    }
    html = build_book(tmp_path, small_book(tmp_path / "src", chapters))
    shown = page(html, "book/slip.html").select("div.checks-failure")
    assert shown, "the unexpected failure is shown on its page"
    result = verify(html)
    assert result.returncode == 1
    assert "unexpected failure: x*x at x=3" in result.stdout
    assert "unexpected pass: x*x at x=3" in result.stdout
    outcomes = ledger.load(html)
    assert sorted(item["status"] for item in outcomes) == ["unexpected failure", "unexpected pass"]


def test_an_edited_stylesheet_reaches_the_site_when_no_page_changed(tmp_path: Path) -> None:
    # Sphinx 7 skips copying static files when no page is out of date; checks.sphinx.sphinxext copies them anyway.
    source = small_book(tmp_path / "src", {"one": chapter("One", "checks.plan(square, 3.0).run()")})
    (source / "_static").mkdir()
    (source / "_static" / "note.css").write_text("p { color: black; }\n")
    html = build_book(tmp_path, source, clean=False)
    assert (html / "_static" / "note.css").read_text() == "p { color: black; }\n"
    (source / "_static" / "note.css").write_text("p { color: navy; }\n")
    result = jupyter_book("build", "--path-output", str(tmp_path), str(source))
    assert result.returncode == 0, result.stdout[-4000:]
    assert "no targets are out of date" in result.stdout
    assert (html / "_static" / "note.css").read_text() == "p { color: navy; }\n"
    package_css = Path(__file__).resolve().parents[2] / "checks" / "sphinx" / "_static" / "reader.css"
    assert (html / "_static" / "reader.css").read_text() == package_css.read_text()


def test_weak_passes_are_marked_on_their_page_and_an_undeclared_one_fails_python_dash_m_checks(
    tmp_path: Path
) -> None:
    coarse = "coarse = checks.default_tolerance('float64').changed(rtol=0.05, reason='coarse, for the test')\n"
    cells = (coarse + "checks.plan(square, 3.0, tolerance=coarse).run()\n```\n\n```{code-cell} ipython3\n"
             "checks.plan(square, 4.0, tolerance=coarse, weak='coarse on purpose').run()")
    html = build_book(tmp_path, small_book(tmp_path / "src", {"weak": chapter("Weak", cells)}))
    items = {item["x"]: item for item in ledger.load(html)}
    soup = page(html, "book/weak.html")
    for x, item in items.items():
        row = soup.select_one(f"tr#{item['anchor']}")
        assert "checks-weak" in row["class"], x
        note, declared = weak_note(soup, row)
        assert f"up to {100 * item['detectable_relative_error']:.3g} % wrong" in note
        assert declared == ("Declared weak: coarse on purpose" if x == 4.0 else
                            'Not declared weak (weak="why" on the check): python -m checks reports it as a problem.')
    weak_cells = [td.get_text() for td in page(html, "book/ledger.html").select("table.checks-ledger td.checks-weak-flag")]
    assert sorted(weak_cells) == ["yes, declared", "yes, undeclared"]
    result = verify(html)
    assert result.returncode == 1, result.stdout
    three, four = items[3.0], items[4.0]
    assert (f"- undeclared weak check: x*x at x=3 (float64 on cpu, stored) in Weak [book/weak.html#{three['anchor']}]\n"
            f"    detectable error {three['detectable_relative_error']:.3g}") in result.stdout
    assert f"- declared weak: x*x at x=4 (float64 on cpu, stored) in Weak [book/weak.html#{four['anchor']}]" in result.stdout
    assert "1 undeclared" in result.stdout
