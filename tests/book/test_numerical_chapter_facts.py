"""Facts of the intro, finite-difference, precision, decision-guide and failures chapters, read from the built
HTML (and, for the figure, from the plotting function; how they lay out in the browser: tests/browser)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

import checks
from checks.core.tolerances import NUMERICAL_SAFETY
from checks.teaching.precision import GRADCHECK_DEFAULTS, Sweep, error_plot

from ..helpers import embedded_records, main_text, page, table_of_class, without_exercises

BOOK = Path(__file__).resolve().parents[2] / "book"


def number_after(text: str, words: str) -> float:
    """The number printed right after words in the page text."""
    found = re.search(re.escape(words) + r"\s*([-+]?\d[\d.]*(?:e[-+]?\d+)?)", text)
    assert found, f"no number after {words!r}"
    return float(found.group(1))


# Introduction


def test_intro_tolerance_row_is_whole_and_digits_are_computed(book_html: Path) -> None:
    soup = page(book_html, "book/intro.html")
    rows = {cells[0].get_text(strip=True): cells[1].get_text(" ", strip=True)
            for cells in (tr.find_all("td") for tr in soup.select("main table tbody tr")) if len(cells) == 2}
    assert "atol + rtol * abs(expected)" in rows["verdict"]
    assert rows["error · allowed"].endswith("with its reason listed under the table")
    text = main_text(soup)
    for dtype, name in ((torch.float32, "float32"), (torch.float64, "float64")):
        digits = (1 - math.log2(torch.finfo(dtype).eps)) * math.log10(2)
        assert f"{name} {'carries ' if name == 'float32' else ''}about {digits:.0f}" in text


# Finite differences


def test_finite_difference_equation_is_two_lines_not_one_clipped_line(book_html: Path) -> None:
    soup = page(book_html, "book/finite-differences.html")
    first = soup.select_one("main div.math")
    assert first is not None and r"\begin{aligned}" in first.get_text() and r"\\" in first.get_text()


def test_finite_difference_tolerance_choices_are_explained_with_measured_numbers(book_html: Path) -> None:
    soup = page(book_html, "book/finite-differences.html")
    text = main_text(soup)
    assert r"\max(|x|, 1)" in text and r"scaled with \(|x|\)" not in text
    assert r"\max(1, |f'|)" in text and "derivative scale" in text
    assert number_after(text, "The factor \\(c\\) =") == NUMERICAL_SAFETY
    # The measured ratio of error to the unscaled model, recomputed from the page's records.
    # checks' own estimates (a method and a derived tolerance), not the quotients the reader's cells check
    numerical = [r for r in embedded_records(without_exercises(soup))
                 if r["how"] == "numerical" and r["method"] and not r["expected_failure"]]
    # Each element against its own allowance's model (a numerical row's atol may be per element).
    ratio = max(float(((torch.tensor(r["observed_gradient"]) - torch.tensor(r["analytical_gradient"])).abs()
                       / (torch.tensor(r["tolerance"].get("element_atol", r["tolerance"]["atol"]),
                                       dtype=torch.float64) / NUMERICAL_SAFETY)).max())
                for r in numerical)
    shown = number_after(text, f"(atol divided by {NUMERICAL_SAFETY:g} ) is")
    assert shown == pytest.approx(ratio, rel=0.05) and ratio <= NUMERICAL_SAFETY
    # No typed copy of assert_close's float32 default: the prose shows the value the code holds.
    assert "1.3e-6" not in (BOOK / "finite-differences.md").read_text().split("## The same estimate")[1].split("```")[0]
    assert number_after(text, "float32 default (rtol") == checks.default_tolerance("float32").rtol


def test_finite_differences_says_the_rounding_term_follows_each_element_s_step(book_html: Path) -> None:
    # Issue 30: "ε|f|/h is the same for every element" was wrong: each element has its own step h0·max(|x_i|, 1).
    from checks.core.numerical import default_step, representable_step

    soup = without_exercises(page(book_html, "book/finite-differences.html"))
    text = " ".join(main_text(soup).split())
    assert "is the same for every element" not in text
    weak = [r for r in embedded_records(soup) if r["how"] == "numerical" and r["method"] and r["weak_reason"]
            and r["device"] == "cpu"]
    weakest = max(weak, key=lambda r: r["detectable_relative_error"])
    dtype = getattr(torch, weakest["dtype"])
    steps = representable_step(torch.tensor(weakest["x"], dtype=dtype), default_step(weakest["method"], dtype).h0)
    ratio = float(steps.max() / steps.min())
    assert ratio > 1.5  # the steps do differ, so the rounding term ε|f|/h does too
    assert number_after(text, "differ by a factor of at most") == pytest.approx(ratio, rel=0.05)


def test_finite_differences_one_allowance_for_all_is_sized_by_the_smallest_step(book_html: Path) -> None:
    # Issue 30: the single allowance the page compares with is the largest its steps give, the smallest step's
    # (rounding ε|f|/h dominates): 12.3 % at x = -1, where the largest step's would be 11.3 %.
    from checks.core.numerical import default_step, representable_step

    soup = without_exercises(page(book_html, "book/finite-differences.html"))
    text = " ".join(main_text(soup).split())
    record = next(r for r in embedded_records(soup) if r["function"] == "exp(x).sum()" and r["method"] == "forward"
                  and r["dtype"] == "float32" and r["device"] == "cpu")
    x = torch.tensor(record["x"], dtype=torch.float32)
    steps = representable_step(x, default_step("forward", torch.float32).h0).double()
    derivative = torch.exp(x.double())
    at = record["x"].index(-1.0)

    def detectable(h: float) -> float:
        tolerance = checks.numerical_tolerance(
            "float32", "forward", step=h, f_scale=float(derivative.sum()), gradient_scale=float(derivative.max()),
            derivative_scale=max(1.0, float(derivative.max())))
        return 100 * float((tolerance.atol + tolerance.rtol * derivative[at]) / derivative[at])

    smallest, largest = detectable(float(steps.min())), detectable(float(steps.max()))
    assert smallest > largest
    assert "sized by the smallest step (whose rounding term is the largest)" in text
    said = text.split("sized by the smallest step")[1]
    assert number_after(said, "pass a gradient up to") == pytest.approx(smallest, rel=0.01)


def test_finite_difference_chapter_shows_the_plain_pytorch_it_checks(book_html: Path) -> None:
    code = " ".join(block.get_text() for block in page(book_html, "book/finite-differences.html")
                    .select("main div.cell_input"))
    for call in ("requires_grad=True", ".backward()", "x.grad", "(f(x + h) - f(x - h)) / (2 * h)",
                 "torch.autograd.gradcheck("):
        assert call in code, call


def test_gradcheck_table_shows_the_numbers_that_differed(book_html: Path) -> None:
    rows = table_of_class(page(book_html, "book/finite-differences.html"), "gradcheck-table")
    failed = [row for row in rows if "no" in row["passed (slow, fast)"].split(", ")]
    assert failed and len(failed) < len(rows)
    for row in failed:
        analytical, numerical = float(row["analytical"]), float(row["numerical"])
        difference, allowed = float(row["differ by"]), float(row["allowed"])
        # The cells show 3 significant digits.
        assert difference == pytest.approx(abs(analytical - numerical), abs=1e-2 * max(abs(analytical), abs(numerical)))
        assert difference > allowed  # the element shown is one that failed gradcheck's test
        assert allowed == pytest.approx(GRADCHECK_DEFAULTS["atol"] + GRADCHECK_DEFAULTS["rtol"] * abs(numerical),
                                        rel=1e-2)
    assert len({(row["analytical"], row["numerical"]) for row in failed}) > 1
    assert all(row["analytical"] == "" for row in rows if row["passed (slow, fast)"] == "yes, yes")


# Precision


def test_precision_wording_about_complex_dtypes_and_the_model_error(book_html: Path) -> None:
    text = main_text(page(book_html, "book/precision.html"))
    assert "torch.complex32" in text and "no complex type for float16" not in text
    assert "theory floor" not in text and "theoretical error floor" not in text
    assert "4 to 6 digits" not in text
    with pytest.raises(checks.DtypeError, match="complex32"):
        checks.plan(checks.Expectation("sin(x)", torch.sin, "cos(x)", torch.cos, "d/dx sin = cos"), 1.0,
                    how="numerical", method="complex", dtypes="float16")


def test_precision_table_complex_best_step_is_inside_the_stated_range(book_html: Path) -> None:
    soup = page(book_html, "book/precision.html")
    rows = table_of_class(soup, "precision-table")
    complex_rows = [row for row in rows if row["method"] == "complex"]
    assert complex_rows
    for row in complex_rows:
        formula, bound = row["theory step"].split(" = ")
        assert formula == "any h ≤ √(6ε)"
        assert float(row["measured best step"]) <= float(bound)
    text = main_text(soup)
    # The digits claimed in the summary are those of the table's error at the chosen step.
    for row in rows:
        if row["dtype"] == "float32" and row["method"] in ("forward", "central"):
            digits = -math.log10(float(row["error at chosen step"]) / math.cos(1.0))
            words = "a forward difference was good to" if row["method"] == "forward" else "significant digits and a central one to"
            assert number_after(text, words) == pytest.approx(digits, abs=0.1)


def test_error_plot_legend_has_every_method_and_draws_small_errors_where_they_are() -> None:
    import matplotlib

    matplotlib.use("Agg")
    eps = torch.finfo(torch.float32).eps
    sweeps = [
        Sweep("forward", "float16", [0.1, 0.01], [0.05, 0.01], None, (0.03, 0.02)),
        Sweep("central", "float32", [1e-2, 1e-3], [1e-5, 1e-6], None, (5e-3, 3e-6)),
        # An error below ε/2 and an exact 0: the first is drawn as it is, the second on the bottom edge.
        Sweep("complex", "float32", [1e-3, 1e-4, 1e-5], [eps / 4, 0.0, eps], None, (3e-4, eps / 4)),
    ]
    fig = error_plot(sweeps, (0.84, 0.54, -0.84, -0.54))
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    for method in ("forward", "central", "complex"):
        assert f"{method}: measured" in labels
    assert "exactly 0 (drawn at the bottom)" in labels
    float32_axis = fig.axes[1]
    drawn = {tuple(line.get_xdata()): list(line.get_ydata()) for line in float32_axis.get_lines()}
    assert drawn[(1e-3, 1e-5)] == [eps / 4, eps]
    bottom = float32_axis.get_ylim()[0]
    assert drawn[(1e-4,)] == [bottom] and bottom < eps / 4
    # One panel per row: the panels share their left edge.
    assert len({round(axis.get_position().x0, 3) for axis in fig.axes}) == 1
    import matplotlib.pyplot as plt

    plt.close(fig)


# Decision guide


def test_decision_guide_richardson_text_levels_and_step_agree(book_html: Path) -> None:
    soup = page(book_html, "book/decision-guide.html")
    text = main_text(soup)
    assert r"\(h^2\) and \(h^4\)" in text and r"\varepsilon^{1/7}" in text
    rows = table_of_class(soup, "richardson-step-table")
    for row in rows:
        assert row["default step"].startswith({"2": "ε^(1/5)", "3": "ε^(1/7)"}[row["levels"]])
    three = [row for row in rows if row["levels"] == "3"]
    better = sum(float(row["error at ε^(1/7)"]) < float(row["error at ε^(1/5)"]) for row in three)
    assert f"smaller than at \\(\\varepsilon^{{1/5}}\\) in {better} of {len(three)} dtypes" in text
    # The Option B checks ran with three levels at the ε^(1/7) step (times max(|x|, 1)).
    for record in embedded_records(soup):
        if record["method"] == "richardson":
            steps = record["step"]
            assert len(steps) == 3
            first = steps[0][0] if isinstance(steps[0], list) else steps[0]
            x = record["x"][0] if isinstance(record["x"], list) else record["x"]
            eps = torch.finfo(getattr(torch, record["dtype"])).eps
            assert first == pytest.approx(eps ** (1 / 7) * max(abs(x), 1.0), rel=1e-2)


# Failures


def test_failures_justified_tolerance_reason_matches_the_numbers(book_html: Path) -> None:
    soup = page(book_html, "book/failures.html")
    recheck = next(r for r in embedded_records(soup) if r["check"].startswith("float32 at a justified float32 tolerance"))
    reason = recheck["tolerance"]["reason"]
    assert "3π/4" in reason and "atol" in reason and "a few float32 roundings" not in reason
    eps = torch.finfo(torch.float32).eps
    expected = torch.tensor(recheck["analytical_gradient"], dtype=torch.float64)
    error = (torch.tensor(recheck["observed_gradient"], dtype=torch.float64) - expected).abs()
    rtol = recheck["tolerance"]["rtol"]
    needs_atol = int((error > rtol * expected.abs()).sum())
    worst = int((error / expected.abs()).argmax())
    text = main_text(soup)
    assert (f"Of the {expected.numel()} elements, "
            + ("none needed the absolute floor" if needs_atol == 0 else f"{needs_atol} needed the absolute floor")) in text
    assert number_after(text, "(index") == worst
    shown = re.search(r"where the gradient is only (\S+) : an error of (\S+) , a relative (\S+) , or (\S+)", text)
    assert shown, "the worst element's sentence"
    assert float(shown.group(3)) == pytest.approx(float(error[worst] / expected[worst].abs()), rel=0.05)
    assert float(shown.group(4)) == pytest.approx(float(error[worst] / expected[worst].abs()) / eps, rel=0.05)
    # The largest relative error sits next to the zero of cos x + sin x at 3π/4.
    assert abs(recheck["x"][worst] - 3 * math.pi / 4) < 0.1
    assert rtol / eps == pytest.approx(number_after(text, f"at rtol {rtol:.2g} , a relative error of"), rel=0.05)


def test_failures_chapter_shows_plain_backward_calls(book_html: Path) -> None:
    code = " ".join(block.get_text() for block in page(book_html, "book/failures.html").select("main div.cell_input"))
    assert "SquareMissingFactor.apply(x).backward()" in code and "torch.relu(x).sum().backward()" in code
    assert "requires_grad=True" in code and "torch.autograd.grad(" in code
    # The records keep that code: the failure box shows what ran.
    records = embedded_records(page(book_html, "book/failures.html"))
    stored = next(r for r in records if r["function"] == "SquareMissingFactor.apply(x)" and r["how"] == "stored")
    assert any("SquareMissingFactor.apply(x).backward()" in source for source in stored["code"].values())


@pytest.mark.parametrize("name, calls", [
    ("precision", ("(torch.sin(x + h) - torch.sin(x)) / h", "(torch.sin(x + h) - torch.sin(x - h)) / (2 * h)",
                   ".imag / h")),
    ("decision-guide", ("(f(x + h) - f(x - h)) / (2 * h)", "(4 * d2 - d1) / 3", "(16 * r2 - r1) / 15")),
])
def test_numerical_chapters_write_their_estimates_in_plain_torch(book_html: Path, name: str, calls: tuple) -> None:
    code = " ".join(block.get_text() for block in page(book_html, f"book/{name}.html").select("main div.cell_input"))
    for call in calls:
        assert call in code, call
