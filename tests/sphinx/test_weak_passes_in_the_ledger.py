"""Weak passes in the ledger: the ledger page shows what each check could have caught and filters by weak, and
python -m checks refuses an undeclared weak pass, lists a declared one, and recomputes weak from the figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

import checks
from checks.__main__ import main
from checks.sphinx import ledger
from checks.teaching.display import percent
from checks.teaching.records import WEAK_ABOVE

from ..teaching.test_weak_checks import coarse_pass
from .test_ledger import SQUARE, entries, write


def test_the_ledger_shows_what_each_check_detects_and_filters_by_weak() -> None:
    items = entries(coarse_pass(), coarse_pass(weak="coarse on purpose", label="declared"),
                    checks.plan(SQUARE, 2.0, devices="cpu").run().one())
    soup = BeautifulSoup(ledger.ledger_html(items, link=lambda item: item["page"], json_href="ledger.json",
                                            table_library="datatables.js"), "html.parser")
    headings = [th.get_text() for th in soup.select("table.checks-ledger thead th")]
    assert "detects" in headings and "weak" in headings
    rows = [dict(zip(headings, (td.get_text(" ", strip=True) for td in tr.select("td"))))
            for tr in soup.select("table.checks-ledger tbody tr")]
    assert sorted(row["weak"] for row in rows) == ["no", "yes, declared", "yes, undeclared"]
    assert all(row["detects"].startswith(f"{item['detectable_relative_error']:.2g}")
               for row, item in zip(rows, ledger.ordered(items)))
    assert "weak" in [ledger.COLUMNS[key] for key in ledger.FILTERS]
    assert all(item["weak"] == (item["detectable_relative_error"] > WEAK_ABOVE) for item in items)


def test_python_dash_m_checks_refuses_an_undeclared_weak_pass_naming_where_how_weak_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weak = coarse_pass()
    assert main([str(write(tmp_path, entries(weak)))]) == 1
    out = capsys.readouterr().out
    assert f"undeclared weak check: {weak.check} (float64 on cpu, stored) in A chapter [book/a.html#{weak.id}]" in out
    assert f"detectable error {weak.detectable_relative_error:.3g}" in out
    assert f"up to {percent(weak.detectable_relative_error)} wrong" in out
    assert f"it allows {weak.tolerance['atol'] + weak.tolerance['rtol'] * 6:.3g} there, where 6 is expected" in out
    assert 'weak="..."' in out


def test_python_dash_m_checks_lists_a_declared_weak_pass_without_failing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    declared = coarse_pass(weak="coarse on purpose")
    assert main([str(write(tmp_path, entries(declared, checks.plan(SQUARE, 2.0, devices="cpu").run().one())))]) == 0
    out = capsys.readouterr().out
    assert "1 weak pass (allowing a gradient more than 1 % wrong): 1 declared, 0 undeclared" in out
    assert f"- declared weak: {declared.check}" in out and "declared: coarse on purpose" in out


def test_python_dash_m_checks_recomputes_weak_instead_of_trusting_the_stored_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = write(tmp_path, entries(coarse_pass()))
    path = site / ledger.LEDGER_JSON
    data = json.loads(path.read_text())
    data["checks"][0]["weak"] = False
    path.write_text(json.dumps(data))
    assert main([str(site)]) == 1
    assert "undeclared weak check" in capsys.readouterr().out


def test_a_ledger_whose_checks_lack_the_detectable_error_is_refused(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    site = write(tmp_path, entries(checks.plan(SQUARE, 2.0, devices="cpu").run().one()))
    path = site / ledger.LEDGER_JSON
    data = json.loads(path.read_text())
    del data["checks"][0]["detectable_relative_error"]
    path.write_text(json.dumps(data))
    assert main([str(site)]) == 2
    assert "lacks detectable_relative_error" in capsys.readouterr().err
