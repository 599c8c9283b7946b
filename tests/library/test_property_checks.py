"""The property checks beside the Jacobian: f does not change its inputs; the backward is reentrant (within
nondet_tol), leaves its grad_output unchanged and handles undefined output gradients; the backward (jvp) is
linear in its vector; batched gradients agree with one at a time. Each with a correct and a wrong case,
reported per element and named by input and index."""

from __future__ import annotations

import pytest
import torch

from checks import GradientMismatchError, assert_gradients, check_jacobian
from checks.teaching.mutants import mutant

F64 = torch.float64


def x() -> torch.Tensor:
    return torch.tensor([0.3, -0.7, 1.1], dtype=F64)


def check(report, name: str):
    (found,) = [p for p in report.properties if p.name == name]
    return found


def test_a_function_that_changes_its_input_in_place_is_reported_element_by_element() -> None:
    given = x()
    report = check_jacobian(lambda t: t.mul_(2) ** 2, given)
    mutated = check(report, "not mutated")
    assert report.outcome == "fail" and mutated.outcome == "fail"
    assert not report.mismatch.any()  # the Jacobian of what f computes is right; the side effect is the bug
    assert [(e.argument, e.index, e.observed, e.expected) for e in mutated.elements()] == [
        ("t", (0,), 0.6, 0.3), ("t", (1,), -1.4, -0.7), ("t", (2,), 2.2, 1.1)]
    assert torch.equal(given, x())  # the caller's tensor is untouched: f changed a copy
    with pytest.raises(GradientMismatchError, match="f changes its input in place.*in `t`"):
        assert_gradients(lambda t: t.mul_(2) ** 2, x())
    assert check(check_jacobian(lambda t: t.mul(2) ** 2, x()), "not mutated").outcome == "pass"


def test_a_changed_integer_argument_is_reported_too() -> None:
    def f(t, counts):
        counts += 1
        return t * 2

    report = check_jacobian(f, x(), torch.tensor([1, 2]))
    mutated = check(report, "not mutated")
    assert report.outcome == "fail"
    assert {e.argument for e in mutated.elements() if e.verdict == "fail"} == {"counts"}


class Stateful(torch.autograd.Function):
    """2x whose backward drifts with each call it has made: right once, not reentrant."""

    calls = 0

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        Stateful.calls += 1
        return grad * 2 * (1 + 1e-3 * (Stateful.calls % 2))


class Noisy(torch.autograd.Function):
    """2x whose backward is off by a random 1e-13 relative: nondeterministic, as atomics on a GPU are, far
    below any allowance of the Jacobian check."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 * (1 + 1e-13 * torch.rand_like(grad))


def test_a_backward_that_keeps_state_is_not_reentrant() -> None:
    report = check_jacobian(Stateful.apply, x())
    reentrant = check(report, "reentrant")
    assert report.outcome == "fail" and reentrant.outcome == "fail"
    assert [e.verdict for e in reentrant.elements()] == ["fail"] * 3 and reentrant.seed == 0
    assert "The backward is not reentrant" in report.message() and "nondet_tol=0" in report.message()
    assert check(check_jacobian(lambda t: t * 2, x()), "reentrant").outcome == "pass"


def test_nondet_tol_allows_a_nondeterministic_backward() -> None:
    strict = check_jacobian(Noisy.apply, x())
    assert check(strict, "reentrant").outcome == "fail" and not strict.mismatch.any()
    tolerant = check_jacobian(Noisy.apply, x(), nondet_tol=1e-12)
    assert tolerant.outcome == "pass" and check(tolerant, "reentrant").outcome == "pass"


def test_nondet_tol_widens_every_element_s_allowance_as_it_lets_two_backward_passes_differ() -> None:
    # A backward off by a random 1e-9 relative (above the estimate's allowance, as gradcheck's fixed atol is not):
    # with nondet_tol=1e-6 autograd's value is known to 1e-6 alone, and the check passes, as gradcheck does.
    class Noisier(Noisy):
        @staticmethod
        def backward(ctx, grad):
            return grad * 2 * (1 + 1e-9 * torch.rand_like(grad))

    strict = check_jacobian(Noisier.apply, x())
    assert strict.outcome == "fail" and strict.mismatch.any() and check(strict, "reentrant").outcome == "fail"
    tolerant = check_jacobian(Noisier.apply, x(), nondet_tol=1e-6)
    assert tolerant.outcome == "pass", tolerant.message()
    assert float((tolerant.allowed - strict.allowed).min()) >= 1e-6 * (1 - 1e-12)


class SumOfSquares(torch.autograd.Function):
    """(x²).sum(); `ignores_grad` plants a backward that returns 2x without multiplying by grad_output: right
    for the scalar output's grad_output of 1, so its Jacobian check passes."""

    ignores_grad = False

    @staticmethod
    def forward(x):
        return (x ** 2).sum()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x if SumOfSquares.ignores_grad else grad * 2 * x


class TwoOutputs(torch.autograd.Function):
    """(x², 3x) with undefined output gradients passed through as None; `none_is_one` plants a backward that
    treats an undefined gradient of the second output as ones when the first is given (and handles both
    undefined right)."""

    none_is_one = False

    @staticmethod
    def forward(x):
        return x ** 2, 3 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, first, second):
        (x,) = ctx.saved_tensors
        gradient = torch.zeros_like(x) if first is None else first * 2 * x
        if second is None:
            return gradient + 3 if TwoOutputs.none_is_one and first is not None else gradient
        return gradient + second * 3


@pytest.fixture
def planted():
    SumOfSquares.ignores_grad = TwoOutputs.none_is_one = True
    yield
    SumOfSquares.ignores_grad = TwoOutputs.none_is_one = False


def test_undefined_output_gradients_are_handled_by_correct_backwards() -> None:
    for f in (SumOfSquares.apply, TwoOutputs.apply):
        report = check_jacobian(f, x())
        assert report.outcome == "pass" and check(report, "undefined output gradients").outcome == "pass"


def test_a_backward_that_ignores_its_grad_output_fails_the_undefined_gradient_check(planted) -> None:
    report = check_jacobian(SumOfSquares.apply, x())
    assert not report.mismatch.any()  # the scalar output's Jacobian cannot show it
    undefined = check(report, "undefined output gradients")
    assert report.outcome == "fail" and undefined.outcome == "fail"
    assert [(e.index, e.observed, e.expected) for e in undefined.elements()] == [
        ((0,), 0.6, 0.0), ((1,), -1.4, 0.0), ((2,), 2.2, 0.0)]
    # check_undefined_grad=False leaves that check out, as gradcheck's option does; the backward is still not
    # linear in its grad_output (gradcheck passes it then).
    without = check_jacobian(SumOfSquares.apply, x(), check_undefined_grad=False)
    assert without.outcome == "fail" and [c.name for c in without.properties if c.outcome == "fail"] == ["linear"]


def test_one_undefined_output_gradient_among_several_must_act_as_zeros(planted) -> None:
    undefined = check(check_jacobian(TwoOutputs.apply, x()), "undefined output gradients")
    assert undefined.outcome == "fail" and "output 1's gradient undefined" in undefined.compared


def test_a_backward_returning_none_and_an_output_independent_of_an_input_are_zeros() -> None:
    class Unused(torch.autograd.Function):
        @staticmethod
        def forward(x, w):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, None

    for f in (Unused.apply, lambda a, b: (a * 2, b.sum() * 0 + 1.0)):
        report = check_jacobian(f, x(), x())
        assert report.outcome == "pass", report.message()
        assert torch.count_nonzero(report.autograd[:, 3:]) == 0


class Product(torch.autograd.Function):
    """a·b with a jvp that receives undefined tangents as None; `none_is_one` plants a jvp that treats an
    undefined tangent of b as ones."""

    none_is_one = False

    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(*inputs)
        ctx.save_for_backward(*inputs)
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a

    @staticmethod
    def jvp(ctx, tangent_a, tangent_b):
        a, b = ctx.saved_tensors
        first = torch.zeros_like(a) if tangent_a is None else tangent_a * b
        if tangent_b is None:
            return first + 1 if Product.none_is_one else first
        return first + tangent_b * a


def test_forward_mode_checks_undefined_tangents() -> None:
    a, b = x(), torch.tensor([1.5, -2.0, 0.4], dtype=F64)
    report = check_jacobian(Product.apply, a, b, mode="forward")
    assert report.outcome == "pass" and check(report, "undefined tangents").outcome == "pass"
    Product.none_is_one = True
    try:
        report = check_jacobian(Product.apply, a, b, mode="forward")
    finally:
        Product.none_is_one = False
    undefined = check(report, "undefined tangents")
    assert report.outcome == "fail" and not report.mismatch.any()
    assert "`b`'s tangent undefined" in undefined.compared
    assert [e.index for e in undefined.elements() if e.verdict == "fail"] == [(0,), (1,), (2,)]  # per output element
    assert "The forward-mode derivative mishandles undefined tangents" in report.message()


class ItemInBackward(torch.autograd.Function):
    """2x whose backward reads a Python number from grad_output: fine one at a time, impossible under vmap."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 + 0 * float(grad.sum())

    @staticmethod
    def jvp(ctx, tangent):
        return tangent * 2 + 0 * float(tangent.sum())


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_batched_gradients_agree_with_one_at_a_time(mode: str) -> None:
    report = check_jacobian(torch.sin, x(), mode=mode, check_batched_grad=True)
    batched = check(report, "batched")
    assert report.outcome == "pass" and batched.outcome == "pass"
    # Per input element in reverse mode, per output element in forward mode; three of either here.
    assert [e.index for e in batched.elements()] == [(0,), (1,), (2,)]


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_derivative_that_cannot_be_batched_fails_the_batched_check(mode: str) -> None:
    plain = check_jacobian(ItemInBackward.apply, x(), mode=mode)
    assert plain.outcome == "pass" and all(p.name != "batched" for p in plain.properties)
    report = check_jacobian(ItemInBackward.apply, x(), mode=mode, check_batched_grad=True)
    batched = check(report, "batched")
    assert report.outcome == "fail" and batched.outcome == "fail" and batched.error
    assert all(e.verdict == "fail" for e in batched.elements())
    assert "Gradients cannot be batched" in report.message() and "differ from one" not in report.message()


class TanhWith(torch.autograd.Function):
    """tanh whose backward applies `to_g` to its grad_output first: the identity is right; g.sign(), g.abs()
    and a clamp of g (gradient clipping inside a backward) are not linear in g, yet give the right row at
    every unit grad_output, so no Jacobian built from those rows shows them (engineer trial 6)."""

    to_g = staticmethod(lambda g: g)

    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        ctx.save_for_forward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return TanhWith.to_g(g) * (1 - y * y)

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return TanhWith.to_g(t) * (1 - y * y)


@pytest.fixture
def to_g():
    yield lambda transform: setattr(TanhWith, "to_g", staticmethod(transform))
    TanhWith.to_g = staticmethod(lambda g: g)


NOT_LINEAR = {"sign": torch.sign, "abs": torch.abs, "clamp": lambda g: g.clamp(-1, 1)}


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("fast", [False, True], ids=["full", "fast"])
@pytest.mark.parametrize("transform", list(NOT_LINEAR), ids=str)
def test_a_derivative_not_linear_in_its_vector_fails_though_every_row_is_right(to_g, transform: str, mode: str,
                                                                               fast: bool) -> None:
    x = torch.linspace(-1.5, 1.5, 7, dtype=F64)
    assert check_jacobian(TanhWith.apply, x, mode=mode, fast=fast).outcome == "pass"
    to_g(NOT_LINEAR[transform])
    report = check_jacobian(TanhWith.apply, x, mode=mode, fast=fast, check_undefined_grad=False)
    name = "linear" if mode == "reverse" else "linear tangents"
    assert report.outcome == "fail" and [c.name for c in report.properties if c.outcome == "fail"] == [name]
    assert "is not linear in its" in report.message()


def test_a_sample_of_a_large_input_still_sees_a_backward_not_linear(to_g) -> None:
    to_g(torch.sign)
    report = check_jacobian(TanhWith.apply, torch.randn(12_000, dtype=F64, generator=torch.Generator().manual_seed(0)),
                            sample=16)
    assert report.outcome == "fail" and check(report, "linear").outcome == "fail"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_linearity_is_exact_whatever_the_backward_s_cancellations_or_precision(dtype: torch.dtype) -> None:
    # A relu network's backward sums across paths that cancel; a backward computed in float32 for a float64
    # input rounds coarser than the input's dtype: both are linear, and scaling by -8 commutes with rounding.
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dtype)
    report = check_jacobian(lambda t: network(t).square().sum(), torch.randn(4, 6, dtype=dtype))
    assert check(report, "linear").outcome == "pass"

    in_float32 = mutant(torch.sin, lambda t, g: g.float() * t.float().cos(), "SineInFloat32")
    assert check(check_jacobian(in_float32, x().to(dtype)), "linear").outcome == "pass"


# sin whose backward multiplies its grad_output in place: y.sum().backward() raises on it (an expanded
# grad_output), and a caller's grad_output comes back changed.
SIN_WRITING_INTO_G = mutant(torch.sin, lambda t, g: g.mul_(t.cos()), "SinWritingIntoG")


def test_a_backward_that_writes_into_its_grad_output_is_named_as_such_not_as_not_reentrant() -> None:
    report = check_jacobian(SIN_WRITING_INTO_G, x())
    assert report.outcome == "fail" and not report.mismatch.any()
    failed = [c.name for c in report.properties if c.outcome == "fail"]
    assert "output gradient unchanged" in failed and "reentrant" not in failed
    assert "The backward changes its output gradient in place" in report.message()
    assert check(check_jacobian(torch.sin, x()), "output gradient unchanged").outcome == "pass"
