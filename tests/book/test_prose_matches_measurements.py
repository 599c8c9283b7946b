"""Page fixes of issue 21 ("Sound checks"), each read from the built HTML: no sentence the measurements refute."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import pytest
import torch

from checks.core.tolerances import NUMERICAL_SAFETY

from ..helpers import embedded_records, main_text, page, table_of_class


def text_of(book_html: Path, name: str) -> str:
    # Prose wraps across lines in the source and Sphinx curls apostrophes; compare with single spaces.
    return " ".join(main_text(page(book_html, f"book/{name}.html")).replace("’", "'").split())


def number_after(text: str, words: str) -> float:
    found = re.search(re.escape(words) + r"\s*([-+]?\d[\d.]*(?:e[-+]?\d+)?)", text)
    assert found, f"no number after {words!r}"
    return float(found.group(1))


def outputs_of(book_html: Path, name: str) -> str:
    return " ".join(block.get_text() for block in page(book_html, f"book/{name}.html").select("main div.cell_output"))


# Decision guide


def test_richardsons_rounding_constant_comes_from_its_weights(book_html: Path) -> None:
    text = text_of(book_html, "decision-guide")
    assert number_after(text, r"(64 \cdot 4 + 20 \cdot 2 + 1)/45 \approx\)") == pytest.approx(297 / 45, abs=0.05)
    assert r"R = (64 d_4 - 20 d_2 + d_1)/45" in text
    assert "while rounding still costs about" not in text


def test_the_error_estimate_is_named_as_ridders(book_html: Path) -> None:
    text = text_of(book_html, "decision-guide")
    assert r"\max(|R - r_2|, |R - r_1|)" in text and "Ridders" in text


def test_the_curvature_exercise_fails_clearly_not_at_the_edge(book_html: Path) -> None:
    soup = page(book_html, "book/decision-guide.html")
    text = " ".join(main_text(soup).split())
    assert "Take \\(f(x) = e^{10x}\\) ( exp(10*x) ) at x = 0.5" in text
    rows = [r for r in embedded_records(soup) if r["check"] == "A: exp(10*x)"]
    assert {r["dtype"] for r in rows} == {"float32", "float64"}
    shown = re.search(r"its error (\S+) times its allowance in float32 and (\S+) times in float64", text)
    assert shown, "the margin of Option A's failure"
    for record in rows:
        allowed = record["tolerance"]["atol"] + record["tolerance"]["rtol"] * abs(record["analytical_gradient"])
        over = record["abs_error"] / allowed
        assert record["verdict"] == "fail" and record["expected_failure"] and over > 2
        assert float(shown.group(1 if record["dtype"] == "float32" else 2)) == pytest.approx(over, rel=0.05)


# Finite differences


def test_the_derivative_scale_is_said_to_hold_within_the_measured_factors(book_html: Path) -> None:
    text = text_of(book_html, "finite-differences")
    assert "That holds for the functions here" not in text
    factors = {}
    for name, f, x in (("sin(x)*x", lambda x: torch.sin(x) * x, [1.3]),
                       ("tanh(x).pow(2).sum()", lambda x: torch.tanh(x).pow(2).sum(), [0.3, -1.5])):
        x = torch.tensor(x, dtype=torch.float64)
        first, higher = [], []
        for j in range(x.numel()):
            step = torch.zeros_like(x)
            step[j] = 1.0
            d1 = torch.func.grad(lambda t: f(x + t * step).sum())
            d2 = torch.func.grad(d1)
            d3 = torch.func.grad(d2)
            at = torch.tensor(0.0, dtype=torch.float64)
            first.append(abs(float(d1(at))))
            higher.append(max(abs(float(d2(at))), abs(float(d3(at)))))
        factors[name] = max(h / max(1.0, d) for h, d in zip(higher, first))  # each element's own scale
    for name, factor in factors.items():
        assert 1 < factor < NUMERICAL_SAFETY
        assert number_after(text, f"{name} (a factor") == pytest.approx(factor, rel=0.05)
    assert "which the safety factor c below absorbs" in text


def test_the_cube_exercises_tolerance_is_a_bound_at_the_step_its_code_used(book_html: Path) -> None:
    soup = page(book_html, "book/finite-differences.html")
    record = next(r for r in embedded_records(soup) if r["check"] == "central difference of Cube")
    h = 1e-6
    assert record["how"] == "numerical" and record["verdict"] == "pass" and record["dtype"] == "float64"
    assert f"at h = {h:g} in float64" in record["tolerance"]["reason"]
    # The bound, term by term, recomputed: truncation, the moved midpoint, the cubes' roundings, the last division.
    eps = torch.finfo(torch.float64).eps
    size = torch.tensor(record["x"], dtype=torch.float64).abs() + h
    bound = ((h + eps * size / 2) ** 2 + 3 * eps * size**2 + 2 * eps * size**3 / (2 * h - eps * size)
             + 1.5 * eps * 3 * (size - h) ** 2).max().item()
    assert record["tolerance"]["atol"] == pytest.approx(bound) and record["tolerance"]["rtol"] == 0
    assert "doubled for margin" not in record["tolerance"]["reason"]
    code = " ".join(block.get_text() for block in soup.select("main div.cell_input"))
    assert "(plus - minus)" in code and "h = 1e-6" in code  # it divides by the step x really received


def test_gradchecks_warning_is_stated_as_torch_gives_it(book_html: Path) -> None:
    text = text_of(book_html, "finite-differences")
    assert "neither float64 nor complex128 (complex64 too)" in text
    # The claim, measured: float64 and complex128 inputs do not warn; float32 and complex64 do.
    for dtype, warns in ((torch.float64, False), (torch.complex128, False), (torch.float32, True),
                         (torch.complex64, True)):
        x = torch.tensor([0.3], dtype=dtype, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.autograd.gradcheck(lambda t: t * t, (x,), raise_exception=False)
        said = any("not a double precision floating point or complex" in str(w.message) for w in caught)
        assert said == warns, dtype


# Stored or returned


def test_the_default_tolerances_are_stated_in_multiples_of_epsilon(book_html: Path) -> None:
    text = text_of(book_html, "stored-vs-returned")
    assert "a few roundings of each" not in text
    import checks

    for dtype, name in ((torch.float32, "float32"), (torch.float64, "float64")):
        held = checks.default_tolerance(dtype)
        # The stated rtol in multiples of ε, and the atol beside it (the larger term for small entries).
        assert number_after(text, f"in {name} rtol") == pytest.approx(held.rtol, rel=0.05)
        ratio = held.rtol / torch.finfo(dtype).eps
        assert number_after(text, f"in {name} rtol {number_after(text, f'in {name} rtol'):.2g} (about") == \
            pytest.approx(ratio, rel=0.05)
    assert number_after(text, "which is the larger term wherever |expected| is below") == pytest.approx(
        checks.default_tolerance(torch.float32).atol / checks.default_tolerance(torch.float32).rtol, rel=0.05)


def test_a_graph_that_saved_nothing_is_walked_twice(book_html: Path) -> None:
    soup = page(book_html, "book/stored-vs-returned.html")
    record = next(r for r in embedded_records(soup) if r["check"].endswith("x.sum(): backward() twice on one graph: 2"))
    assert record["verdict"] == "pass" and record["observed_gradient"] == 2 and not record["expected_failure"]
    text = text_of(book_html, "stored-vs-returned")
    assert "holds for graphs that saved tensors" in text and "A graph can be walked once, unless" not in text
    assert "Only leaves that require grad" in text and "Only leaves keep" not in text
    assert "Only leaves (tensors you created" not in text


# Failures


def test_the_worst_element_of_the_too_strict_check_is_the_mismatched_one(book_html: Path) -> None:
    soup = page(book_html, "book/failures.html")
    strict = next(r for r in embedded_records(soup) if r["check"].startswith("float32 at float64's tolerance"))
    expected = torch.tensor(strict["analytical_gradient"], dtype=torch.float64)
    error = (torch.tensor(strict["observed_gradient"], dtype=torch.float64) - expected).abs()
    mismatched = (error > strict["tolerance"]["atol"] + strict["tolerance"]["rtol"] * expected.abs()).nonzero()
    assert [int(i) for i in mismatched.flatten()] and strict["worst_index"][0] in mismatched.flatten().tolist()
    text = text_of(book_html, "failures")
    eps = torch.finfo(torch.float32).eps
    for index in mismatched.flatten().tolist():
        x = strict["x"][index]
        relative = float(error[index] / expected[index].abs()) / eps
        assert f"x = {x:.3g} (element {index}, {relative:.1f} ε)" in text
        assert abs(x - 3 * math.pi / 4) < 0.1  # next to the zero of the gradient
    assert "a single rounding of a float32 operation may exceed it" not in text
    assert r"errs by at most \(\varepsilon/2\) relative to its result" in text


def test_the_missing_factor_is_the_power_rules(book_html: Path) -> None:
    soup = page(book_html, "book/failures.html")
    code = " ".join(block.get_text() for block in soup.select("main div.cell_input"))
    assert "the power rule's factor 2 is missing" in code and "chain rule's factor" not in code


# Precision


def test_the_complex_step_needs_an_analytic_f_shown_executed(book_html: Path) -> None:
    text = text_of(book_html, "precision")
    assert "analytic" in text and "abs" in text
    assert "(tensor(2., dtype=torch.float64), 4.0)" in outputs_of(book_html, "precision")
    assert number_after(text, "The complex step says") == 2
    # max, relu and comparisons refuse a complex input (the chapter says so); relu's refusal runs on the page.
    relu = [r for r in embedded_records(page(book_html, "book/precision.html")) if r["check"] == "torch.relu(z)"]
    assert relu and all(r["verdict"] == "pass" and "NotImplementedError" in r["message"] for r in relu)
    z = torch.tensor(2.0, dtype=torch.complex128)
    for refused in (lambda: torch.relu(z), lambda: torch.max(z.reshape(1)), lambda: z > 0):
        with pytest.raises((RuntimeError, NotImplementedError)):
            refused()


def test_the_step_exercises_use_the_minimisers_of_their_stated_sums(book_html: Path) -> None:
    # ε/2 per rounding: a forward difference rounds three times (1.5ε|f|/h), a central one four times over 2h
    # (ε|f|/h); the sums h/2 + 1.5ε/h and h²/6 + ε/h are smallest at √(3ε) and (3ε)^(1/3).
    text = text_of(book_html, "precision")
    eps32, eps64 = torch.finfo(torch.float32).eps, torch.finfo(torch.float64).eps
    assert number_after(text, r"vanishes at \(h = \sqrt{3\varepsilon}\) =") == pytest.approx(
        (3 * eps32) ** 0.5, rel=0.05)
    assert number_after(text, r"which vanishes at \(h = (3\varepsilon)^{1/3}\) =") == pytest.approx(
        (3 * eps64) ** (1 / 3), rel=0.05)
    assert number_after(text, r"and the sum is \(\frac{1}{2}(3\varepsilon)^{2/3}\) =") == pytest.approx(
        0.5 * (3 * eps64) ** (2 / 3), rel=0.05)
    # Each check ran at that step: its observed value is the quotient at h, in each dtype.
    records = embedded_records(page(book_html, "book/precision.html"))
    for dtype in (torch.float32, torch.float64):
        eps = torch.finfo(dtype).eps
        x = torch.tensor(1.0, dtype=dtype)
        for label, h, quotient in (
                ("d/dx eˣ = eˣ, forward at h = √(3ε)", (3 * eps) ** 0.5,
                 lambda h: (torch.exp(x + h) - torch.exp(x)) / h),
                ("d/dx eˣ = eˣ, central at h = ∛(3ε)", (3 * eps) ** (1 / 3),
                 lambda h: (torch.exp(x + h) - torch.exp(x - h)) / (2 * h))):
            record = next(r for r in records if r["check"] == label and r["dtype"] == str(dtype)[6:])
            assert record["verdict"] == "pass" and record["how"] == "numerical"
            assert record["observed_gradient"] == pytest.approx(quotient(h).item(), rel=4 * eps)


def test_the_refused_step_column_holds_the_largest_refused_step(book_html: Path) -> None:
    rows = table_of_class(page(book_html, "book/precision.html"), "precision-table")
    assert all("largest step refused (x + h == x)" in row for row in rows)
    for row in rows:
        value = row["largest step refused (x + h == x)"]
        if value != "none":
            dtype = getattr(torch, row["dtype"])
            one = torch.tensor(1.0, dtype=dtype)
            assert bool(one + float(value) == one)  # refused: 1 + h rounds back to 1


# Modules, small function, introduction


def test_the_doubled_gradient_is_twice_the_single_one_and_says_so(book_html: Path) -> None:
    soup = page(book_html, "book/modules.html")
    record = next(r for r in embedded_records(soup) if r["check"] == "two backward(), no zero_grad()"
                  and (r["device"], r["dtype"]) == ("cpu", "float64"))
    single, doubled = record["analytical_gradient"][0][0], record["observed_gradient"][0][0]
    assert doubled == pytest.approx(2 * single, rel=1e-12) and record["expected_failure"]
    assert "observed is 2× the expected: a missing factor 2" in record["message"]
    text = text_of(book_html, "modules")
    assert f"was {doubled:.6g} , twice the {single:.6g} the formula gives for one backward()" in text


def test_the_product_slip_is_off_by_exactly_the_missing_term(book_html: Path) -> None:
    slip = [r for r in embedded_records(page(book_html, "book/small-function.html")) if r["check"] == "x cos x at 1"]
    assert slip and all(r["verdict"] == "fail" and r["expected_failure"] for r in slip)
    for record in slip:
        assert record["gradient_formula"].startswith("slip at x = 1")
        assert record["observed_gradient"] - record["analytical_gradient"] == pytest.approx(math.sin(1.0), abs=2e-6)
    assert "observed − expected = sin(x) at x: a missing term sin(x)?" in text_of(book_html, "small-function")


def test_the_introduction_says_what_computed_each_derivative(book_html: Path) -> None:
    text = text_of(book_html, "intro")
    assert "was computed by PyTorch while the book was built" not in text
    assert "Each says what computed it" in text
    # gradcheck, too, counts a derivative autograd cannot give as 0 (issue 30): no "only" claim.
    assert "only checks.check_jacobian counts" not in text
