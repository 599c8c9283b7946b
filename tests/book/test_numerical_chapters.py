"""The finite-difference, precision and decision-guide chapters, read from the built HTML."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import checks

from ..helpers import embedded_records, main_text, page, table_of_class, tables, without_exercises


def test_precision_plot_is_an_image_on_disk_with_alt_text(book_html: Path) -> None:
    soup = page(book_html, "book/precision.html")
    images = soup.select("main img") or soup.find_all("img")
    plots = [img for img in images if "log-log" in img.get("alt", "")]
    assert plots, [img.get("alt") for img in images]
    for img in plots:
        source = (book_html / "book" / img["src"]).resolve()
        assert source.is_file() and source.stat().st_size > 1000, source


def test_precision_table_has_measured_and_theoretical_columns_for_every_dtype(book_html: Path) -> None:
    rows = table_of_class(page(book_html, "book/precision.html"), "precision-table")
    assert {row["dtype"] for row in rows} == {"float16", "bfloat16", "float32", "float64"}
    assert {(row["dtype"], row["method"]) for row in rows} >= {("float32", "complex"), ("float16", "central")}
    for row in rows:
        assert row["theory step"].split(" = ")[0] in ("√ε", "ε^(1/3)", "any h ≤ √(6ε)")
        float(row["measured best step"]), float(row["measured smallest error"])
    text = main_text(page(book_html, "book/precision.html"))
    assert "or less is lost in float16 near 1" in text and "relative step of  or less" not in text


def test_finite_difference_chapter_shows_numerical_records_with_their_telemetry(book_html: Path) -> None:
    soup = without_exercises(page(book_html, "book/finite-differences.html"))
    records = embedded_records(soup)
    # A central difference written by hand, checked as numerical against the tolerance derived for its dtype
    # at the step its code used (ε^(1/3)·|x| at x = 1.3), which the reason states.
    by_hand = [r for r in records if r["check"] == "central difference at 1.3"]
    assert {r["dtype"] for r in by_hand} == {"float32", "float64"}
    for record in by_hand:
        eps = torch.finfo(getattr(torch, record["dtype"])).eps
        assert record["how"] == "numerical" and record["verdict"] == "pass"
        reason = record["tolerance"]["reason"]
        assert reason.startswith(f"derived for central differences in {record['dtype']}")
        assert float(reason.split(" h = ")[1].split(",")[0]) == pytest.approx(eps ** (1 / 3) * 1.3, rel=1e-2)
    # The table of many functions: autograd's rows and checks' own estimates, each with its step and count of f.
    side_by_side = next(rows for rows in tables(soup)
                        if any(row["observed how"] == "returned by autograd.grad" for row in rows))
    numerical = [row for row in side_by_side if row["observed how"].startswith("numerical estimate")]
    assert numerical and all(row["f evaluations"] not in ("", "none") and row["step h"] != "none"
                             for row in numerical)
    estimates = [r for r in records if r["how"] == "numerical" and r["method"]]
    assert estimates and all(r["method"] in ("forward", "central") and r["evaluations"] >= 1 for r in estimates)
    assert all(r["tolerance"]["reason"] for r in estimates)
    # Held to float32's default tolerance, a forward difference fails, as declared; with a reason, loosened,
    # it passes, and the record keeps the tolerance it replaced.
    strict = [r for r in records if r["check"] == "forward difference, float32's default"]
    assert len(strict) == 1 and strict[0]["verdict"] == "fail" and strict[0]["expected_failure"]
    loosened = [r for r in records if r["check"] == "forward difference, loosened"]
    assert len(loosened) == 1 and loosened[0]["verdict"] == "pass"
    assert loosened[0]["tolerance"]["history"][0]["old_rtol"] == checks.default_tolerance("float32").rtol
    refused = [r for r in records if r["gradient_formula"] == "raises ToleranceChangeError"]
    assert refused and all(r["verdict"] == "pass" for r in refused)


def test_gradcheck_outcomes_are_tabled_per_dtype_and_match_the_prose(book_html: Path) -> None:
    soup = page(book_html, "book/finite-differences.html")
    rows = table_of_class(soup, "gradcheck-table")
    assert {row["dtype"] for row in rows} == {"float64", "float32", "float16"}
    modes = {d: [mode for row in rows if row["dtype"] == d for mode in row["passed (slow, fast)"].split(", ")]
             for d in ("float64", "float32", "float16")}
    passes = {d: modes[d].count("yes") for d in modes}
    runs = len(modes["float64"])
    text = main_text(soup)
    assert f"gradcheck passed {passes['float64']} of {runs} runs in float64, {passes['float32']} in float32" in text
    # gradcheck warns for every input that is not float64, and for none that is.
    low = len(modes["float32"]) + len(modes["float16"])
    assert f"not double precision in {low} of the {low} float32 and float16 runs, and in 0 float64 runs" in text


def test_decision_guide_runs_both_options_on_the_same_functions(book_html: Path) -> None:
    soup = without_exercises(page(book_html, "book/decision-guide.html"))
    option_a, option_b = tables(soup)
    assert [row["check"].removeprefix("A: ") for row in option_a] == [row["check"].removeprefix("B: ") for row in option_b]
    records = embedded_records(soup)
    fixed = [r for r in records if r["check"].startswith("A: ")]
    adaptive = [r for r in records if r["check"].startswith("B: ")]
    # Each row shows how its estimate was made: steps and evaluations, and Richardson's error estimate.
    assert fixed and all(r["method"] == "central" and r["error_estimate"] is None for r in fixed)
    assert adaptive and all(r["method"] == "richardson" and r["error_estimate"] is not None for r in adaptive)
    shown = [" ".join(row.get_text(" ").split()) for row in soup.select("table.checks-rows tbody tr")]
    assert sum("evaluations of f" in text and "error estimate" not in text for text in shown) == len(fixed)
    assert sum("evaluations of f, error estimate" in text for text in shown) == len(adaptive)
    summary = table_of_class(soup, "decision-table")
    assert {row["option"] for row in summary} == {"A: fixed", "B: from the estimate"}
    by_option = {(row["option"], row["dtype"]): int(row["f evaluations"]) for row in summary}
    # Richardson with three levels evaluates f three times as often as one central difference.
    assert by_option["B: from the estimate", "float32"] == 3 * by_option["A: fixed", "float32"]
    assert all(r["tolerance"]["reason"].startswith("from the estimate's own error estimate") for r in adaptive)
    # Option A's allowance assumes derivatives of order 1, as the page says: derivative scale 1.
    assert all("derivative scale 1;" in r["tolerance"]["reason"] for r in fixed)
