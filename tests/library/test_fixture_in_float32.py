"""The fixture check_gradients in a float32 run: elements that float32 alone leaves unjudged skip the test
with the message (float64 settles them), while a kink still raises where float64 does not pass; and
the inputs' requires_grad reaches the check (from a fresh engineer's trial, issue 29)."""

from __future__ import annotations

import math

import pytest
import torch

from checks import CheckInputError, InconclusiveGradientError
from checks.core.gradient_check import GradientCheck
from checks.teaching.mutants import mutant

from .test_inputs_that_require_grad import Huber, points

C, K = math.sqrt(2 / math.pi), 0.044715


class TanhGELU(torch.autograd.Function):
    """GELU's tanh approximation, right: 1 + tanh(...) cancels for negative x, amplifying f's rounding."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(C * (x + K * x ** 3)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        t = torch.tanh(C * (x + K * x ** 3))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + 3 * K * x ** 2))


def gelu_points() -> torch.Tensor:
    return torch.randn(2, 4, generator=torch.Generator().manual_seed(0)) * 2


def test_float32_that_f_s_rounding_leaves_unjudged_skips_and_float64_passes() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"float32 is too coarse(.|\n)*imprecise(.|\n)*float64"):
        GradientCheck(torch.float32, "cpu")(TanhGELU.apply, gelu_points())
    assert GradientCheck(torch.float64, "cpu")(TanhGELU.apply, gelu_points()).outcome == "pass"


def test_float32_whose_steps_cross_a_kink_near_x_skips() -> None:
    # clamp 4e-4 beyond its bound: float32's first steps cross it, and its finest see f flat beside x only to a
    # rounding too coarse to judge; float64's see the flat side.
    def clamped(t):
        return t.clamp(min=-1.0)

    with pytest.raises(pytest.skip.Exception, match=r"float32 is too coarse(.|\n)*kink nearby"):
        GradientCheck(torch.float32, "cpu")(clamped, torch.tensor([-1.0004, 1.0]))
    assert GradientCheck(torch.float64, "cpu")(clamped, torch.tensor([-1.0004, 1.0])).outcome == "pass"


def test_float32_whose_steps_cross_a_kink_float64_does_not_skips() -> None:
    # relu 4e-5 from x: float32's finest useful steps still cross it; float64's do not.
    def shifted_relu(t):
        return torch.relu(t - 0.5) + t

    x = torch.tensor([0.5000403, 0.2])
    with pytest.raises(pytest.skip.Exception, match=r"float32's steps cross a kink(.|\n)*kink: one-sided"):
        GradientCheck(torch.float32, "cpu")(shifted_relu, x)
    assert GradientCheck(torch.float64, "cpu")(shifted_relu, x).outcome == "pass"
    # A wrong backward there is not skipped: float64 does not pass it.
    wrong = mutant(shifted_relu, lambda t, g: g * (1 + 2 * (t > 0.5).to(t.dtype)), "ShiftedReluDoubled")
    with pytest.raises(AssertionError):
        GradientCheck(torch.float32, "cpu")(wrong, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_kink_raises_in_either_dtype(dtype: torch.dtype) -> None:
    with pytest.raises(InconclusiveGradientError, match="kink"):
        GradientCheck(dtype, "cpu")(torch.relu, torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_input_that_requires_grad_marks_the_checked_ones_through_the_fixture(dtype: torch.dtype) -> None:
    prediction, target = points()
    report = GradientCheck(dtype, "cpu")(Huber.apply, prediction.requires_grad_(True), target)
    assert [a.name for a in report.arguments] == ["prediction"] and report.dtype == str(dtype).removeprefix("torch.")


def test_a_float64_constant_inside_f_is_named_in_the_float32_run() -> None:
    weight = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    GradientCheck(torch.float64, "cpu")(lambda x: torch.tanh(x @ weight), torch.ones(2, 3))
    with pytest.raises(CheckInputError, match="float32 run.*a closure's constant.*grad_dtype"):
        GradientCheck(torch.float32, "cpu")(lambda x: torch.tanh(x @ weight), torch.ones(2, 3))


def test_a_tolerance_float32_cannot_settle_skips_the_float32_run() -> None:
    # gradcheck's atol and rtol, ported: float32's estimate is too uncertain to place autograd inside them.
    with pytest.raises(pytest.skip.Exception, match=r"float32 is too coarse(.|\n)*tolerance"):
        GradientCheck(torch.float32, "cpu")(TanhGELU.apply, gelu_points(), atol=1e-5, rtol=1e-3)
    assert GradientCheck(torch.float64, "cpu")(TanhGELU.apply, gelu_points(), atol=1e-5, rtol=1e-3).outcome == "pass"
