"""`python -m checks` and the ledger page with inconclusive outcomes: a declared inconclusive is listed, an
undeclared one (or a declared one that passed) is a problem, a study's runs are counted apart, and the
status is recomputed from the verdict and the declared flags (records.status), never read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup

import checks
from checks.__main__ import main
from checks.sphinx import ledger
from checks.sphinx.fingerprint import components
from checks.teaching import library
from checks.teaching.records import Record, collected


def kink_records() -> tuple[Record, Record, Record]:
    """relu and abs at their kink, and sin away from one: the first declared inconclusive, the rest not."""
    library.declare("check_jacobian(torch.relu, at_zero)", "inconclusive")
    library.declare("check_jacobian(torch.sin, at_zero)", "inconclusive")  # a declaration that does not happen
    at_zero = torch.tensor([0.0, 1.0], dtype=torch.float64)
    seen = len(collected())
    checks.check_jacobian(torch.relu, at_zero)
    checks.check_jacobian(torch.abs, at_zero)
    checks.check_jacobian(torch.sin, at_zero)
    declared, undeclared, passed = collected()[seen:]
    return declared, undeclared, passed


def site(tmp_path: Path, records: list[Record]) -> Path:
    source = tmp_path / "a.md"
    source.write_text("# A chapter\n")
    chapter = {"chapter": "A chapter", "page": "book/a.html", "source": "a.md",
               "source_sha256": ledger.file_sha256(source), "executed": len(records),
               "execution": "force: succeeded"}
    items = [ledger.entry(record, chapter="A chapter", page="book/a.html", shown=False) for record in records]
    ledger.write(tmp_path / ledger.LEDGER_JSON, items,
                 {"finished": True, "fingerprint": components(), "sources": ".", "chapters": [chapter]})
    return tmp_path


def test_a_declared_inconclusive_is_listed_and_an_undeclared_one_is_a_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    declared, undeclared, passed = kink_records()
    assert (declared.status, undeclared.status, passed.status) == (
        "expected inconclusive", "unexpected inconclusive", "unexpected pass")
    assert main([str(site(tmp_path, [declared, undeclared, passed]))]) == 1
    out = capsys.readouterr().out
    listed, problems = out.split("weak passes", 1)
    assert "3 checks: 1 unexpected inconclusive, 1 unexpected pass, 1 expected inconclusive" in listed
    assert "outcomes: 1 pass, 0 fail, 2 inconclusive; 3 from library calls and tools" in listed
    assert "1 declared inconclusive:\n- checks.check_jacobian(torch.relu, at_zero)" in listed
    assert "unexpected inconclusive: checks.check_jacobian(torch.abs, at_zero)" in problems
    assert "unexpected pass: checks.check_jacobian(torch.sin, at_zero)" in problems
    assert "declared expected_inconclusive=True, but it passed" in problems
    assert "torch.relu" not in problems


def test_only_declared_inconclusives_pass_the_verifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    declared, _, _ = kink_records()
    assert main([str(site(tmp_path, [declared]))]) == 0
    assert "1 declared inconclusive:" in capsys.readouterr().out


def test_a_stored_status_is_recomputed_not_trusted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, undeclared, _ = kink_records()
    path = site(tmp_path, [undeclared]) / ledger.LEDGER_JSON
    data = json.loads(path.read_text())
    data["checks"][0]["status"] = "expected inconclusive"  # an undeclared inconclusive relabelled
    path.write_text(json.dumps(data))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "stored outcome 'inconclusive' and status 'expected inconclusive'" in out
    assert "unexpected inconclusive: checks.check_jacobian(torch.abs, at_zero)" in out


def test_the_ledger_page_counts_outcomes_and_statuses() -> None:
    declared, undeclared, passed = kink_records()
    items = [ledger.entry(record, chapter="A", page="book/a.html") for record in (passed, declared, undeclared)]
    soup = BeautifulSoup(ledger.ledger_html(items, link=lambda item: item["page"], json_href="ledger.json"),
                         "html.parser")
    summary = soup.select_one("div.checks-ledger-summary")
    assert "3 checks in this build: 1 pass, 0 fail, 2 inconclusive" in " ".join(summary.p.get_text().split())
    counts = {" ".join(item.get_text().split()[1:]): int(item.strong.get_text()) for item in summary.select("li")}
    assert counts == {"unexpected inconclusive": 1, "unexpected pass": 1, "expected inconclusive": 1}
    rows = soup.select("table.checks-ledger tbody tr")
    assert [row.select_one("td.checks-verdict").get_text() for row in rows] == [
        "unexpected inconclusive", "unexpected pass", "expected inconclusive"]
    assert "checks-outcome-expected-inconclusive" in rows[2]["class"]
