"""The checker never passes a wrong gradient: issue 15's reproductions, the three outcomes and the floors."""

from __future__ import annotations

import pytest
import torch

from checks.core.checker import check_jacobian, check_module
from checks.teaching.mutants import LeakingReLU, mutant

F64, F32 = torch.float64, torch.float32
X = (0.3, -0.7, 1.1, 0.5)


def with_backward(forward, derivative, factor: float = 1.0):
    """forward as an autograd.Function whose backward is factor × the true derivative."""
    return mutant(forward, lambda x, g: factor * g * derivative(x), "Hand")


def steep_tanh(x):
    return torch.tanh(1e4 * x)


def steep_tanh_derivative(x):
    return 1e4 * (1 - torch.tanh(1e4 * x) ** 2)


@pytest.mark.parametrize("factor", [2.0, 0.0])
def test_steep_tanh_with_a_wrong_backward_fails(factor: float) -> None:
    # The start step (ε^(1/7) ≈ 6e-3) is far wider than the scale 1e-4 on which tanh(1e4 x) changes; the
    # search goes to smaller steps until the tableau converges, and then sees the wrong backward.
    report = check_jacobian(with_backward(steep_tanh, steep_tanh_derivative, factor), torch.tensor([1e-5], dtype=F64))
    assert report.outcome == "fail"
    assert int(report.levels.max()) > 4  # it needed smaller steps than the first four
    right = check_jacobian(with_backward(steep_tanh, steep_tanh_derivative), torch.tensor([1e-5], dtype=F64))
    assert right.outcome == "pass"


A_NEAR_SINGULAR = ((1.0, 1.0), (1.0, 1.0 + 1e-6))


def inverse_sum(x):
    a = torch.tensor(A_NEAR_SINGULAR, dtype=x.dtype)
    return torch.linalg.inv(a + torch.diag(x)).sum()


def inverse_sum_backward(first: float | None):
    def backward(x, g):
        leaf = x.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            (gradient,) = torch.autograd.grad(inverse_sum(leaf), leaf)
        if first is not None:
            gradient = gradient.clone()
            gradient[0] = first
        return g * gradient
    return backward


@pytest.mark.parametrize("first", [7.0, 0.0])
def test_near_singular_inverse_with_a_wrong_first_element_is_never_passed(first: float) -> None:
    wrong = mutant(inverse_sum, inverse_sum_backward(first), "Inverse")
    report = check_jacobian(wrong, torch.zeros(2, dtype=F64))
    assert report.outcome in ("fail", "inconclusive")
    assert report.elements()[0].verdict != "pass"
    # The correct backward is not failed: rounding in f (condition number ≈ 4e6) limits the estimate, and
    # the check says so rather than guessing.
    right = check_jacobian(mutant(inverse_sum, inverse_sum_backward(None), "Inverse"), torch.zeros(2, dtype=F64))
    assert right.outcome in ("pass", "inconclusive")


FLOAT32_BUGS = [
    ("sin(100x), sign flipped", lambda x: torch.sin(100 * x), lambda x: 100 * torch.cos(100 * x), -1.0),
    ("sin(1000x), sign flipped", lambda x: torch.sin(1000 * x), lambda x: 1000 * torch.cos(1000 * x), -1.0),
    ("tanh(20x), 10 % wrong", lambda x: torch.tanh(20 * x), lambda x: 20 * (1 - torch.tanh(20 * x) ** 2), 1.1),
    ("sin(50x), 10 % wrong", lambda x: torch.sin(50 * x), lambda x: 50 * torch.cos(50 * x), 1.1),
]


@pytest.mark.parametrize("name, forward, derivative, factor", FLOAT32_BUGS, ids=[b[0] for b in FLOAT32_BUGS])
def test_float32_fast_varying_functions_with_wrong_backwards_are_never_passed(name, forward, derivative, factor) -> None:
    report = check_jacobian(with_backward(forward, derivative, factor), torch.tensor(X, dtype=F32))
    assert report.outcome in ("fail", "inconclusive"), report.summary()
    # No wrong element passes where the derivative is not 0 in float32.
    for element in report.elements():
        if element.output == element.input and element.autograd != 0:
            assert element.verdict != "pass", element
    # The same functions with correct backwards raise no false alarm.
    assert check_jacobian(with_backward(forward, derivative), torch.tensor(X, dtype=F32)).outcome != "fail"


def test_a_stencil_leaving_the_domain_takes_smaller_steps() -> None:
    # sqrt at 1e-8: the start step reaches x < 0 (NaN); smaller steps stay inside the domain.
    report = check_jacobian(torch.sqrt, torch.tensor([1e-8, 4.0], dtype=F64))
    assert report.outcome == "pass", report.message()
    assert int(report.levels[0]) > int(report.levels[1]) >= 3  # smaller steps only where x is near 0
    assert report.numerical[0, 0].item() == pytest.approx(0.5 / 1e-4, rel=1e-8)
    wrong = check_jacobian(with_backward(torch.sqrt, lambda x: 0.5 / torch.sqrt(x), 1.001),
                           torch.tensor([1e-8], dtype=F64))
    assert wrong.outcome == "fail"


def test_a_point_on_the_edge_of_the_domain_is_inconclusive_with_the_reason() -> None:
    # sqrt(x)·x at x = 0 is finite, its derivative 0, but f(x - h) is NaN for every step.
    report = check_jacobian(lambda x: torch.sqrt(x) * x, torch.tensor([0.0], dtype=F64))
    assert report.outcome == "inconclusive"
    assert report.elements()[0].reason == "domain"
    assert "interior point" in report.message()


def test_autograd_rounding_near_an_exact_zero_is_not_a_failure() -> None:
    # layer_norm of two equal-but-one entries: autograd's entries are differences of terms of size 1/σ and can
    # come out as 1e-17 where f's column is exactly flat; the floor ε·(row and column scale) admits it.
    def f(x):
        return torch.nn.functional.layer_norm(x, (4,))

    x = torch.tensor([0.25, 0.25, 0.25, 1.0], dtype=F64)
    report = check_jacobian(f, x)
    assert report.outcome == "pass", report.message()
    # Built directly: an entry of 1e-17 against an exact 0 passes, one of 1e-3 does not.
    tiny = with_backward(lambda t: t * 0 + 1.0, lambda t: torch.full_like(t, 1e-17))
    assert check_jacobian(lambda t: tiny(t) + t[:1], torch.tensor([0.5, 2.0], dtype=F64)).outcome == "pass"
    big = with_backward(lambda t: t * 0 + 1.0, lambda t: torch.full_like(t, 1e-3))
    assert check_jacobian(lambda t: big(t) + t[:1], torch.tensor([0.5, 2.0], dtype=F64)).outcome == "fail"


def test_subnormal_results_have_a_floor() -> None:
    # exp(-740) is subnormal in float64: its derivative agrees only to a few digits there.
    report = check_jacobian(torch.exp, torch.tensor([-740.0, 0.5], dtype=F64))
    assert report.outcome != "fail", report.message()


def test_complex_inputs_and_outputs_are_checked_by_both_parts_not_by_the_real_part_alone() -> None:
    # Real and imaginary parts are columns (inputs) and rows (outputs) of the Jacobian: nothing is dropped.
    # (tests/library/test_complex.py: a backward wrong in the imaginary parts alone fails.)
    report = check_jacobian(torch.sin, torch.tensor([1.0 + 1j], dtype=torch.complex128))
    assert report.outcome == "pass" and [a.name for a in report.arguments] == ["x.real", "x.imag"]
    assert [o.name for o in report.outputs] == ["output.real", "output.imag"]
    imaginary = check_jacobian(lambda x: x * 1j, torch.tensor([1.0], dtype=F64))
    assert imaginary.outcome == "pass" and imaginary.autograd.tolist() == [[0.0], [1.0]]


def test_a_planned_complex_check_is_refused_not_recorded_by_its_real_part() -> None:
    import checks
    from checks.core.errors import DtypeError

    square = checks.Expectation("x²", lambda x: (x**2).sum(), "2x", lambda x: 2 * x, "power rule")
    with pytest.raises(DtypeError, match="complex"):
        checks.plan(square, [1.0, 2.0], dtypes=("complex128",))


def test_bad_options_get_clear_errors() -> None:
    from checks.core.errors import CheckInputError

    x = torch.tensor([0.5], dtype=F64)
    with pytest.raises(CheckInputError, match="no inputs"):
        check_jacobian(torch.sin)
    with pytest.raises(CheckInputError, match="empty output"):
        check_jacobian(lambda t: t[:0], x)


@pytest.mark.parametrize("dtype", [F64, F32])
def test_a_staircase_that_fits_the_steps_is_not_failed(dtype: torch.dtype) -> None:
    # round(x, 3) at this x: each coarse step h·2^-k spans a whole number of stairs, so every central
    # difference down to h ≈ 5e-4 is the same slope ≈ 0.99, a perfectly "converged" tableau (op_db's
    # round.decimals_3 sample). Below a stair the staircase is flat: the witness window sees it.
    x = torch.tensor([5.576059452216908], dtype=dtype)
    report = check_jacobian(lambda t: torch.round(t, decimals=3), x)
    assert report.outcome == "inconclusive"
    assert report.elements()[0].reason in ("unstable", "kink", "kink nearby")


def mixed_sin(x):
    # sin(x_i), computed through every input: ((x_i + S) - S) - x_i is 0 up to rounding, so f_i's
    # derivative by x_j (j ≠ i) is 0, yet its finite differences are rounding noise, as in an FFT.
    total = x.sum()
    return torch.sin(x) + ((x + total) - total) - x


def test_an_entry_that_is_zero_is_held_to_its_rounding_not_to_a_noisy_step() -> None:
    # A backward that leaks 1e-9 of every other input's gradient is wrong by 1e-9 where the Jacobian is 0:
    # the window chosen for a zero entry must be one whose allowance is near rounding (about 1e-12 here),
    # not the noisiest one, whose relative uncertainty is smallest only because its value is largest.
    def leaky(x, g):
        return g * torch.cos(x) + 1e-9 * (g.sum() - g)

    x = torch.tensor(X, dtype=F64)
    report = check_jacobian(mutant(mixed_sin, leaky, "Leak"), x)
    assert report.outcome == "fail"
    off = ~torch.eye(len(X), dtype=torch.bool)
    assert bool(report.mismatch[off].all()) and not bool(report.mismatch[~off].any())
    assert float(report.allowed[off].max()) < 1e-10
    assert check_jacobian(mutant(mixed_sin, lambda x, g: g * torch.cos(x), "Right"), x).outcome == "pass"


@pytest.mark.parametrize("seed", range(3))
def test_round_in_float32_at_many_points_is_never_failed(seed: int) -> None:
    # round(x, 3) in float32 (op_db's sample): the noise probe sees its stairs as noise of about their height,
    # which keeps the witness from steps fine enough to see a stair's flat; the probe itself finds the output
    # flat between jumps, and a mismatch there is unstable, not a failure of autograd's 0.
    generator = torch.Generator().manual_seed(seed)
    x = (torch.rand(20, generator=generator, dtype=F64) * 18 - 9).to(F32)
    report = check_jacobian(lambda t: torch.round(t, decimals=3), x)
    assert report.outcome != "fail", report.message()
    assert {e.reason for e in report.elements() if e.verdict == "inconclusive"} <= {"unstable", "kink", "kink nearby"}


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)


def rms_norm_derivative_ignoring_the_rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return g * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)  # the mean's term is missing


def test_one_row_that_amplifies_its_rounding_does_not_widen_the_others() -> None:
    # Row 0 of 1e-6 against eps 1e-12: in float32 its measured noise is ~1e8 × ε. Its rows are left unjudged;
    # the other rows keep their own allowance, and a backward that misses a term fails there.
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(13), dtype=torch.float64)
    x[0] *= 1e-6
    x = x.to(F32)
    correct = check_jacobian(rms_norm, x)
    assert correct.amplification > 1e6
    assert correct.outcome == "inconclusive" and {e.output // 32 for e in correct.elements("inconclusive")} == {0}
    wrong = check_jacobian(mutant(rms_norm, rms_norm_derivative_ignoring_the_rms, "RMSNormWithoutMean"), x)
    assert wrong.outcome == "fail"
    assert {e.output // 32 for e in wrong.elements("fail")} == set(range(1, 8))
    # Called wrong, not imprecise: row 0's large entries are no rounding scale for the other rows' entries.
    assert "the gradient with respect to input `x` is wrong" in wrong.message()
    assert not any(e.output // 32 == 0 for e in wrong.elements("pass") if e.autograd != e.numerical)


@pytest.mark.parametrize("seed", [0, 6, 8])
def test_a_relu_network_in_float32_is_not_failed_for_the_kinks_its_steps_cross(seed: int) -> None:
    # A batch's pre-activations near 0 put kinks at many distances from the weights: float32's coarse steps
    # cross several, and the estimate agrees with itself across windows while the finer steps move toward
    # autograd (an engineer's trial: 4 of 10 seeds failed in float32). A leaking backward still fails.
    def model(activation: type[torch.nn.Module]) -> torch.nn.Module:
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), activation(), torch.nn.Linear(16, 3)).to(F32)

    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(2000 + seed), dtype=torch.float64).to(F32)
    report = check_module(model(torch.nn.ReLU), lambda y: (y ** 2).mean(), x)
    assert report.outcome != "fail", report.message()
    assert check_module(model(LeakingReLU), lambda y: (y ** 2).mean(), x).outcome == "fail"
