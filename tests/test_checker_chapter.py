"""The chapter "How good is a gradient check?", read from the built HTML."""

from __future__ import annotations

from pathlib import Path

from .helpers import embedded_records, main_text, page, table_of_class, tables

PAGE = "book/how-good-is-a-check.html"


def _text(soup) -> str:
    # Prose wraps across lines in the source; compare with single spaces.
    return " ".join(main_text(soup).split())


def test_detection_table_has_every_delta_for_every_checker_and_dtype(book_html: Path) -> None:
    rows = table_of_class(page(book_html, PAGE), "detection-table")
    assert [row["δ"] for row in rows] == ["0.1", "0.01", "0.001", "0.0001", "1e-05", "1e-06", "1e-07"]
    for checker in ("gradcheck (slow)", "gradcheck (fast)", "naive central", "this checker"):
        for dtype in ("float64", "float32"):
            assert all(row[f"{checker}, {dtype}"].endswith("%") for row in rows)
    # The claim, measured: in float64 this checker catches δ = 1e-6, gradcheck does not.
    by_delta = {row["δ"]: row for row in rows}
    assert by_delta["1e-06"]["this checker, float64"] == "100%"
    assert by_delta["1e-06"]["gradcheck (slow), float64"] == "0%"


def test_summary_table_matches_the_prose(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    rows = {(row["dtype"], row["checker"]): row for row in table_of_class(soup, "summary-table")}
    assert len(rows) == 8
    ours64, ours32, gc64 = rows["float64", "this checker"], rows["float32", "this checker"], rows["float64", "gradcheck (slow)"]
    assert ours64["false alarms"] == "0" and ours32["false alarms"] == "0"
    assert int(rows["float32", "gradcheck (slow)"]["false alarms"]) > int(ours32["correct ops"]) // 2
    text = _text(soup)
    assert (f"gradcheck (slow) raised {gc64['false alarms']} false alarms on {gc64['correct ops']} correct ops and "
            f"detected {gc64['detections']} of {gc64['mutants']} mutants") in text
    assert f"This checker raised {ours64['false alarms']} false alarms and detected {ours64['detections']} of" in text
    assert f"that is {ours64['evaluations of f']} evaluations of" in text
    assert all(float(row["seconds"]) > 0 and int(row["evaluations of f"]) > 0 for row in rows.values())


def test_detection_plot_is_an_image_with_alt_text(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    plots = [img for img in soup.find_all("img") if "fraction of scaled mutants detected" in img.get("alt", "")]
    assert len(plots) == 1
    source = (book_html / "book" / plots[0]["src"]).resolve()
    assert source.is_file() and source.stat().st_size > 5000


def test_per_element_and_kink_reports_are_shown(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    report = table_of_class(soup, "checker-report")
    assert {row["verdict"] for row in report} == {"pass", "fail"}
    assert all(row["dtype"] == "float64" and row["device"] == "cpu" for row in report)
    assert sum(row["verdict"] == "fail" for row in report) == 4  # the diagonal of a 4-element elementwise op
    kink = table_of_class(soup, "kink-report")
    assert [row["verdict"] for row in kink] == ["inconclusive", "pass", "pass", "pass"]
    assert kink[0]["why"] == "kink"


def test_no_wrong_backward_of_the_hard_cases_passes(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    rows = table_of_class(soup, "hard-cases")
    assert len(rows) == 8
    assert all(row["wrong backward"] in ("fail", "inconclusive") for row in rows)
    assert all(row["correct backward"] != "fail" for row in rows)
    text = _text(soup)
    assert f"Of {len(rows)} wrong backwards, this checker passed 0 ," in text


def test_the_float32_constant_in_hardsigmoids_float64_backward_is_shown(book_html: Path) -> None:
    import re

    import torch

    text = _text(page(book_html, PAGE))
    found = re.search(r"The float64 gradient is ([0-9.]+) , which is \\\(1/6\\\) rounded to float32 \( ([0-9.]+) \)", text)
    assert found, "the hardsigmoid finding is not stated"
    gradient, rounded = float(found.group(1)), float(found.group(2))
    assert gradient == rounded == float(torch.tensor(1 / 6, dtype=torch.float32)) != 1 / 6
    assert "gradcheck passes" in text and "This checker says fail" in text


def test_the_smallest_delta_is_not_claimed_for_checkers_that_flag_every_correct_op(book_html: Path) -> None:
    rows = table_of_class(page(book_html, PAGE), "summary-table")
    for row in rows:
        if row["false alarms"] == row["correct ops"]:
            assert row["smallest δ always caught"] == "meaningless: flags every correct op"
        else:
            assert float(row["smallest δ always caught"]) > 0


def test_records_of_first_and_second_derivative_checks_are_embedded(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    records = embedded_records(soup)
    checks = {r["check"] for r in records}
    assert any(c.startswith("Jacobian of") and "jacfwd" in c for c in checks)
    assert any(c.startswith("Hessian of") and "create_graph" in c for c in checks)
    assert all(r["executed"] and r["tolerance"]["reason"] for r in records)
    mutant = [r for r in records if r["function"].startswith("sin_mutant") and r["how"] == "returned"]
    assert mutant and all(r["verdict"] == "fail" and r["expected_failure"] for r in mutant)
    detached = [r for r in records if "detaches" in r["function"]]
    assert detached and all(r["verdict"] == "fail" and r["expected_failure"] for r in detached)
    numerical = [r for r in records if r["how"] == "numerical"]
    assert numerical and all(r["method"] == "richardson" and r["evaluations"] > 0 for r in numerical)
    # The shown tables carry shape, dtype and device.
    assert all({"shape", "dtype", "device"} <= set(rows[0]) for rows in tables(soup) if rows)


def test_second_derivative_table_and_devices_are_stated(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    rows = table_of_class(soup, "second-table")
    said = {(row["function"], row["check"]): row["passed"] for row in rows}
    assert said["x³ summed, detached backward", "gradcheck"] == "True"
    assert said["x³ summed, detached backward", "gradgradcheck"] == "False"
    text = _text(soup)
    assert "checks.available_devices() ): cpu" in text or "checks.available_devices() ): cpu, cuda" in text
    assert "Observed: gradcheck passed the detached cube" in text
