"""No NaN or infinite gradient passes: the commonest real backward bugs, in both dtypes, with one input and
several, and in a module. gradcheck catches each of them; so must the checker (and the teaching API's
comparison)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from checks import (
    GradientMismatchError,
    assert_gradients,
    assert_module_gradients,
    check_jacobian,
    check_module,
    default_tolerance,
)
from checks.core.compare import compare
from checks.teaching.mutants import mutant

DTYPES = [torch.float64, torch.float32]
# Where exp overflows in each dtype (exp(800) and exp(100) are inf), and where it does not yet (exp(400), exp(50)).
OVERFLOWS = {torch.float64: 800.0, torch.float32: 100.0}
LARGE = {torch.float64: 400.0, torch.float32: 50.0}


def gradcheck_fails(f, *inputs: torch.Tensor) -> bool:
    """torch.autograd.gradcheck's verdict in float64 (its home dtype), as the reference for what to catch."""
    leaves = tuple(t.detach().to(torch.float64).requires_grad_(True) for t in inputs)
    return not torch.autograd.gradcheck(f, leaves, raise_exception=False)


# prod's backward written as prod(x) / x: 0/0 at a zero input, where the derivative is the product of the others.
prod_by_division = mutant(torch.prod, lambda x, g: g * torch.prod(x) / x, "ProdByDivision")


def sinc_by_where(x: torch.Tensor) -> torch.Tensor:
    # The removable singularity of sin(x)/x guarded in the forward only: the untaken branch's gradient at 0 is
    # (x cos x - sin x)/x² = 0/0, and torch.where's backward multiplies it by 0: NaN.
    return torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x)


def power(base: torch.Tensor, exponent: torch.Tensor) -> torch.Tensor:
    # base ** exponent by hand: at base 0, d/d exponent = base**exponent · log(base) = 0 · (-inf) = NaN.
    return torch.exp(exponent * torch.log(base))


def softplus_by_where(x: torch.Tensor) -> torch.Tensor:
    # The untaken branch log1p(exp(x)) overflows for large x; its gradient exp(x)/(1 + exp(x)) = inf/inf.
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))


# exp with a backward that overflows in an intermediate: exp(2x)·exp(-x) is inf where exp(x) is finite.
exp_overflowing = mutant(torch.exp, lambda x, g: g * torch.exp(2 * x) * torch.exp(-x), "ExpOverflowing")


def assert_fails_for_nonfinite(report, element: tuple[int, int], value: str) -> None:
    i, j = element
    assert report.outcome == "fail", report.message()
    found = next(e for e in report.elements() if (e.output, e.input) == (i, j))
    assert found.verdict == "fail" and found.reason == "non-finite"
    assert str(found.autograd) == value and math.isfinite(found.numerical)
    assert f"autograd gave {value} where the estimate is finite" in report.message()
    assert f"{value} in autograd where the estimate is finite" in report.summary()
    # A NaN or inf is judged by itself: no allowance of its row or column becomes NaN or inf.
    assert bool(torch.isfinite(report.allowed[torch.isfinite(report.numerical)]).all())


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_prod_backward_dividing_by_a_zero_input_fails(dtype: torch.dtype) -> None:
    x = torch.tensor([0.0, 2.0, -1.5], dtype=dtype)
    report = check_jacobian(prod_by_division, x)
    assert_fails_for_nonfinite(report, (0, 0), "nan")
    assert report.elements()[0].numerical == pytest.approx(-3.0, rel=1e-4)
    # The other elements are right (0, as the product of the others holds the zero) and still pass.
    assert [e.verdict for e in report.elements()[1:]] == ["pass", "pass"]
    with pytest.raises(GradientMismatchError, match="autograd gave nan where the estimate is finite"):
        assert_gradients(prod_by_division, x)
    assert gradcheck_fails(prod_by_division, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinc_guarded_by_where_fails_at_its_removable_singularity(dtype: torch.dtype) -> None:
    x = torch.tensor([0.0, 1.0], dtype=dtype)
    report = check_jacobian(sinc_by_where, x)
    assert_fails_for_nonfinite(report, (0, 0), "nan")
    assert report.elements()[3].verdict == "pass"  # d sinc / dx at 1: the taken branch, finite and right
    assert gradcheck_fails(sinc_by_where, x)
    # Forward mode has no such NaN: torch.where selects the taken branch's tangent instead of multiplying the
    # other's by 0. The checker says so.
    assert check_jacobian(sinc_by_where, x, mode="forward").outcome == "pass"


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_times_log_zero_in_a_hand_written_power_fails(dtype: torch.dtype) -> None:
    # Two inputs: the exponent's element at base 0 is NaN in autograd, 0 by finite differences (0^y is 0 near
    # y = 2). The base's element at 0 cannot be estimated (log of a negative base is NaN): inconclusive.
    base, exponent = torch.tensor([0.0, 2.0], dtype=dtype), torch.tensor([2.0, 3.0], dtype=dtype)
    report = check_jacobian(power, base, exponent)
    assert_fails_for_nonfinite(report, (0, 2), "nan")
    by_place = {(e.argument, e.index, e.output): e for e in report.elements()}
    exponent_at_zero = by_place["exponent", (0,), 0]
    assert exponent_at_zero.numerical == 0.0 and "input `exponent`, element (0,)" in report.message()
    base_at_zero = by_place["base", (0,), 0]
    assert base_at_zero.verdict == "inconclusive" and base_at_zero.reason == "domain"
    # The other output does not depend on base[0] and exponent[0], yet its backward multiplies a zero upstream
    # gradient by the infinite local derivative: NaN there too (a backward of the sum returns NaN), and failed.
    assert {(e.argument, e.index) for e in report.elements() if e.output == 1 and e.verdict == "fail"} == \
        {("base", (0,)), ("exponent", (0,))}
    assert all(e.verdict == "pass" for e in report.elements() if e.index == (1,))
    assert gradcheck_fails(power, base, exponent)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_overflowing_untaken_branch_of_where_fails(dtype: torch.dtype) -> None:
    x = torch.tensor([OVERFLOWS[dtype], 0.5], dtype=dtype)
    report = check_jacobian(softplus_by_where, x)
    assert_fails_for_nonfinite(report, (0, 0), "nan")
    assert report.elements()[0].numerical == pytest.approx(1.0, rel=1e-4)
    assert report.elements()[3].verdict == "pass"
    assert gradcheck_fails(softplus_by_where, torch.tensor([800.0, 0.5]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_infinite_backward_where_the_estimate_converges_fails(dtype: torch.dtype) -> None:
    x = torch.tensor([LARGE[dtype], 0.5], dtype=dtype)
    report = check_jacobian(lambda t: exp_overflowing(t).sum(), x)
    assert_fails_for_nonfinite(report, (0, 0), "inf")
    assert report.elements()[0].numerical == pytest.approx(math.exp(LARGE[dtype]), rel=1e-3)
    assert gradcheck_fails(lambda t: exp_overflowing(t).sum(), torch.tensor([400.0, 0.5]))


class NaiveSoftplus(torch.nn.Module):
    """softplus(scale · x) with the overflow guarded in the forward only."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor([1.0, 1.0], dtype=dtype))
        self.shift = torch.nn.Parameter(torch.tensor(0.25, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softplus_by_where(self.scale * x) + self.shift


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_module_whose_backward_gives_nan_fails(dtype: torch.dtype) -> None:
    module, x = NaiveSoftplus(dtype), torch.tensor([OVERFLOWS[dtype], 0.5], dtype=dtype)
    report = check_module(module, lambda y: y.sum(), x)
    assert_fails_for_nonfinite(report, (0, 0), "nan")
    failed = [e for e in report.elements() if e.verdict == "fail"]
    # The parameter's gradient and the input's (check_module checks both) are NaN at the overflowing element.
    assert [(e.argument, e.index) for e in failed] == [("scale", (0,)), ("x", (0,))]
    assert all(e.verdict == "pass" for e in report.elements() if e.argument == "shift")
    with pytest.raises(GradientMismatchError, match="input `scale`, element \\(0,\\)"):
        assert_module_gradients(module, lambda y: y.sum(), x)


def test_an_estimate_that_is_not_finite_makes_the_element_inconclusive_whatever_autograd_says() -> None:
    # sqrt(x)·x at 0: autograd gives 0.5/sqrt(0)·0 = NaN, and f(-h) is NaN for every step: there is nothing finite
    # to compare with. Inconclusive, with the reason, and the NaN shown.
    report = check_jacobian(lambda x: torch.sqrt(x) * x, torch.tensor([0.0], dtype=torch.float64))
    first = report.elements()[0]
    assert math.isnan(first.autograd) and math.isnan(first.numerical)
    assert first.verdict == "inconclusive" and first.reason == "domain"
    assert report.outcome == "inconclusive" and "autograd nan" in report.message()


def test_equal_infinities_are_reported_as_such_never_passed() -> None:
    # The estimator never returns ±inf (a stencil reaching an infinite f gives NaN), so the verdict's rule for
    # equal infinities is exercised on a report whose values are set directly.
    report = check_jacobian(torch.sin, torch.tensor([0.5], dtype=torch.float64))
    inf = torch.full((1, 1), math.inf, dtype=torch.float64)
    both = replace(report, autograd=inf, numerical=inf, domain=torch.ones_like(report.domain))
    assert both.outcome == "inconclusive" and both.elements()[0].reason == "infinite"
    assert "vertical tangent" in both.explain("infinite")
    opposite = replace(both, numerical=-inf)
    assert opposite.outcome == "inconclusive" and opposite.elements()[0].reason == "domain"
    # autograd +inf where the estimate converged to a finite value: wrong.
    converged = replace(report, autograd=inf)
    assert converged.outcome == "fail" and converged.elements()[0].reason == "non-finite"
    # ... and where the estimate did not converge (a slope steepening without bound, say): not judged.
    unsettled = replace(converged, converged=torch.zeros_like(report.converged))
    assert unsettled.outcome == "inconclusive" and unsettled.elements()[0].reason == "infinite"
    # A NaN allowance never passes: it is not established.
    nan_allowance = replace(report, allowed=torch.full_like(report.allowed, math.nan))
    assert nan_allowance.outcome == "inconclusive"


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_teaching_comparison_never_passes_a_non_finite_value_against_another(dtype: torch.dtype) -> None:
    # compare() judges an analytical expectation written by hand: an expected infinity (sqrt'(0)) matches the
    # same infinity only, as torch.testing does; anything else non-finite is a mismatch of infinite size.
    tolerance = default_tolerance(dtype)
    nan, inf = math.nan, math.inf
    for observed, expected in [([1.0, nan], [1.0, 2.0]), ([1.0, inf], [1.0, 2.0]), ([-inf], [2.0]), ([1.0], [inf]),
                               ([-inf], [inf]), ([nan], [nan]), ([nan], [inf])]:
        result = compare(torch.tensor(observed, dtype=dtype), torch.tensor(expected, dtype=dtype), tolerance)
        assert not result.passed and result.mismatched == 1, (observed, expected)
        assert result.abs_error == math.inf and result.rel_error == math.inf
    same = compare(torch.tensor([inf, 2.0], dtype=dtype), torch.tensor([inf, 2.0], dtype=dtype), tolerance)
    assert same.passed and same.abs_error == 0


def test_f_raising_at_a_perturbed_point_counts_as_not_finite_there() -> None:
    # As a Cholesky factor raises for a matrix the step made indefinite: the steps that cross 0 raise, the finer
    # ones judge the element, and the note says how many points raised and what.
    def guarded_sqrt(t):
        if bool((t < 0).any()):
            raise ValueError("sqrt of a negative number")
        return torch.sqrt(t)

    report = check_jacobian(guarded_sqrt, torch.tensor([1e-3, 4.0], dtype=torch.float64))
    assert report.outcome == "pass", report.message()
    assert "f raised at" in report.note and "ValueError: sqrt of a negative number" in report.note
    assert report.note in report.message()
    with pytest.raises(ValueError, match="negative"):  # raising at x itself is f's own error
        check_jacobian(guarded_sqrt, torch.tensor([-1.0], dtype=torch.float64))
