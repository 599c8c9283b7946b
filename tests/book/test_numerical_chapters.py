"""The finite-difference, precision and decision-guide chapters, read from the built HTML."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

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
    assert "or less rounds to zero in float16" in text and "relative step of  or less" not in text


def test_finite_difference_chapter_shows_numerical_records_with_their_telemetry(book_html: Path) -> None:
    soup = without_exercises(page(book_html, "book/finite-differences.html"))
    by_hand, side_by_side, strict = tables(soup)
    # A central difference written by hand, witnessed as numerical with the step rule its code used: each
    # dtype's row shows that rule's step (ε^(1/3)·|x| at x = 1.3), and checks counted no evaluations of f.
    assert {row["observed how"] for row in by_hand} == {"numerical estimate (central differences)"}
    assert all(row["verdict"] == "pass" and row["f evaluations"] == "none" for row in by_hand)
    for row in by_hand:
        eps = torch.finfo(getattr(torch, row["dtype"])).eps
        assert float(row["step h"]) == pytest.approx(eps ** (1 / 3) * 1.3, rel=1e-2)
    numerical = [row for row in side_by_side if row["observed how"].startswith("numerical estimate")]
    assert numerical and any(row["observed how"] == "returned by autograd.grad" for row in side_by_side)
    assert all(row["f evaluations"] not in ("", "none") and row["step h"] != "none" for row in numerical)
    assert strict[0]["verdict"] == "fail (expected failure)"
    # checks' own estimates (the reader's quotient, "by central_by_hand(x)", has a method but no count of f's calls)
    records = [r for r in embedded_records(soup) if r["how"] == "numerical" and r["method"] and ", by " not in r["check"]]
    assert records and all(r["method"] in ("forward", "central") and r["evaluations"] >= 1 for r in records)
    assert all(r["tolerance"]["reason"] for r in records)


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
    assert {row["option"] for row in summary} == {"A: fixed", "B: adaptive"}
    by_option = {(row["option"], row["dtype"]): int(row["f evaluations"]) for row in summary}
    # Richardson with three levels evaluates f three times as often as one central difference.
    assert by_option["B: adaptive", "float32"] == 3 * by_option["A: fixed", "float32"]
    assert all(r["tolerance"]["reason"].startswith("from the estimate's own error estimate") for r in adaptive)
    # Option A's allowance assumes derivatives of order 1, as the page says: derivative scale 1.
    assert all("derivative scale 1;" in r["tolerance"]["reason"] for r in fixed)
