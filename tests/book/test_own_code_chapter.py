"""The chapter "Check your own code", read from the built HTML."""

from __future__ import annotations

from pathlib import Path

from ..helpers import embedded_records, main_text, page, table_of_class, without_exercises

PAGE = "book/check-your-own-code.html"


def _text(soup) -> str:
    return " ".join(main_text(soup).split())


def test_the_custom_function_and_the_test_file_are_shown_as_plain_pytorch(book_html: Path) -> None:
    # Highlighted code is split into tokens: compare without whitespace.
    text = "".join(main_text(page(book_html, PAGE)).split())
    for shown in ("class Swish(torch.autograd.Function):", "def backward(ctx, grad_output):",
                  "grad_beta = (grad_output * x * slope).sum(dim=0)  # bug", "def test_swish_backward(dtype):",
                  "checks.assert_gradients(Swish.apply, *batch(dtype))", "checks.assert_module_gradients(layer"):
        assert "".join(shown.split()) in text, shown


def test_pytest_ran_at_build_time_and_failed_exactly_the_buggy_backward(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    rows = {row["test"]: row["pytest"] for row in table_of_class(soup, "pytest-outcomes")}
    assert len(rows) == 6
    for dtype in ("float32", "float64"):
        assert rows[f"test_swish_backward[{dtype}]"] == "passed"
        assert rows[f"test_swish_buggy_backward[{dtype}]"] == "failed"
        assert rows[f"test_swish_layer_parameters[{dtype}]"] == "passed"
    text = _text(soup)
    assert "pytest passed 4 tests and failed 2" in text
    # pytest's own output, with the assertion's message naming the input and element.
    assert "GradientMismatchError: Gradients of f(x, beta) are not close! (float32, cpu)" in text
    assert "at input `beta`, element" in text and "allowed" in text


def test_gradcheck_and_assert_gradients_side_by_side(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    said = {(row["backward"], row["dtype"]): row for row in table_of_class(soup, "own-code-verdicts")}
    assert said["Swish (correct)", "float64"]["checks.assert_gradients"] == "pass"
    assert said["Swish (correct)", "float32"]["checks.assert_gradients"] == "pass"
    assert said["SwishBuggy", "float64"]["checks.assert_gradients"] == "fail"
    assert said["SwishBuggy", "float32"]["checks.assert_gradients"] == "fail"
    assert said["SwishBuggy", "float64"]["gradcheck"] == "fail"
    # Every comparison has gradcheck at its defaults (slow and fast) and tuned per dtype.
    assert all({"gradcheck", "gradcheck (fast)", "gradcheck (tuned)"} <= set(row) for row in said.values())
    text = _text(soup)
    row32 = said["Swish (correct)", "float32"]
    assert (f"In float32, gradcheck at its defaults says {row32['gradcheck']} for the correct backward (fast "
            f"mode: {row32['gradcheck (fast)']} )") in text
    tuned = f"at the tuned float32 setting ( {_setting(text)} ) it says {row32['gradcheck (tuned)']} for the correct"
    assert tuned in text and f"and {said['SwishBuggy', 'float32']['gradcheck (tuned)']} for the buggy one" in text


def _setting(text: str) -> str:
    """The float32 setting the chapter found, as glued into its prose."""
    import re

    found = re.search(r"at the tuned float32 setting \( (eps=\S+, atol=\S+, rtol=\S+) \)", text)
    assert found, "the tuned float32 setting is not stated"
    return found.group(1)


def test_the_float32_and_float64_advice_agrees_with_how_good(book_html: Path) -> None:
    text = _text(page(book_html, PAGE))
    assert "should check in float64 beside it" in text
    assert "The test file below runs every test in both" in text
    how_good = " ".join(main_text(page(book_html, "book/how-good-is-a-check.html")).split())
    assert "check it in float64 too" in how_good


def test_the_witnessed_records_reach_the_page_and_the_inconclusive_case_is_explained(book_html: Path) -> None:
    soup = page(book_html, PAGE)
    records = embedded_records(without_exercises(soup))  # the chapter's own checks, not its exercises'
    assert len(records) == 6 and all(r["executed"] for r in records)
    buggy = [r for r in records if r["expected_failure"]]
    assert len(buggy) == 2 and all(r["verdict"] == "fail" for r in buggy)
    assert all(r["verdict"] == "pass" for r in records if not r["expected_failure"])
    text = _text(soup)
    assert "Gradients of f(x) could not be judged!" in text and "check at another point" in text
    assert "the failing parameter is beta alone" in text
