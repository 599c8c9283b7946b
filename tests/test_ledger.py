"""The ledger and failed-check records, without building the book: outcomes, the JSON, python -m checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup

import checks
from checks import ledger
from checks.__main__ import main
from checks.display import records_html
from checks.fingerprint import components

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule")
WRONG = checks.Expectation("x*x", lambda x: x * x, "3*x", lambda x: 3 * x, "a wrong rule, on purpose")


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x  # the square is missing: a wrong backward, on purpose


CUBE = checks.Expectation("x**3", lambda x: Cube.apply(x), "3*x**2", lambda x: 3 * x**2, "power rule",
                          related=(Cube,))


def run(expectation: checks.Expectation, *, expected_failure: bool = False, x: object = 3.0) -> checks.Record:
    return checks.plan(expectation, x, devices="cpu", expected_failure=expected_failure).run().one()


def entries(*records: checks.Record) -> list[ledger.Entry]:
    return [ledger.entry(record, chapter="A chapter", page="book/a.html") for record in records]


def test_outcome_reads_the_verdict_with_the_expected_failure_flag() -> None:
    assert run(SQUARE).outcome == "pass"
    assert run(WRONG).outcome == "unexpected failure"
    assert run(WRONG, expected_failure=True).outcome == "expected failure"
    assert run(SQUARE, expected_failure=True).outcome == "unexpected pass"
    assert checks.plan(SQUARE, 3.0, devices="cpu").records()[0].outcome == "planned"


def test_a_failed_record_shows_discrepancy_code_and_environment_with_an_anchor() -> None:
    record = run(CUBE, expected_failure=True)
    soup = BeautifulSoup(records_html([record]), "html.parser")
    block = soup.select_one("div.checks-failure.checks-expected-failure")
    assert block is not None and block["id"] == f"{record.id}-failure"
    assert soup.select_one(f'td.checks-verdict a[href="#{record.id}-failure"]') is not None
    text = block.get_text(" ", strip=True)
    assert [h.get_text() for h in block.find_all("h4")] == ["Discrepancy", "Where the numbers came from", "Code",
                                                             "Environment"]
    assert "Gradients are not close!" in text
    assert "expected 27, observed 9" in text  # worst element, computed: 3*3**2 against the wrong 3*3
    assert "return grad_output * 3 * x" in text  # the backward under test, from its source
    for item in (torch.__version__, "float64", "default dtype", "seed", "CPU"):
        assert item in text


def test_a_passing_record_has_no_failure_block_and_a_plan_has_no_row_ids() -> None:
    record = run(SQUARE)
    assert BeautifulSoup(records_html([record]), "html.parser").select("div.checks-failure") == []
    planned = BeautifulSoup(records_html(checks.plan(SQUARE, 3.0, devices="cpu").records()), "html.parser")
    assert all(not row.get("id") for row in planned.select("tbody tr"))


def test_a_tolerance_change_and_its_reason_are_shown_under_the_table() -> None:
    strict = checks.default_tolerance("float64")
    looser = strict.changed(rtol=1e-3, reason="a demonstration of a recorded change")
    record = checks.plan(SQUARE, 3.0, devices="cpu", tolerance=looser).run().one()
    notes = BeautifulSoup(records_html([record]), "html.parser").select_one("ul.checks-tolerances").get_text()
    assert "a demonstration of a recorded change" in notes
    assert f"changed from rtol {strict.rtol:.3g}" in notes


def test_ledger_orders_failures_first_and_counts_per_outcome_and_device() -> None:
    items = entries(run(SQUARE), run(WRONG, expected_failure=True), run(WRONG))
    assert [item["outcome"] for item in ledger.ordered(items)] == ["unexpected failure", "expected failure", "pass"]
    counts = ledger.summary(items)
    assert counts["checks"] == 3
    assert counts["outcomes"] == {"pass": 1, "expected failure": 1, "unexpected failure": 1}
    assert counts["devices"] == {"cpu": {"pass": 1, "expected failure": 1, "unexpected failure": 1}}


def test_ledger_entries_are_a_superset_of_the_documented_record_shape() -> None:
    item = json.loads(ledger.to_json(entries(run(SQUARE))))["checks"][0]
    assert {"function": "x*x", "x": 3.0, "analytical_gradient": 6.0, "executed": True}.items() <= item.items()
    assert item["observed_gradient"] == pytest.approx(6.0)
    assert {"chapter", "page", "anchor", "outcome", "how", "tolerance", "verdict", "expected_failure"} <= set(item)


def test_ledger_html_links_each_row_to_its_chapter_and_offers_the_json() -> None:
    items = entries(run(SQUARE), run(WRONG))
    soup = BeautifulSoup(ledger.ledger_html(items, link=lambda item: f"{item['page']}#{item['anchor']}",
                                            json_href="../ledger.json"), "html.parser")
    assert soup.select_one("a.checks-ledger-download")["href"] == "../ledger.json"
    rows = soup.select("table.checks-ledger tbody tr")
    assert [row.select_one("td.checks-verdict").get_text() for row in rows] == ["unexpected failure", "pass"]
    assert rows[0].select_one("td.checks-chapter a")["href"] == f"book/a.html#{items[1]['anchor']}"


def write(tmp_path: Path, items: list[ledger.Entry]) -> Path:
    """A ledger as a finished build stamps it: this checkout's fingerprint, one chapter of these checks."""
    source = tmp_path / "a.md"
    source.write_text("# A chapter\n")
    chapter = {"chapter": "A chapter", "page": "book/a.html", "source": "a.md",
               "source_sha256": ledger.file_sha256(source), "executed": len(items), "execution": "force: succeeded"}
    build = {"finished": True, "fingerprint": components(), "chapters": [chapter]}
    (tmp_path / ledger.LEDGER_JSON).write_text(ledger.to_json(items, build))
    return tmp_path


def test_command_line_passes_a_ledger_without_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = write(tmp_path, entries(run(SQUARE), run(WRONG, expected_failure=True)))
    assert main([str(site)]) == 0
    assert "2 checks: 1 expected failure, 1 pass" in capsys.readouterr().out


def test_command_line_lists_unexpected_failures_and_unexpected_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = write(tmp_path, entries(run(SQUARE), run(WRONG), run(SQUARE, expected_failure=True)))
    assert main([str(site / ledger.LEDGER_JSON)]) == 1
    out = capsys.readouterr().out
    assert "- unexpected failure: x*x at x=3" in out and "Gradients are not close!" in out
    assert "- unexpected pass: x*x at x=3" in out and "declared expected_failure=True, but it passed" in out


@pytest.mark.parametrize("content", [None, "not json", '{"a": 1}'])
def test_command_line_refuses_a_missing_or_malformed_ledger(tmp_path: Path, content: str | None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    if content is not None:
        (tmp_path / ledger.LEDGER_JSON).write_text(content)
    assert main([str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_python_dash_m_checks_runs_as_a_module(tmp_path: Path) -> None:
    site = write(tmp_path, entries(run(WRONG)))
    result = subprocess.run([sys.executable, "-m", "checks", str(site)], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 1
    assert "unexpected failure" in result.stdout


def test_code_without_python_source_is_named_stably() -> None:
    # A repr carries a memory address that changes from kernel to kernel: two builds would differ.
    from checks.plan import source_code

    code = source_code(checks.Expectation("exp(x).sum()", lambda x: torch.exp(x).sum(), "exp(x)", torch.exp,
                                          "d/dx eˣ = eˣ"))
    assert code["df"] == "torch.exp  # built in: no Python source"
    assert "lambda x: torch.exp(x).sum()" in code["f"]


def test_each_lambda_shows_its_own_expression_when_several_share_a_line() -> None:
    from checks.plan import source_code

    code = source_code(checks.Expectation(function="3*x**2", f=lambda x: 3 * x**2, gradient="6*x", df=lambda x: 6 * x,
                                          source="power rule"))
    assert code == {"f": "lambda x: 3 * x**2", "df": "lambda x: 6 * x"}
