"""An estimate that never resolved a change of f is neither a pass nor a fail (issue 29, item 4).

Two ways an estimate of exactly 0 with an error estimate of 0 arises: f rounds to the same value at every
step of a window (tiny steps near a removable singularity, a derivative that rounds to 0), and f does not
change at any step at all while autograd's value says it changes by less than f's rounding (a float32 tail
computed as a difference near 1). The first must not be chosen as the estimate; the second is inconclusive.
A gradient f would have shown stays a fail, and exact zeros where f does not depend on an input pass."""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian

F32, F64 = torch.float32, torch.float64


def test_a_window_that_resolved_nothing_is_not_the_estimate() -> None:
    # sinc's vector–Jacobian product near 0 rounds to exactly 0 at tiny steps; forward-over-reverse gives no
    # tangent there (0), while sinc'' (0) = -π²/3 times the grad_output.
    report = check_jacobian(torch.sinc, torch.tensor([0.0], dtype=F64), order=2, mode="forward")
    assert report.outcome != "pass"
    (x_element,) = [e for e in report.elements() if e.argument == "x"]
    assert x_element.numerical != 0.0
    assert abs(x_element.numerical) > 1.0


@pytest.mark.parametrize("f, x", [
    (lambda t: 1 + torch.exp(-t), 30.0),  # f rounds to 1: exp(-30) is below ε/2
    (torch.special.ndtr, -7.6),  # float32's ndtr is exactly 0 this far out
    (torch.special.ndtr, -7.0),
])
def test_a_change_below_f_s_resolution_at_every_step_is_inconclusive(f, x: float) -> None:
    report = check_jacobian(f, torch.tensor([x], dtype=F32))
    (element,) = report.elements()
    assert element.autograd != 0 and element.numerical == 0
    assert (report.outcome, element.verdict) == ("inconclusive", "inconclusive")
    # Unresolved where autograd lies outside the estimate's allowance; else the allowance itself is too wide.
    assert element.reason == ("unresolved" if element.difference > element.allowed else "imprecise")
    if element.reason == "unresolved":
        assert "resolves nothing" in report.message()


class WrongInput(torch.autograd.Function):
    """f(x, y) = x², whose backward gives y a gradient although f does not depend on y."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g, 2 * x * g


@pytest.mark.parametrize("dtype", [F32, F64])
def test_a_gradient_f_would_have_shown_still_fails(dtype: torch.dtype) -> None:
    report = check_jacobian(WrongInput.apply, torch.tensor([1.5, 0.3], dtype=dtype), torch.tensor([0.2, 0.1], dtype=dtype))
    assert report.outcome == "fail"
    assert report.wrong_gradients() == "the gradient with respect to input `y` is wrong"


@pytest.mark.parametrize("dtype", [F32, F64])
def test_exact_zeros_where_f_does_not_depend_on_an_input_pass(dtype: torch.dtype) -> None:
    # Off the diagonal f_i does not depend on x_j: f does not change there, and autograd says exactly 0.
    report = check_jacobian(torch.tanh, torch.tensor([0.3, -1.2, 2.5], dtype=dtype))
    assert report.outcome == "pass"
    assert not report.unresolved.any()
