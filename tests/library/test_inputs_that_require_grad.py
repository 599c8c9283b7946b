"""Where some inputs require grad, those are checked and the others held fixed, as gradcheck does: a ported
test whose target needs no gradient (its backward returns None for it) is not failed for it (issue 29, from
a fresh engineer's trial); where none requires grad, every floating-point input is checked."""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian, check_module

F64 = torch.float64


class Huber(torch.autograd.Function):
    """A loss whose backward differentiates the prediction only: None for the target."""

    @staticmethod
    def forward(ctx, prediction, target):
        ctx.save_for_backward(prediction - target)
        return torch.where((prediction - target).abs() < 1, 0.5 * (prediction - target) ** 2,
                           (prediction - target).abs() - 0.5).sum()

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r.clamp(-1, 1), None


def points() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([0.3, -2.0, 1.7], dtype=F64), torch.tensor([0.1, 0.4, -0.2], dtype=F64)


def test_an_input_without_requires_grad_beside_one_with_it_is_held_fixed_and_named() -> None:
    prediction, target = points()
    report = check_jacobian(Huber.apply, prediction.requires_grad_(True), target)
    assert report.outcome == "pass"
    assert [a.name for a in report.arguments] == ["prediction"]
    assert [s.name for s in report.skipped] == ["target"]
    assert "`target` (a float64 tensor, which does not require grad (beside inputs that do))" in report.message()
    leaves = (points()[0].requires_grad_(True), points()[1])
    assert torch.autograd.gradcheck(Huber.apply, leaves)


def test_with_no_input_requiring_grad_every_floating_input_is_checked_and_a_missing_gradient_fails() -> None:
    report = check_jacobian(Huber.apply, *points())
    assert report.outcome == "fail"
    assert "input `target` is wrong" in report.wrong_gradients()


@pytest.mark.parametrize("marked", [False, True])
def test_check_module_checks_its_parameters_whatever_its_input_requires(marked: bool) -> None:
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2).double()
    x = torch.randn(4, 3, dtype=F64).requires_grad_(marked)
    report = check_module(module, lambda y: y.square().sum(), x)
    assert [a.name for a in report.arguments] == ["weight", "bias", "input"]
    assert report.outcome == "pass"
