"""Nothing lost: every executed check reaches the ledger, displayed or not, and no failed or interrupted
build leaves a ledger that verifies (scratch books, built as a reader builds them)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..conftest import build_book, jupyter_book
from ..helpers import Verified, embedded_records, page, verify
from .test_ledger_builds import SUM, chapter, ledger_rows, small_book

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

WRONG = "wrong = checks.Expectation('x*x', lambda x: x * x, '3*x', lambda x: 3 * x, 'a slip')\n"


HIDDEN = (
    "```{code-cell} ipython3\n:tags: [remove-output]\nchecks.plan(wrong, 6.0).run()\n```\n"
    "```{code-cell} ipython3\n:tags: [remove-cell]\nchecks.plan(wrong, 7.0).run()\n```\n"
)


def test_a_check_printed_assigned_framed_or_hidden_reaches_the_ledger(tmp_path: Path) -> None:
    cells = (WRONG + "assigned = checks.plan(wrong, 2.0).run()\n"
             "print(checks.plan(wrong, 3.0).run())\n"
             "checks.plan(wrong, 4.0).run().frame()\n")
    text = chapter("Hidden", cells) + HIDDEN + "```{code-cell} ipython3\nchecks.plan(square, 5.0).run()\n```\n"
    html = build_book(tmp_path, small_book(tmp_path / "src", {"hidden": text}))
    items = ledger.load(html)
    assert sorted(item["x"] for item in items) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    shown = {record["id"] for record in embedded_records(page(html, "book/hidden.html"))}
    assert len(shown) == 1, "only the last cell displays a table"
    assert [item["anchor"] for item in items if item["anchor"]] == list(shown)
    assert len(ledger_rows(html)) == 6
    links = [link["href"] for link in page(html, "book/ledger.html").select("table.checks-ledger td.checks-chapter a")]
    assert sorted(links) == sorted(["hidden.html"] * 5 + [f"hidden.html#{next(iter(shown))}"])
    result = verify(html)
    assert result.returncode == 1, result.stdout + result.stderr
    for x in (2, 3, 4, 6, 7):  # each undisplayed failure is named, and where it ran
        assert f"unexpected failure: x*x at x={x} (float64 on cpu, stored) in Hidden [book/hidden.html, not " \
               f"displayed there]" in result.stdout
    assert "6 checks: 5 unexpected failure, 1 pass" in result.stdout


KILLER = '''
import os


def _kill(app, pagename, templatename, context, doctree):
    if os.environ.get("KILL_WHILE_WRITING") == pagename:
        raise RuntimeError(f"killed while writing {pagename}")


def setup(app):
    app.connect("html-page-context", _kill)
    return {"parallel_read_safe": True}
'''


@dataclass(frozen=True)
class Broken:
    """One scratch book through the ways a build can end badly, and what each left behind."""

    killed: subprocess.CompletedProcess[str]  # a chapter edited, the build killed while writing the ledger page
    killed_rows: list[str]  # the ledger page's rows after it
    killed_verified: Verified
    rebuilt_items: list[ledger.Entry]  # after a build with nothing killed
    rebuilt_rows: list[str]
    rebuilt_anchors: set[str]  # the ids of the records the chapter's page shows
    rebuilt_verified: Verified
    failed: subprocess.CompletedProcess[str]  # then a chapter that raises
    failed_verified: Verified


def ledger_row_texts(html: Path) -> list[str]:
    return [row.get_text(" ") for row in page(html, "book/ledger.html").select("table.checks-ledger tbody tr")]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Broken:
    # One book for two tests: the failing chapter is an edit of the book the killed build left, rebuilt.
    output = tmp_path_factory.mktemp("broken")
    chapters = {"one": chapter("One", "checks.plan(square, 3.0).run()")}
    source = small_book(output / "src", chapters)
    (source / "killer.py").write_text(KILLER)
    config = (source / "_config.yml").read_text().replace("    - checks.sphinx.reader\n", "    - checks.sphinx.reader\n    - killer\n")
    (source / "_config.yml").write_text(config)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("PYTHONPATH", str(source))
        html = build_book(output, source, clean=False)
        # The chapter changes; the build reads it (and saves its records), then dies before the ledger page.
        (source / "book" / "one.md").write_text(chapter("One", SUM + "checks.plan(total, [1.0, 2.0]).run()"))
        monkeypatch.setenv("KILL_WHILE_WRITING", "book/ledger")
        killed = jupyter_book("build", "--path-output", str(output), str(source))
        killed_rows, killed_verified = ledger_row_texts(html), verify(html)
        monkeypatch.delenv("KILL_WHILE_WRITING")
        html = build_book(output, source, clean=False)
        rebuilt_items, rebuilt_rows, rebuilt_verified = ledger.load(html), ledger_row_texts(html), verify(html)
        rebuilt_anchors = {record["id"] for record in embedded_records(page(html, "book/one.html"))}
        (source / "book" / "one.md").write_text(chapter("One", SUM + "checks.plan(total, [1.0, 2.0]).run()\n1 / 0"))
        failed = jupyter_book("build", "--path-output", str(output), str(source))
    return Broken(killed, killed_rows, killed_verified, rebuilt_items, rebuilt_rows, rebuilt_anchors, rebuilt_verified,
                  failed, verify(html))


def test_a_build_killed_while_writing_then_rebuilt_leaves_no_stale_ledger_page(broken: Broken) -> None:
    assert broken.killed.returncode != 0
    stale = broken.killed_rows
    assert len(stale) == 1 and "x=[1.0, 2.0]" not in stale[0], "the killed build left the old page"
    assert broken.killed_verified.returncode == 2
    items = broken.rebuilt_items
    assert [item["x"] for item in items] == [[1.0, 2.0]]
    rows = broken.rebuilt_rows
    assert len(rows) == 1 and "x=[1.0, 2.0]" in rows[0]
    assert {item["anchor"] for item in items} <= broken.rebuilt_anchors
    assert broken.rebuilt_verified.returncode == 0


def test_a_failed_build_leaves_no_ledger_that_verifies(broken: Broken) -> None:
    assert broken.rebuilt_verified.returncode == 0  # the book verified before the chapter was broken
    result = broken.failed
    assert result.returncode != 0 and "ZeroDivisionError" in result.stdout + result.stderr
    refused = broken.failed_verified
    assert refused.returncode == 2
    assert "no ledger" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_a_tampered_ledger_from_a_real_build_is_refused(tmp_path: Path) -> None:
    source = small_book(tmp_path / "src", {"two": chapter("Two", "checks.plan(square, 2.0, "
                                                                   "dtypes=('float32', 'float64')).run()")})
    html = build_book(tmp_path, source)
    path = html / ledger.LEDGER_JSON
    assert verify(html).returncode == 0
    original = json.loads(path.read_text())

    dropped = json.loads(json.dumps(original))
    dropped["checks"].pop()
    path.write_text(json.dumps(dropped))
    result = verify(html)
    assert result.returncode == 1 and "2 checks executed, 1 in the ledger" in result.stdout
    assert "shows 1 checks the ledger lacks" in result.stdout

    other = json.loads(json.dumps(original))
    other["build"]["fingerprint"]["torch"] = "1.0.0"
    path.write_text(json.dumps(other))
    result = verify(html)
    assert result.returncode == 2 and "torch: built with 1.0.0" in result.stderr

    path.write_text(json.dumps({**original, "checks": [], "build": {**original["build"], "chapters": []}}))
    result = verify(html)
    assert result.returncode == 1 and "holds no checks" in result.stdout
