"""What the API page's "Coming from gradcheck" table promises an engineer who replaces gradcheck (issue 29, item 9):
gradcheck's options kept under their own names, and check_grad_dtypes' case caught without an option."""

from __future__ import annotations

import inspect

import pytest
import torch

from checks import CheckInputError, GradientMismatchError, assert_gradients, check_jacobian
from checks.teaching.mutants import mutant

F64 = torch.float64


# A right formula computed in float32: the gradient loses float64's precision.
SineInFloat32 = mutant(torch.sin, lambda x, g: (g * x.cos()).float(), "SineInFloat32")
SineOnePercentOff = mutant(torch.sin, lambda x, g: 1.01 * g * x.cos(), "SineOnePercentOff")
# softplus' derivative as 1 − 1/(1 + eˣ): right to float64's rounding of 1, so 0.1 % off where eˣ ≈ 1e-13.
SoftplusByCancellation = mutant(torch.nn.functional.softplus, lambda x, g: g * (1 - 1 / (1 + torch.exp(x))),
                                "SoftplusByCancellation")


def test_options_of_gradcheck_keep_their_names_and_defaults() -> None:
    ours = inspect.signature(check_jacobian).parameters
    theirs = inspect.signature(torch.autograd.gradcheck).parameters
    for name in ("nondet_tol", "check_undefined_grad", "check_batched_grad"):
        assert ours[name].default == theirs[name].default, name


def test_the_engine_casts_a_backward_to_the_input_dtype_so_gradcheck_passes_it_and_the_comparison_fails_it() -> None:
    x = torch.linspace(-2.0, 2.0, 5, dtype=F64)
    leaf = x.clone().requires_grad_(True)
    assert torch.autograd.grad(SineInFloat32(leaf).sum(), leaf)[0].dtype == F64
    assert torch.autograd.gradcheck(SineInFloat32, (leaf,), check_grad_dtypes=True)
    report = check_jacobian(SineInFloat32, x)
    assert report.outcome == "fail"
    assert "input `x`" in report.message()


def test_the_float32_backward_s_message_says_its_differences_are_of_float32_s_rounding() -> None:
    message = check_jacobian(SineInFloat32, torch.linspace(-2.0, 2.0, 5, dtype=F64)).message()
    assert "Every difference is of float32's rounding" in message


def test_a_cancellation_in_the_backward_fails_with_a_hint_and_the_atol_it_suggests_passes_with_an_rtol() -> None:
    x = torch.tensor([-30.0, -12.0, -3.0, 0.5, 4.0], dtype=F64)
    report = check_jacobian(SoftplusByCancellation, x)
    assert report.outcome == "fail"
    message = report.message()
    assert "loses the precision of its small entries" in message and "float32" not in message
    atol = float(message.split("accept the loss with atol=")[1].split()[0])
    assert check_jacobian(SoftplusByCancellation, x, atol=atol, rtol=1e-7).outcome == "pass"
    assert check_jacobian(SoftplusByCancellation, x, atol=atol).outcome == "inconclusive"


def test_a_tiny_entry_computed_from_intermediates_near_one_gets_the_size_one_hint_and_its_atol_passes() -> None:
    # softplus at -20 with the backward 1 - sigmoid(-x): the entry 2e-9 keeps an absolute error of ε·1 (from a
    # fresh engineer's trial). The hint names that, and float32 as the other cause of such a relative size.
    x = torch.tensor([-20.0], dtype=F64)
    report = check_jacobian(SoftplusByCancellation, x)
    assert report.outcome == "fail"
    message = report.message()
    assert "the rounding of a quantity of size 1" in message and "computes in float32" in message
    assert "input `x` is imprecise: every difference is of rounding's size" in message
    atol = float(message.split("accept the loss with atol=")[1].split()[0])
    assert check_jacobian(SoftplusByCancellation, x, atol=atol, rtol=1e-7).outcome == "pass"


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_a_wrong_factor_gets_no_rounding_hint(dtype: torch.dtype) -> None:
    report = check_jacobian(SineOnePercentOff, torch.tensor([0.3, 1.1], dtype=dtype))
    assert report.outcome == "fail" and "Every difference is" not in report.message()


def test_a_report_is_true_for_a_pass_only_as_gradcheck_s_boolean() -> None:
    x = torch.tensor([0.3, 1.1], dtype=F64)
    assert bool(check_jacobian(torch.sin, x))
    assert not check_jacobian(SineOnePercentOff, x)
    assert not check_jacobian(torch.abs, torch.tensor([0.0, 1.0], dtype=F64))  # inconclusive at the kink


@pytest.mark.parametrize("name, replacement", [("eps", "steps adapt"), ("raise_exception", "assert_gradients raises"),
                                               ("fast_mode", "fast=True"), ("check_forward_ad", 'mode="forward"')])
def test_an_option_of_gradcheck_is_refused_with_what_replaces_it(name: str, replacement: str) -> None:
    with pytest.raises(CheckInputError, match=f"{name}= is gradcheck's option.*{replacement}"):
        check_jacobian(torch.sin, torch.ones(2, dtype=F64), **{name: True})
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        check_jacobian(torch.sin, torch.ones(2, dtype=F64), bogus=True)


def test_inputs_passed_as_gradcheck_s_tuple_are_told_to_be_unpacked() -> None:
    with pytest.raises(CheckInputError, match=r"one by one, check_jacobian\(f, \*inputs\)"):
        check_jacobian(torch.mul, (torch.ones(2, dtype=F64), torch.ones(2, dtype=F64)))


def test_both_autograd_modes_in_one_call_as_check_forward_ad() -> None:
    reverse, forward = assert_gradients(torch.sin, torch.ones(2, dtype=F64), mode=("reverse", "forward"))
    assert (reverse.mode, forward.mode) == ("reverse", "forward")
    # A wrong jvp with a right backward: the reverse check passes, the forward one raises.
    with pytest.raises(GradientMismatchError, match="forward mode"):
        assert_gradients(WrongJvp.apply, torch.ones(2, dtype=F64), mode=("reverse", "forward"))
    with pytest.raises(CheckInputError, match="a check compares one autograd mode"):
        check_jacobian(torch.sin, torch.ones(2, dtype=F64), mode=("reverse", "forward"))
    with pytest.raises(CheckInputError, match="at most once"):
        assert_gradients(torch.sin, torch.ones(2, dtype=F64), mode=("reverse", "reverse"))


class WrongJvp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.x = inputs[0]

    @staticmethod
    def backward(ctx, g):
        return g * torch.cos(ctx.x)

    @staticmethod
    def jvp(ctx, t):
        return t * torch.cos(ctx.x) * 1.01


def test_the_fixture_checks_both_modes_in_one_call_too() -> None:
    from checks.core.gradient_check import GradientCheck

    reports = GradientCheck(torch.float32, "cpu")(torch.sin, torch.ones(2, dtype=F64), mode=("reverse", "forward"))
    assert [(r.mode, r.dtype) for r in reports] == [("reverse", "float32"), ("forward", "float32")]
