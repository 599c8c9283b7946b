"""Several inputs, nn.Module parameters and assert_gradients: what a test suite of custom autograd code uses."""

from __future__ import annotations

import pytest
import torch

import checks
from checks import GradientMismatchError, InconclusiveGradientError, assert_gradients, check_jacobian, check_module
from checks.core.errors import CheckInputError, DtypeError


class Affine(torch.autograd.Function):
    """x @ weight.T + bias with a hand-written backward; `bug` scales one weight gradient entry."""

    bug = 1.0

    @staticmethod
    def forward(x, weight, bias):
        return x @ weight.T + bias

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, weight, _ = ctx.saved_tensors
        grad_weight = grad.T @ x
        grad_weight[1, 0] = grad_weight[1, 0] * Affine.bug
        return grad @ weight, grad_weight, grad.sum(0)


def inputs(dtype: torch.dtype):
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*shape, generator=generator, dtype=dtype) for shape in ((3, 4), (2, 4), (2,)))


@pytest.fixture
def buggy():
    Affine.bug = 1.01
    yield Affine.apply
    Affine.bug = 1.0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_several_inputs_pass_with_the_correct_backward(dtype: torch.dtype) -> None:
    report = assert_gradients(Affine.apply, *inputs(dtype))
    assert report.passed and [a.name for a in report.arguments] == ["x", "weight", "bias"]
    assert report.autograd.shape == (3 * 2, 12 + 8 + 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_wrong_weight_gradient_is_named_by_input_and_index(buggy, dtype: torch.dtype) -> None:
    with pytest.raises(GradientMismatchError) as caught:
        assert_gradients(buggy, *inputs(dtype))
    message = str(caught.value)
    assert isinstance(caught.value, AssertionError)
    assert "are not close!" in message and "Mismatched elements: 3 / 132" in message
    assert "input `weight`, element (1, 0)" in message and "allowed" in message
    assert "Greatest absolute difference" in message and "Greatest relative difference" in message
    assert "torch.autograd.grad" in message and "Richardson" in message
    # Only the weight block, only column (1, 0), only the three outputs that depend on it are wrong.
    report = check_jacobian(buggy, *inputs(dtype))
    failed = {(e.argument, e.index) for e in report.elements() if e.verdict == "fail"}
    assert failed == {("weight", (1, 0))}


def test_inconclusive_is_a_distinct_explained_error() -> None:
    with pytest.raises(InconclusiveGradientError, match="kink.*another point") as caught:
        assert_gradients(torch.relu, torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert not isinstance(caught.value, GradientMismatchError)
    assert "input `x`, element (0,)" in str(caught.value)


def test_names_can_be_given_and_tuple_outputs_are_checked() -> None:
    def two(a, b):
        return a * b, torch.sin(a) + b
    a, b = torch.tensor([0.3, -0.2], dtype=torch.float64), torch.tensor([1.5, 0.7], dtype=torch.float64)
    report = check_jacobian(two, a, b, names=("scale", "shift"))
    assert report.passed and report.autograd.shape == (4, 4)
    assert {e.argument for e in report.elements()} == {"scale", "shift"}
    with pytest.raises(CheckInputError, match="one distinct name per input"):
        check_jacobian(two, a, b, names=("only",))
    with pytest.raises(DtypeError, match=r"differ in dtype or device \(`a` float64 on cpu, `b` float32 on cpu\)"):
        check_jacobian(two, a, b.float())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_module_parameters_are_checked_by_name(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)).to(dtype)
    x = torch.randn(5, 4, dtype=dtype)
    report = check_module(model, lambda y: (y ** 2).mean(), x)
    assert report.passed, report.message()
    # The parameters by their names, and the input by the name Sequential.forward gives it.
    assert [a.name for a in report.arguments] == ["0.weight", "0.bias", "2.weight", "2.bias", "input"]
    assert report.autograd.shape == (1, 12 + 3 + 3 + 1 + 20)
    assert checks.assert_module_gradients(model, lambda y: (y ** 2).mean(), x).passed
    alone = check_module(model, lambda y: (y ** 2).mean(), x, inputs=False)
    assert alone.passed and [a.name for a in alone.arguments] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(CheckInputError, match="nn.Module"):
        check_module(lambda t: t, lambda y: y.sum(), x)


def test_a_weight_shared_by_two_layers_is_perturbed_in_both() -> None:
    # One parameter under two names: the estimate must move both uses, as autograd sums both.
    torch.manual_seed(0)
    first, second = torch.nn.Linear(3, 3).double(), torch.nn.Linear(3, 3).double()
    second.weight = first.weight
    model = torch.nn.Sequential(first, torch.nn.Tanh(), second)
    x = torch.randn(2, 3, dtype=torch.float64)
    report = check_module(model, lambda y: y.sum(), x)
    assert report.outcome == "pass", report.message()
    assert [a.name for a in report.arguments] == ["0.weight", "0.bias", "2.bias", "input"]
    # The gradient checked is the module's own: both uses of the weight (a check of f with one use replaced
    # would pass too, its autograd and estimate alike missing the other).
    (expected,) = torch.autograd.grad(model(x).sum(), first.weight)
    torch.testing.assert_close(report.autograd[0, :9], expected.reshape(-1))
