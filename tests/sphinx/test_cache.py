"""checks.cached: a chapter's heavy result is computed once per build fingerprint, chapter text and name,
read back by later builds, and its executed records reach the ledger either way."""

from __future__ import annotations

from pathlib import Path

import pytest

import checks
import checks.sphinx.cache
from checks.sphinx import ledger
from checks.sphinx.cache import CACHE_VARIABLE, KEPT, SOURCE_VARIABLE
from checks.teaching import records
from checks.teaching.records import RECORDS_VARIABLE, read_collected

from ..conftest import build_book
from ..helpers import verify
from .test_ledger_builds import chapter, small_book

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule")


class Counted:
    """A computation that says how often it ran."""

    def __init__(self, value: object = 42) -> None:
        self.value, self.runs = value, 0

    def __call__(self) -> object:
        self.runs += 1
        return self.value


@pytest.fixture
def in_a_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The variables checks.sphinx.sphinxext gives a chapter's kernel: a cache folder and the chapter's source."""
    source = tmp_path / "chapter.md"
    source.write_text("# A chapter\n")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv(SOURCE_VARIABLE, str(source))
    return source


def test_outside_a_build_compute_runs_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.delenv(SOURCE_VARIABLE, raising=False)
    compute = Counted()
    assert checks.cached("suite", compute) == checks.cached("suite", compute) == 42
    assert compute.runs == 2


def test_in_a_build_the_second_call_reads_the_first_result_back(in_a_build: Path) -> None:
    compute = Counted({"outcomes": [1.5, 2.5]})
    assert checks.cached("suite", compute) == {"outcomes": [1.5, 2.5]}
    assert checks.cached("suite", compute) == {"outcomes": [1.5, 2.5]}
    assert compute.runs == 1


def test_the_cache_can_be_turned_off(in_a_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, "off")
    compute = Counted()
    checks.cached("suite", compute), checks.cached("suite", compute)
    assert compute.runs == 2


@pytest.mark.parametrize("change", ["chapter text", "fingerprint", "name"])
def test_anything_that_decides_the_result_computes_it_again(
    in_a_build: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    compute = Counted()
    checks.cached("suite", compute)
    name = "suite"
    if change == "chapter text":
        in_a_build.write_text("# A chapter, edited\n")
    elif change == "fingerprint":  # another checks package, torch, Python, numpy, pandas or devices
        monkeypatch.setattr(checks.sphinx.cache, "fingerprint", lambda: "another")
    else:
        name = "another-suite"
    checks.cached(name, compute)
    assert compute.runs == 2


def test_records_executed_while_computing_are_collected_again_when_read_back(
    in_a_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collected = tmp_path / "records.jsonl"
    monkeypatch.setenv(RECORDS_VARIABLE, str(collected))
    computed = checks.cached("square", lambda: checks.plan(SQUARE, 3.0).run())
    first = read_collected(collected)
    assert [item["id"] for item in first] == [record.id for record in computed] and first
    collected.unlink()
    read_back = checks.cached("square", lambda: pytest.fail("computed again instead of read back"))
    assert [record.id for record in read_back] == [record.id for record in computed]
    assert read_collected(collected) == first, "the ledger's file gets the records of a result read back"
    assert {record.id for record in computed} <= {record.id for record in records.collected()}


def test_old_entries_of_a_chapter_and_name_are_dropped(in_a_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for version in range(KEPT + 3):
        monkeypatch.setattr(checks.sphinx.cache, "fingerprint", lambda version=version: f"version {version}")
        checks.cached("suite", Counted(version))
    checks.cached("other", Counted())
    entries = sorted(path.name for path in (in_a_build.parent / "cache").iterdir())
    assert len([name for name in entries if name.startswith("chapter--suite--")]) == KEPT
    assert len([name for name in entries if name.startswith("chapter--other--")]) == 1


def test_bad_input_is_named(in_a_build: Path) -> None:
    with pytest.raises(checks.CheckInputError, match="needs a name"):
        checks.cached("a suite/2", Counted())
    with pytest.raises(checks.CheckInputError, match="compute as a function of no arguments"):
        checks.cached("suite", 42)
    with pytest.raises(checks.CheckInputError, match="its result cannot be stored"):
        checks.cached("functions", lambda: (lambda: 1))


@pytest.mark.kernels
def test_a_clean_build_reads_a_result_back_and_its_checks_still_reach_the_ledger(tmp_path: Path) -> None:
    # The computation leaves a mark each time it runs; two clean builds of one source folder share its cache.
    code = ("from pathlib import Path\n"
            "def suite():\n"
            "    with open(Path.cwd() / 'computed.txt', 'a') as mark:\n"
            "        mark.write('computed\\n')\n"
            "    return checks.plan(square, 3.0).run()\n"
            "checks.cached('suite', suite)")
    source = small_book(tmp_path / "src", {"heavy": chapter("Heavy", code)})
    built = [ledger.load(build_book(tmp_path / f"build{n}", source)) for n in (1, 2)]
    assert (source / "book" / "computed.txt").read_text() == "computed\n", "the second build computed it again"
    assert [item["id"] for item in built[1]] == [item["id"] for item in built[0]] != []
    assert verify(tmp_path / "build2" / "_build" / "html").returncode == 0
