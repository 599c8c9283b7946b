"""Records reach the collector explicitly: constructing one writes nothing, collect() keeps it and appends it
to the chapter's file, and one rule (records.status) reads a verdict against what was declared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checks.core.errors import CheckInputError
from checks.teaching import records
from checks.teaching.records import RECORDS_VARIABLE, Record, collect, collected, read_collected, read_shown, status


def executed(**fields: object) -> Record:
    base = dict(check="square", function="x*x", x=3.0, input_shape=[], dtype="float64", device="cpu",
                how="stored", gradient_formula="2*x", derivative_source="power rule", analytical_gradient=6.0,
                observed_gradient=6.0, executed=True, verdict="pass")
    return Record(**{**base, **fields})


def test_constructing_a_record_writes_nothing_and_collects_nothing(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "chapter.jsonl"
    monkeypatch.setenv(RECORDS_VARIABLE, str(target))
    before = collected()
    record = executed(check="constructed only")
    assert not target.exists()
    assert collected() == before and record not in collected()


def test_collect_keeps_the_record_and_appends_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "chapter.jsonl"
    monkeypatch.setenv(RECORDS_VARIABLE, str(target))
    record = collect(executed(check="collected", verdict="inconclusive", expected_inconclusive=True))
    assert collected()[-1] is record
    lines = target.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == record.id
    assert read_collected(target)[0]["verdict"] == "inconclusive"


def test_collect_refuses_a_plan_and_anything_but_a_record() -> None:
    with pytest.raises(CheckInputError, match="only an executed record"):
        collect(executed(executed=False, verdict=None, observed_gradient=None))
    with pytest.raises(CheckInputError, match="keeps a Record"):
        collect({"id": "x"})  # type: ignore[arg-type]


def test_displays_are_read_apart_from_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "chapter.jsonl"
    monkeypatch.setenv(RECORDS_VARIABLE, str(target))
    record = collect(executed(check="displayed"))
    records.displayed([record.id], 7)
    records.displayed([record.id], 9)
    assert [item["id"] for item in read_collected(target)] == [record.id]
    assert read_shown(target) == {record.id: {7, 9}}


@pytest.mark.parametrize(("verdict", "failure", "inconclusive", "expected"), [
    ("pass", False, False, "pass"),
    ("fail", False, False, "unexpected failure"),
    ("inconclusive", False, False, "unexpected inconclusive"),
    ("fail", True, False, "expected failure"),
    ("pass", True, False, "unexpected pass"),
    ("inconclusive", True, False, "unexpected inconclusive"),
    ("inconclusive", False, True, "expected inconclusive"),
    ("pass", False, True, "unexpected pass"),
    ("fail", False, True, "unexpected failure"),
])
def test_one_rule_reads_a_verdict_against_the_declaration(verdict: str, failure: bool, inconclusive: bool,
                                                         expected: str) -> None:
    assert status(verdict, failure, inconclusive) == expected  # type: ignore[arg-type]
    record = executed(verdict=verdict, expected_failure=failure, expected_inconclusive=inconclusive)
    assert record.status == expected and record.outcome == verdict


def test_a_measurement_is_a_finding_whatever_its_outcome() -> None:
    for verdict in ("pass", "fail", "inconclusive"):
        assert status(verdict, False, False, "a study") == "measured"  # type: ignore[arg-type]


def test_a_record_refuses_a_verdict_outside_the_vocabulary_and_two_declarations() -> None:
    with pytest.raises(CheckInputError, match="one of pass, fail, inconclusive"):
        executed(verdict="planned")
    with pytest.raises(CheckInputError, match="not both"):
        executed(verdict="fail", expected_failure=True, expected_inconclusive=True)


def test_a_plan_has_no_outcome_and_old_planned_records_load() -> None:
    plan = executed(executed=False, verdict=None, observed_gradient=None)
    assert plan.outcome is None and plan.status is None
    assert Record.from_dict({**plan.to_dict(), "verdict": "planned"}).verdict is None
