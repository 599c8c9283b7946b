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
from checks.__main__ import main
from checks.sphinx import ledger
from checks.sphinx.fingerprint import components
from checks.teaching.display import records_html

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


def test_status_reads_the_verdict_with_the_expected_failure_flag() -> None:
    assert run(SQUARE).status == "pass"
    assert run(WRONG).status == "unexpected failure" and run(WRONG).outcome == "fail"
    assert run(WRONG, expected_failure=True).status == "expected failure"
    assert run(SQUARE, expected_failure=True).status == "unexpected pass"
    assert checks.plan(SQUARE, 3.0, devices="cpu").records()[0].outcome is None


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
    # The environment names the record's device, dtype and seed; the rest is the page's, stated once.
    for item in ("device cpu", "dtype float64", "seed"):
        assert item in text
    assert torch.__version__ not in text


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
    assert [item["status"] for item in ledger.ordered(items)] == ["unexpected failure", "expected failure", "pass"]
    counts = ledger.summary(items)
    assert counts["checks"] == 3
    assert counts["statuses"] == {"pass": 1, "expected failure": 1, "unexpected failure": 1}
    assert counts["outcomes"] == {"pass": 1, "fail": 2}
    assert counts["devices"] == {"cpu": {"pass": 1, "expected failure": 1, "unexpected failure": 1}}


def test_ledger_entries_are_a_superset_of_the_documented_record_shape() -> None:
    item = json.loads(ledger.to_json(entries(run(SQUARE))))["checks"][0]
    assert {"function": "x*x", "x": 3.0, "analytical_gradient": 6.0, "executed": True}.items() <= item.items()
    assert item["observed_gradient"] == pytest.approx(6.0)
    assert {"chapter", "page", "anchor", "outcome", "status", "how", "tolerance", "verdict",
            "expected_failure"} <= set(item)


def test_ledger_html_links_each_row_to_its_chapter_and_offers_the_json() -> None:
    items = entries(run(SQUARE), run(WRONG))
    soup = BeautifulSoup(ledger.ledger_html(items, link=lambda item: f"{item['page']}#{item['anchor']}",
                                            json_href="../ledger.json"), "html.parser")
    assert soup.select_one("a.checks-ledger-download")["href"] == "../ledger.json"
    rows = soup.select("table.checks-ledger tbody tr")
    assert [row.select_one("td.checks-verdict").get_text() for row in rows] == ["unexpected failure", "pass"]
    assert rows[0].select_one("td.checks-chapter a")["href"] == f"book/a.html#{items[1]['anchor']}"


def test_a_study_s_runs_are_tallied_not_listed_and_still_counted() -> None:
    items = entries(run(SQUARE), run(WRONG), run(SQUARE), run(WRONG))
    for item in items[2:]:
        item["measurement"] = "a run of a study"
    soup = BeautifulSoup(ledger.ledger_html(items, link=lambda item: item["page"], json_href="ledger.json"),
                         "html.parser")
    assert len(soup.select("table.checks-ledger tbody tr")) == 2
    (tally,) = soup.select("table.checks-ledger-measurements tbody tr")
    assert soup.select_one("p.checks-study").get_text().endswith(": a run of a study")
    cells = dict(zip([th.get_text() for th in soup.select("table.checks-ledger-measurements thead th")],
                     [td.get_text() for td in tally.select("td")]))
    assert (cells["how"], cells["runs"], cells["pass"], cells["fail"]) == ("stored", "2", "1", "1")
    assert "4 checks in this build" in soup.select_one("div.checks-ledger-summary").get_text(" ", strip=True)


def write(tmp_path: Path, items: list[ledger.Entry]) -> Path:
    """A ledger as a finished build stamps it: this checkout's fingerprint, one chapter of these checks."""
    source = tmp_path / "a.md"
    source.write_text("# A chapter\n")
    chapter = {"chapter": "A chapter", "page": "book/a.html", "source": "a.md",
               "source_sha256": ledger.file_sha256(source), "executed": len(items), "execution": "force: succeeded"}
    build = {"finished": True, "fingerprint": components(), "sources": ".", "chapters": [chapter]}
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
    # Each says what was expected, from which formula, and what was observed.
    assert "    expected 9, from the formula 3*x (" in out and "    observed 6\n" in out
    assert "    expected 6, from the formula 2*x (" in out


def test_a_property_checked_against_true_or_false_reaches_the_ledger(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor(1.0, requires_grad=True)
    checks.expect(x.is_leaf, True, "ledger: a leaf")
    checks.expect(x.grad is None, False, "ledger: no gradient yet", expected_failure="None until backward()")
    site = write(tmp_path, entries(*checks.records_of("ledger: a leaf"), *checks.records_of("ledger: no gradient yet")))
    assert main([str(site)]) == 0
    assert "2 checks: 1 expected failure, 1 pass" in capsys.readouterr().out


def stamped(tmp_path: Path, change) -> Path:
    """A sound ledger of one failure declared expected and one pass, then changed by change(data)."""
    site = write(tmp_path, entries(run(SQUARE), run(WRONG, expected_failure=True)))
    path = site / ledger.LEDGER_JSON
    data = json.loads(path.read_text())
    result = change(data)
    path.write_bytes(result if isinstance(result, bytes) else json.dumps(data).encode())
    return site


def _set(where: str, key: str, value: object):
    def change(data: dict) -> None:
        target = {"check": data["checks"][0], "build": data["build"], "chapter": data["build"]["chapters"][0],
                  "fingerprint": data["build"]["fingerprint"]}[where]
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return change


DELETE = object()
MALFORMED = {
    "missing file": None,
    "not JSON": lambda data: b"not json",
    "not UTF-8": lambda data: b'{"build": {}, "checks": ["\xff\xfe"]}',
    "a list, the old format": lambda data: json.dumps(data["checks"]).encode(),
    "not an object": lambda data: b'"ledger"',
    "no build stamp": lambda data: json.dumps({"checks": data["checks"]}).encode(),
    "unfinished build": _set("build", "finished", False),
    "no fingerprint": _set("build", "fingerprint", DELETE),
    "no sources folder": _set("build", "sources", DELETE),
    "sources elsewhere": _set("build", "sources", "elsewhere"),
    "a check that is not an object": lambda data: data["checks"].append("a check"),
    "a check without an id": _set("check", "id", DELETE),
    "a check without a verdict": _set("check", "verdict", DELETE),
    "a check without an outcome": _set("check", "outcome", DELETE),
    "a bogus outcome": _set("check", "outcome", "fine"),
    "a bogus status": _set("check", "status", "fine"),
    "a planned verdict": _set("check", "verdict", "planned"),
    "a verdict of True": _set("check", "verdict", True),
    "expected_failure 'no'": _set("check", "expected_failure", "no"),
    "expected_failure 0": _set("check", "expected_failure", 0),
    "executed False": _set("check", "executed", False),
    "x a string": _set("check", "x", "3"),
    "a chapter without its source": _set("chapter", "source", DELETE),
    "a chapter count that is not a number": _set("chapter", "executed", "2"),
    "a chapter count of True": _set("chapter", "executed", True),
    "another torch": _set("fingerprint", "torch", "1.0.0"),
    "another checks package": _set("fingerprint", "checks source", "0" * 64),
    "other devices": _set("fingerprint", "devices", "cpu,cuda"),
    "another numpy": _set("fingerprint", "numpy", "0.1"),
    "a chapter's source edited since": _set("chapter", "source_sha256", "0" * 64),
    "a chapter's source gone": _set("chapter", "source", "gone.md"),
    "left_out not a list": _set("build", "left_out", "book/stray.md"),
    "a check without its formula": _set("check", "gradient_formula", DELETE),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_command_line_refuses_a_missing_malformed_or_mismatched_ledger_in_one_line(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    change = MALFORMED[name]
    site = tmp_path if change is None else stamped(tmp_path, change)
    assert main([str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m checks: ") and str(tmp_path) in err and len(err.splitlines()) == 1


PROBLEMATIC = {
    "an empty ledger": (lambda data: (data["checks"].clear(), data["build"]["chapters"].clear()),
                        "holds no checks"),
    "a stored status the verdict contradicts": (_set("check", "status", "unexpected pass"), "stored outcome"),
    "a check lost from the ledger": (lambda data: data["checks"].pop(), "2 checks executed, 1 in the ledger"),
    "a chapter whose execution failed": (_set("chapter", "execution", "force: failed (ZeroDivisionError)"),
                                         "checks after the error never ran"),
    "a check from a page the build did not execute": (_set("check", "page", "book/b.html"),
                                                      "which the build did not execute"),
    "the same check twice": (lambda data: data["checks"].append(dict(data["checks"][0])), "in the ledger 2 times"),
    "a chapter the table of contents leaves out": (_set("build", "left_out", ["book/stray.md"]),
                                                   "book/stray.md is not in the book's table of contents"),
}


@pytest.mark.parametrize("name", PROBLEMATIC)
def test_command_line_lists_the_problems_of_a_readable_ledger(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    change, words = PROBLEMATIC[name]
    assert main([str(stamped(tmp_path, change))]) == 1
    assert words in capsys.readouterr().out


def test_the_verifier_recomputes_the_outcome_instead_of_trusting_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    site = write(tmp_path, entries(run(WRONG)))
    path = site / ledger.LEDGER_JSON
    data = json.loads(path.read_text())
    data["checks"][0]["outcome"] = "pass"  # a failure relabelled as a pass
    path.write_text(json.dumps(data))
    assert main([str(site)]) == 1
    out = capsys.readouterr().out
    assert "unexpected failure: x*x at x=3" in out and "stored outcome 'pass'" in out


def test_python_dash_m_checks_runs_as_a_module(tmp_path: Path) -> None:
    site = write(tmp_path, entries(run(WRONG)))
    result = subprocess.run([sys.executable, "-m", "checks", str(site)], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 1
    assert "unexpected failure" in result.stdout


def test_code_without_python_source_is_named_stably() -> None:
    # A repr carries a memory address that changes from kernel to kernel: two builds would differ.
    from checks.teaching.source import source_code

    code = source_code(checks.Expectation("exp(x).sum()", lambda x: torch.exp(x).sum(), "exp(x)", torch.exp,
                                          "d/dx eˣ = eˣ"))
    assert code["df"] == "torch.exp  # built in: no Python source"
    assert "lambda x: torch.exp(x).sum()" in code["f"]


def test_each_lambda_shows_its_own_expression_when_several_share_a_line() -> None:
    from checks.teaching.source import source_code

    code = source_code(checks.Expectation(function="3*x**2", f=lambda x: 3 * x**2, gradient="6*x", df=lambda x: 6 * x,
                                          source="power rule"))
    assert code == {"f": "lambda x: 3 * x**2", "df": "lambda x: 6 * x"}


def test_every_executed_record_is_collected_and_loaded_ones_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from checks.teaching.records import RECORDS_VARIABLE, collect, collected, read_collected

    target = tmp_path / "chapter.jsonl"
    monkeypatch.setenv(RECORDS_VARIABLE, str(target))
    record = run(WRONG, x=11.0)  # never displayed
    assert record in collected()
    assert [item["id"] for item in read_collected(target)] == [record.id]
    declared = collect(replace(record, expected_failure=True))  # the same id collected again: the last one is kept
    assert [item["expected_failure"] for item in read_collected(target)] == [True]
    assert declared in collected() and record not in collected()
    checks.load_records(checks.dump_records([run(SQUARE, x=12.0)]))
    lines = target.read_text().splitlines()
    assert len(lines) == 3  # the record run, its replacement, and the run of x=12, but not the one loaded back
    assert not checks.plan(SQUARE, 13.0, devices="cpu").records()[0].executed  # a plan is not collected


def test_a_record_file_cut_short_is_an_error_not_a_lost_record(tmp_path: Path) -> None:
    from checks.teaching.records import read_collected

    target = tmp_path / "chapter.jsonl"
    target.write_text(run(SQUARE).to_json() + "\n" + run(WRONG).to_json()[:40])
    with pytest.raises(ValueError, match="line 2: not a complete record"):
        read_collected(target)


def test_a_large_check_is_folded_in_its_json_and_the_ledger_still_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    total = checks.Expectation("x.sum()", lambda x: x.sum(), "1", torch.ones_like, "sum rule")
    x = torch.linspace(-1.0, 1.0, 20_000, dtype=torch.float64)
    record = checks.plan(total, x, devices="cpu").run().one()
    data = record.to_dict()
    assert len(record.to_json()) < 10_000  # 20 000 values each in x, expected and observed would be ~1 MB
    assert data["x"]["count"] == 20_000 and data["x"]["shape"] == [20_000]
    assert data["x"]["min"] == -1.0 and data["x"]["max"] == 1.0
    assert data["observed_gradient"]["worst"][0]["difference"] == record.abs_error
    assert record.x == x.tolist()  # the record itself keeps every value; only what is written is folded
    assert main([str(write(tmp_path, entries(record)))]) == 0
    assert "20000 values" in BeautifulSoup(records_html([checks.Record.from_dict(data)]), "html.parser").get_text()


def test_a_pass_whose_expected_outcome_is_no_gradient_verifies(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    nothing = replace(run(SQUARE), analytical_gradient=None, observed_gradient=None)  # x.grad stays None
    assert main([str(write(tmp_path, entries(nothing)))]) == 0


def test_ledger_json_is_strict_json_and_reads_its_non_finite_numbers_back(tmp_path: Path) -> None:
    # The torch.where trap of the chapter on kinks: sqrt's NaN derivative at x < 0 survives the mask, so the
    # observed gradient holds a NaN and the error is not finite.
    trap = checks.Expectation("where(x > 0, sqrt(x), 0).sum()", lambda x: torch.where(x > 0, torch.sqrt(x), 0).sum(),
                              "1/(2 sqrt(x)) where x > 0, else 0",
                              lambda x: torch.where(x > 0, 0.5 / torch.sqrt(x.clamp(min=1e-300)), 0), "power rule")
    items = entries(run(trap, x=[-1.0, 4.0], expected_failure=True))
    site = write(tmp_path, items)
    text = (site / ledger.LEDGER_JSON).read_text()

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    data = json.loads(text, parse_constant=refuse)  # a strict reader: NaN and Infinity would raise here
    written = data["checks"][0]
    assert written["observed_gradient"] == ["nan", 0.25] and written["analytical_gradient"] == [0.0, 0.25]
    assert (written["abs_error"], written["rel_error"]) == ("inf", "inf")  # a non-finite element: an infinite error
    read = ledger.read(site).entries[0]
    observed = read["observed_gradient"]
    assert observed[0] != observed[0] and observed[1] == 0.25  # a float NaN again, beside a plain number
    assert read["check"] == items[0]["check"]  # text fields are left as they are
    assert ledger.digest_of_file(site / ledger.LEDGER_JSON) == ledger.digest(items)
    assert main([str(site)]) == 0  # python -m checks reads it: a declared failure, no problem


def test_a_problem_of_many_numbers_is_told_by_its_first_last_and_worst_elements() -> None:
    wrong_sum = checks.Expectation("(x*x).sum()", lambda x: (x * x).sum(), "ones_like(x)", torch.ones_like, "a slip")
    (record,) = checks.plan(wrong_sum, [float(n) for n in range(20)], dtypes=("float64",)).run()
    lines = ledger.describe_problem(record.to_dict(), "unexpected failure", "chapter 'A'")
    assert lines[0] == "unexpected failure: (x*x).sum() at x=tensor of shape (20,) (float64 on cpu, stored) in chapter 'A'"
    assert lines[1] == "    expected 20 values [1, 1, 1, ..., 1, 1], from the formula ones_like(x) (a slip)"
    assert lines[2] == "    observed 20 values [0, 2, 4, ..., 36, 38]"
    assert lines[3] == "    worst element at index (19,): expected 1, observed 38"
