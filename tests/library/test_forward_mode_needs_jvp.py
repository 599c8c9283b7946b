"""mode="forward" checks a jvp: a Function without one is refused, as gradcheck's check_forward_ad refuses it,
never checked by its backward in place of the jvp asked for (issue 29, item 1)."""

from __future__ import annotations

import pytest
import torch

from checks import assert_gradients, check_jacobian
from checks.core.errors import CheckInputError, NoForwardModeError

F64 = torch.float64


class Sine(torch.autograd.Function):
    """Old style: forward takes ctx; a right backward, no jvp."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class SineWithContext(torch.autograd.Function):
    """New style: setup_context, so torch.func can transform it; still no jvp."""

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class Product(torch.autograd.Function):
    """Two inputs, no jvp."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


class SineWithJvp(Sine):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x.sin()

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return tangent * x.cos()


def x(n: int = 4) -> torch.Tensor:
    return torch.linspace(-1.0, 1.2, n, dtype=F64)


# Every way a Function without jvp reaches a forward-mode check: called directly, with setup_context,
# inside other ops, with several inputs, at second order (forward-over-reverse), in fast mode.
CASES = {
    "old-style Function": (Sine.apply, (x(),), {}),
    "setup_context Function": (SineWithContext.apply, (x(),), {}),
    "inside other ops": (lambda t: 2 * Sine.apply(t.exp()) + t, (x(),), {}),
    "two inputs": (Product.apply, (x(), x() + 2), {}),
    "second order": (Sine.apply, (x(),), {"order": 2}),
    "fast mode": (Sine.apply, (x(),), {"fast": True}),
}


@pytest.mark.parametrize("name", CASES)
def test_forward_mode_refuses_every_function_without_jvp(name: str) -> None:
    f, inputs, options = CASES[name]
    with pytest.raises(NoForwardModeError, match="does not implement jvp") as raised:
        check_jacobian(f, *inputs, mode="forward", **options)
    assert "mode='reverse'" in str(raised.value)  # what to do instead
    assert isinstance(raised.value, CheckInputError)
    # A test written to verify the jvp cannot stay green.
    with pytest.raises(NoForwardModeError):
        assert_gradients(f, *inputs, mode="forward", **options)


def test_the_refusal_names_the_function() -> None:
    with pytest.raises(NoForwardModeError, match="`Sine` does not implement jvp"):
        check_jacobian(Sine.apply, x(), mode="forward")


def test_reverse_mode_still_checks_the_backward_and_a_jvp_is_checked_in_forward_mode() -> None:
    assert check_jacobian(Sine.apply, x()).outcome == "pass"
    report = check_jacobian(SineWithJvp.apply, x(), mode="forward")
    assert (report.mode, report.outcome) == ("forward", "pass")
