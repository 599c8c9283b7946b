"""A bug at a special-cased point (a removable singularity whose value and derivative at 0 are written by
hand) fails; it is not called inconclusive, and the right special case passes (issue 29, item 3).

Near 0 such an f is computed with cancellation: at tiny steps f(h) rounds to its value at 0 and the
differences are exactly 0. Those steps resolve no change of f and must not contradict the coarse steps
that do."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from checks import check_jacobian

F64 = torch.float64
Unary = Callable[[torch.Tensor], torch.Tensor]


def special_cased(value: Unary, derivative: Unary, at_zero: float, slope_at_zero: float) -> Callable[..., torch.Tensor]:
    """An autograd.Function computing value(x) and derivative(x) away from 0, and at_zero, slope_at_zero at 0."""

    class SpecialCased(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            safe = torch.where(x == 0, torch.ones_like(x), x)
            return torch.where(x == 0, torch.full_like(x, at_zero), value(safe))

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            safe = torch.where(x == 0, torch.ones_like(x), x)
            return g * torch.where(x == 0, torch.full_like(x, slope_at_zero), derivative(safe))

    return SpecialCased.apply


# (value, derivative away from 0, value at 0, right derivative at 0, a wrong one)
FUNCTIONS = {
    "(x - sin x)/x²": (lambda x: (x - x.sin()) / x**2,
                       lambda x: (1 - x.cos()) / x**2 - 2 * (x - x.sin()) / x**3, 0.0, 1 / 6, 0.0),
    "(exp x - 1)/x": (lambda x: torch.expm1(x) / x, lambda x: (x * x.exp() - torch.expm1(x)) / x**2, 1.0, 0.5, 0.0),
    "sin x / x": (lambda x: x.sin() / x, lambda x: (x * x.cos() - x.sin()) / x**2, 1.0, 0.0, 1.0),
    "(1 - cos x)/x": (lambda x: (1 - x.cos()) / x, lambda x: (x * x.sin() - (1 - x.cos())) / x**2, 0.0, 0.5, 0.0),
}
X = torch.tensor([0.0, 0.5, -1.25], dtype=F64)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_wrong_derivative_at_the_special_cased_point_fails(name: str) -> None:
    value, derivative, at_zero, _, wrong = FUNCTIONS[name]
    report = check_jacobian(special_cased(value, derivative, at_zero, wrong), X)
    assert report.outcome == "fail", report.message()
    assert [(e.output, e.input) for e in report.elements() if e.verdict == "fail"] == [(0, 0)]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_right_derivative_at_the_special_cased_point_passes(name: str) -> None:
    value, derivative, at_zero, right, _ = FUNCTIONS[name]
    report = check_jacobian(special_cased(value, derivative, at_zero, right), X)
    assert report.outcome == "pass", report.message()


def test_the_case_of_the_issue_says_which_element_and_both_values() -> None:
    value, derivative, at_zero, _, wrong = FUNCTIONS["(x - sin x)/x²"]
    report = check_jacobian(special_cased(value, derivative, at_zero, wrong), torch.tensor([0.0], dtype=F64))
    (element,) = report.elements()
    assert (element.verdict, element.autograd) == ("fail", 0.0)
    assert element.numerical == pytest.approx(1 / 6, rel=1e-6)
    assert "unstable" not in report.message()
