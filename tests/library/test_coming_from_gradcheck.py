"""What the API page's "Coming from gradcheck" table promises an engineer who replaces gradcheck (issue 29, item 9):
gradcheck's options kept under their own names, and check_grad_dtypes' case caught without an option."""

from __future__ import annotations

import inspect

import torch

from checks import check_jacobian

F64 = torch.float64


class SineInFloat32(torch.autograd.Function):
    """A right formula computed in float32: the gradient loses float64's precision."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * x.cos()).float()


def test_options_of_gradcheck_keep_their_names_and_defaults() -> None:
    ours = inspect.signature(check_jacobian).parameters
    theirs = inspect.signature(torch.autograd.gradcheck).parameters
    for name in ("nondet_tol", "check_undefined_grad", "check_batched_grad"):
        assert ours[name].default == theirs[name].default, name


def test_the_engine_casts_a_backward_to_the_input_dtype_so_gradcheck_passes_it_and_the_comparison_fails_it() -> None:
    x = torch.linspace(-2.0, 2.0, 5, dtype=F64)
    leaf = x.clone().requires_grad_(True)
    assert torch.autograd.grad(SineInFloat32.apply(leaf).sum(), leaf)[0].dtype == F64
    assert torch.autograd.gradcheck(SineInFloat32.apply, (leaf,), check_grad_dtypes=True)
    report = check_jacobian(SineInFloat32.apply, x)
    assert report.outcome == "fail"
    assert "input `x`" in report.message()
