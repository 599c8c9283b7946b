"""A custom Function's inputs are named after its forward's parameters, whatever its first parameter (the
context) is called, so that a wrong gradient is blamed on the right input (issue 29, item 2)."""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian
from checks.core.signature import parameter_names

F64 = torch.float64


def scale_function(context: str) -> type[torch.autograd.Function]:
    """f(x, beta) = x·beta, whose backward gets beta's gradient wrong (x·g·0), with forward's first parameter
    called `context`."""
    namespace: dict[str, object] = {}
    exec(f"def forward({context}, x, beta):\n"
         f"    {context}.save_for_backward(x, beta)\n"
         f"    return x * beta\n", namespace)

    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        return g * beta, g * x * 0

    return type(f"Scale_{context}", (torch.autograd.Function,),
                {"forward": staticmethod(namespace["forward"]), "backward": staticmethod(backward)})


class ScaleWithSetupContext(torch.autograd.Function):
    """The same bug, with forward taking the inputs alone."""

    @staticmethod
    def forward(x, beta):
        return x * beta

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        return g * beta, g * x * 0


@pytest.mark.parametrize("context", ["ctx", "self", "context", "x_"])
def test_the_wrong_input_is_blamed_whatever_the_context_is_called(context: str) -> None:
    function = scale_function(context)
    assert parameter_names(function.apply, 2) == ["x", "beta"]
    report = check_jacobian(function.apply, torch.tensor([0.5, -1.5], dtype=F64), torch.tensor([2.0, 3.0], dtype=F64))
    assert report.outcome == "fail"
    assert report.wrong_gradients() == "the gradient with respect to input `beta` is wrong"
    assert {e.argument for e in report.elements() if e.verdict == "fail"} == {"beta"}


def test_a_forward_without_context_keeps_its_first_parameter() -> None:
    assert parameter_names(ScaleWithSetupContext.apply, 2) == ["x", "beta"]
    report = check_jacobian(ScaleWithSetupContext.apply, torch.tensor([0.5, -1.5], dtype=F64),
                            torch.tensor([2.0, 3.0], dtype=F64))
    assert report.wrong_gradients() == "the gradient with respect to input `beta` is wrong"


def test_a_plain_function_keeps_every_parameter_even_one_called_ctx() -> None:
    def f(ctx, beta):
        return ctx * beta

    assert parameter_names(f, 2) == ["ctx", "beta"]
