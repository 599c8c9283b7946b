"""Complex inputs and outputs: checked by their real and imaginary parts, the four real partial derivatives per
element pair that hold the Wirtinger derivative and its conjugate, as torch.autograd.gradcheck checks them."""

from __future__ import annotations

import warnings

import pytest
import torch

from checks import GradientMismatchError, assert_gradients, check_jacobian

Z = (1 + 2j, 0.5 - 1j, -0.3 + 0.2j)


def z(dtype: torch.dtype = torch.complex128) -> torch.Tensor:
    return torch.tensor(Z, dtype=dtype)


class Square(torch.autograd.Function):
    """z², with autograd's convention for the backward: grad · conj(2z). `conjugate=False` plants the classic
    bug of returning grad · 2z, the holomorphic derivative without the conjugation."""

    conjugate = True

    @staticmethod
    def forward(z):
        return z * z

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad * (2 * z).conj() if Square.conjugate else grad * 2 * z


class SquaredNorm(torch.autograd.Function):
    """|z|², a real output of a complex input (not holomorphic): for real L, autograd's gradient is
    2·∂L/∂z̄ = 2z. `conjugate=True` plants the bug 2·conj(z)."""

    conjugate = False

    @staticmethod
    def forward(z):
        return (z * z.conj()).real

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad * 2 * (z.conj() if SquaredNorm.conjugate else z)


@pytest.fixture
def planted():
    Square.conjugate, SquaredNorm.conjugate = False, True
    yield
    Square.conjugate, SquaredNorm.conjugate = True, False


def _sin(z):
    return torch.sin(z)


def _modulus(z):
    return torch.abs(z)


def _conjugate_times(z):
    return z.conj() * torch.exp(z)


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
@pytest.mark.parametrize("f", [_sin, _modulus, _conjugate_times, Square.apply, SquaredNorm.apply])
def test_correct_complex_backwards_pass_by_their_real_and_imaginary_parts(f, dtype: torch.dtype) -> None:
    report = check_jacobian(f, z(dtype))
    assert report.outcome == "pass", report.message()
    assert [a.name for a in report.arguments] == ["z.real", "z.imag"]
    assert report.dtype == ("float64" if dtype == torch.complex128 else "float32")
    complex_output = f(z(dtype)).is_complex()
    assert [o.name for o in report.outputs] == (["output.real", "output.imag"] if complex_output else ["output"])
    assert report.autograd.shape == ((6 if complex_output else 3), 6)


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_a_backward_without_the_conjugation_fails_at_the_parts_it_gets_wrong(planted, dtype: torch.dtype) -> None:
    # grad·2z instead of grad·conj(2z).
    report = check_jacobian(Square.apply, z(dtype))
    assert report.outcome == "fail"
    failed = {(e.argument, e.index, report.output_label(e.output)) for e in report.elements() if e.verdict == "fail"}
    # The missing conjugate flips the sign of Im(2z), which only the cross terms carry: ∂Im(z²)/∂a and
    # ∂Re(z²)/∂b, for each element.
    assert failed == {(part, (k,), f"{out} ({k},)") for k in range(3)
                      for part, out in (("z.real", "output.imag"), ("z.imag", "output.real"))}
    with pytest.raises(GradientMismatchError, match="inputs `z.real` and `z.imag` are wrong"):
        assert_gradients(Square.apply, z(dtype))
    assert "the conjugate of the gradient PyTorch expects" in report.message()


def test_a_real_valued_function_of_z_with_the_wrong_wirtinger_derivative_fails(planted) -> None:
    report = check_jacobian(SquaredNorm.apply, z())
    assert report.outcome == "fail"
    # 2·conj(z) differs from 2z in the imaginary part only: the derivative by b is wrong, by a right.
    assert {e.argument for e in report.elements() if e.verdict == "fail"} == {"z.imag"}
    assert all(e.verdict == "pass" for e in report.elements() if e.argument == "z.real")


def test_a_complex_output_of_a_real_input_is_checked_part_by_part() -> None:
    x = torch.tensor([0.3, -1.2], dtype=torch.float64)
    report = check_jacobian(lambda t: torch.polar(torch.ones_like(t), t), x)
    assert report.outcome == "pass"
    assert [o.name for o in report.outputs] == ["output.real", "output.imag"]
    # d cos(t)/dt = -sin(t) on the real rows, d sin(t)/dt = cos(t) on the imaginary ones.
    expected = torch.cat([torch.diag(-torch.sin(x)), torch.diag(torch.cos(x))])
    torch.testing.assert_close(report.autograd, expected)


def test_the_checker_s_own_batching_shows_no_warning_of_torch_s() -> None:
    # torch 2.0 (the declared floor) warns wherever vmap batches an op without a rule (torch.complex, which
    # the checker's evaluation of a complex input calls): the checker's batching, not the caller's to act on.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_jacobian(torch.sin, z()).outcome == "pass"
    assert [str(w.message) for w in caught] == []
