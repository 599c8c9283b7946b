"""What a check could have caught: detectable_relative_error, per element and per check, for the checker and
for a comparison under a Tolerance, means what it says: a gradient wrong by more fails, by much less passes."""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian, default_tolerance
from checks.core.compare import compare
from checks.teaching.mutants import mutant

X = (0.3, -0.7, 1.1, 0.5)


def sine_times(factor: float):
    return mutant(torch.sin, lambda x, g: factor * g * torch.cos(x), "Sine")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_checkers_detectable_relative_error_separates_failed_from_passed_gradients(dtype: torch.dtype) -> None:
    x = torch.tensor(X, dtype=dtype)
    right = check_jacobian(sine_times(1.0), x)
    assert right.outcome == "pass"
    detectable = right.detectable_relative_error
    # Per element: allowed / |numerical| on the diagonal; the off-diagonal entries are 0 and have none.
    for element in right.elements():
        if element.output == element.input:
            assert element.detectable_relative_error == pytest.approx(element.allowed / abs(element.numerical))
        else:
            assert element.numerical == 0 and element.detectable_relative_error is None
    assert detectable == max(e.detectable_relative_error for e in right.elements() if e.output == e.input)
    assert f"relative error above {detectable:.3g} fails in every judged element" in right.message()
    # A gradient wrong by twice that relative error fails in every element; by a tenth of it, passes.
    wrong = check_jacobian(sine_times(1 + 2 * detectable), x)
    assert all(e.verdict == "fail" for e in wrong.elements() if e.output == e.input)
    assert check_jacobian(sine_times(1 + detectable / 10), x).outcome == "pass"


def test_a_check_with_no_non_zero_entry_has_no_detectable_relative_error() -> None:
    report = check_jacobian(lambda t: t * 0 + 1, torch.tensor([0.5, 2.0], dtype=torch.float64))
    assert report.outcome == "pass" and report.detectable_relative_error is None
    assert all(e.detectable_relative_error is None for e in report.elements())


def test_inconclusive_elements_are_left_out_of_the_checks_figure() -> None:
    # relu at 0 is a kink: its element is not judged, and its allowance says nothing about what was caught.
    report = check_jacobian(torch.relu, torch.tensor([0.0, 1.5], dtype=torch.float64))
    kink = report.elements()[0]
    assert kink.verdict == "inconclusive"
    passed = report.elements()[3]
    assert report.detectable_relative_error == pytest.approx(passed.allowed / abs(passed.numerical))


def test_a_tolerances_detectable_relative_error_is_its_allowance_relative_to_the_expected_value() -> None:
    tolerance = default_tolerance(torch.float64).changed(rtol=1e-4, atol=1e-6, reason="a test of the figure")
    expected = torch.tensor([2.0, 0.0, -0.5], dtype=torch.float64)
    result = compare(expected.clone(), expected, tolerance)
    # (atol + rtol·|e|)/|e|: 1e-4 + 5e-7 at 2, 1e-4 + 2e-6 at -0.5 (the largest); the 0 is judged by atol alone.
    assert result.detectable_relative_error == pytest.approx(1e-4 + 2e-6)
    worst = result.detectable_relative_error
    off = expected * torch.tensor([1.0, 1.0, 1 + 1.5 * worst], dtype=torch.float64)
    assert not compare(off, expected, tolerance).passed
    assert compare(expected * (1 + worst / 2), expected, tolerance).passed
    # Every expected value 0: no relative figure (None), and atol alone decides.
    zeros = torch.zeros(3, dtype=torch.float64)
    assert compare(zeros, zeros, tolerance).detectable_relative_error is None
    # A non-finite expected value is left out of it too.
    infinite = torch.tensor([2.0, float("inf")], dtype=torch.float64)
    assert compare(infinite, infinite, tolerance).detectable_relative_error == pytest.approx(1e-4 + 5e-7)
