"""Fast mode (check_jacobian(..., fast=True)): random projections vᵀ·J·u, one per input and output, judged with
the same three outcomes as the elements of a full check."""

from __future__ import annotations

import pytest
import torch

from checks import GradientMismatchError, assert_gradients, check_jacobian, check_module
from checks.teaching.mutants import BatchReversed, mutant

DTYPES = [torch.float64, torch.float32]
NAMES = {torch.float64: "float64", torch.float32: "float32"}
X = (0.3, -0.7, 1.1, 0.5, -1.4, 2.0, 0.05, -0.2)


def sin_with_backward(factor: float, at: int | None = None):
    """sin whose backward is factor × cos, at every element (at=None) or at one."""
    def backward(x, g):
        scale = torch.ones_like(x)
        if at is None:
            scale = scale * factor
        else:
            scale[at] = factor
        return g * torch.cos(x) * scale
    return mutant(torch.sin, backward, "Sin")


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_a_correct_backward_passes_and_a_wrong_one_fails(dtype: torch.dtype) -> None:
    x = torch.tensor(X, dtype=dtype)
    right = check_jacobian(sin_with_backward(1.0), x, fast=True)
    assert right.outcome == "pass", right.message()
    wrong = check_jacobian(sin_with_backward(1.1), x, fast=True)
    assert wrong.outcome == "fail", wrong.message()
    # One projection per input and output, named as such; the message says how to find the element.
    assert tuple(wrong.autograd.shape) == (1, 1) and wrong.projections is not None
    message = wrong.message()
    assert "projection of input `x`" in message and "rerun without fast=True" in message
    assert f"seed {wrong.seed}" in message


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_one_wrong_element_among_many_fails_the_projection(dtype: torch.dtype) -> None:
    # A sign flipped at one element of eight: its share of the projection is far above the allowance.
    x = torch.tensor(X, dtype=dtype)
    assert check_jacobian(sin_with_backward(-1.0, at=2), x, fast=True).outcome == "fail"


def test_the_wrong_input_is_named_among_several() -> None:
    def f(x, w):
        return x * w

    class WrongW(torch.autograd.Function):
        @staticmethod
        def forward(x, w):
            return x * w

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w, 2 * g * x  # the gradient with respect to w doubled

    x, w = torch.tensor(X[:4], dtype=torch.float64), torch.tensor(X[4:], dtype=torch.float64)
    assert check_jacobian(f, x, w, fast=True).outcome == "pass"
    report = check_jacobian(WrongW.apply, x, w, names=["x", "w"], fast=True)
    assert report.outcome == "fail"
    assert report.mismatch.tolist() == [[False, True]]
    assert "the gradient with respect to input `w` is wrong" in report.message()


def test_its_evaluations_do_not_grow_with_the_input() -> None:
    small = check_jacobian(torch.nn.functional.silu, torch.linspace(-3, 3, 16, dtype=torch.float64), fast=True)
    large = check_jacobian(torch.nn.functional.silu, torch.linspace(-3, 3, 4096, dtype=torch.float64), fast=True)
    assert small.outcome == large.outcome == "pass"
    assert large.evaluations <= 2 * small.evaluations < 100


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_vmap_is_kept_where_it_rounds_otherwise_and_set_aside_where_it_is_wrong(dtype: torch.dtype) -> None:
    # A batched matrix product sums in another order than a plain one; a projection sums 512 such outputs,
    # which can cancel far below their size: that rounding is no wrong batching rule.
    torch.manual_seed(0)
    module = torch.nn.Linear(64, 64).to(dtype)
    report = check_module(module, lambda y: y, torch.randn(8, 64, dtype=dtype), fast=True)
    assert report.outcome == "pass" and report.note == ""
    # A batching rule that hands each point another point's value is caught in fast mode too.
    reversed_ = check_jacobian(BatchReversed.apply, torch.tensor(-4.827, dtype=dtype), fast=True)
    assert reversed_.outcome == "pass" and "vmap" in reversed_.note


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_forward_mode_and_second_order(dtype: torch.dtype) -> None:
    x = torch.tensor(X, dtype=dtype)
    assert check_jacobian(torch.tanh, x, fast=True, mode="forward").outcome == "pass"
    second = check_jacobian(torch.tanh, x, fast=True, order=2)
    assert second.outcome == "pass", second.message()
    # Second order checks the vector–Jacobian product's two inputs, x and grad_output.
    assert [a.name for a in second.arguments] == ["x", "grad_output"]


def test_assert_gradients_raises_in_fast_mode() -> None:
    x = torch.tensor(X, dtype=torch.float64)
    with pytest.raises(GradientMismatchError, match="projection"):
        assert_gradients(sin_with_backward(1.1), x, fast=True)
    assert assert_gradients(torch.sin, x, fast=True).passed


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_non_finite_backward_never_passes(dtype: torch.dtype, value: float) -> None:
    # One element of eight not finite (0/0 at a removable singularity, an overflowing untaken branch of
    # torch.where): the projection is not finite, where the estimate along u is.
    def backward(x, g):
        gradient = g * torch.cos(x)
        gradient[1] = value
        return gradient

    report = check_jacobian(mutant(torch.sin, backward, "NonFinite"), torch.tensor(X, dtype=dtype), fast=True)
    assert report.outcome == "fail", report.message()



@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_noise_never_fails_a_correct_backward(dtype: torch.dtype) -> None:
    # f's rounding amplified k times (as tests/library/test_noise_injection.py injects it): the correct ops of the
    # mutant suite come out pass or inconclusive in fast mode, never fail.
    from checks.teaching.mutants import correct_cases, noisy

    failed = [(case.name, k, seed) for case in correct_cases() for k in (10.0, 1e3, 1e6) for seed in range(3)
              if check_jacobian(noisy(case.f, k, seed), case.input(dtype), fast=True).outcome == "fail"]
    assert failed == []
