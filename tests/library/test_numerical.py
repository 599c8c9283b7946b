"""Unit tests of the finite-difference estimators against derivatives known in closed form."""

from __future__ import annotations

import pytest
import torch

from checks.core.errors import CheckInputError, DtypeError, NaNInputError, NonScalarOutputError, StepError
from checks.core.numerical import (
    METHODS,
    default_step,
    estimate_gradient,
    estimate_jacobian,
    machine_epsilon,
    representable_step,
)

# f, its exact gradient, and the magnitude of f and its derivatives near the test points (order 1-10).
FUNCTIONS = {
    "sum of sin(x)·x": (lambda x: (torch.sin(x) * x).sum(), lambda x: torch.cos(x) * x + torch.sin(x)),
    "sum of exp(x)": (lambda x: torch.exp(x).sum(), torch.exp),
    "x³ summed": (lambda x: (x**3).sum(), lambda x: 3 * x**2),
}
POINTS = [0.5, -1.25, 2.0]

# Allowed |estimate - exact|, as multiples of the theory for unit-scale f (see default_step): forward √ε,
# central ε^(2/3), complex ε, Richardson with three levels ε^(6/7). The factor 50 covers |f|, |f''|, |f'''| up to ~10 at
# these points and the sum over three elements; it is far below the error of a wrong method.
THEORY_EXPONENT = {"forward": 1 / 2, "central": 2 / 3, "complex": 1.0, "richardson": 6 / 7}
SAFETY = 50


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_estimator_matches_the_known_gradient(name: str, method: str, dtype: torch.dtype) -> None:
    f, df = FUNCTIONS[name]
    x = torch.tensor(POINTS, dtype=dtype)
    estimate = estimate_gradient(f, x, method)
    exact = df(x.double())
    allowed = SAFETY * machine_epsilon(dtype) ** THEORY_EXPONENT[method] * exact.abs().clamp(min=1)
    assert estimate.values.shape == x.shape and estimate.values.dtype == dtype
    assert ((estimate.values.double() - exact).abs() <= allowed).all(), (estimate.values, exact)
    assert estimate.method == method and estimate.dtype == str(dtype).removeprefix("torch.")


def test_a_wrong_step_gives_a_visibly_wrong_estimate() -> None:
    # The test above can fail: a huge forward step misses exp'(x) = exp(x) by far more than its allowance.
    x = torch.tensor([1.0], dtype=torch.float64)
    estimate = estimate_gradient(lambda t: torch.exp(t).sum(), x, "forward", step=0.5)
    assert (estimate.values - torch.exp(x)).abs().item() > 0.5


@pytest.mark.parametrize("method", METHODS)
def test_jacobian_has_one_column_per_input_element(method: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x[0] * x[1], torch.sin(x).sum(), x[2] ** 2, x[0] - x[2]])

    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    estimate = estimate_jacobian(f, x, method)
    exact = torch.autograd.functional.jacobian(f, x)
    assert estimate.values.shape == (4, 3)
    torch.testing.assert_close(estimate.values, exact, rtol=1e-6, atol=1e-6)


def test_jacobian_of_a_matrix_input_flattens_inputs_and_outputs() -> None:
    x = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(2, 3)
    estimate = estimate_jacobian(lambda t: t.T * 2.0, x, "central")
    exact = torch.autograd.functional.jacobian(lambda t: t.T * 2.0, x).reshape(6, 6)
    assert estimate.steps.shape == (1, 2, 3)
    torch.testing.assert_close(estimate.values, exact, rtol=1e-8, atol=1e-8)


def test_evaluation_counts_follow_each_method() -> None:
    x = torch.tensor(POINTS, dtype=torch.float64)
    f = FUNCTIONS["sum of exp(x)"][0]
    n = x.numel()
    counts = {method: estimate_gradient(f, x, method).evaluations for method in METHODS}
    assert counts == {"forward": n + 1, "central": 2 * n, "complex": n, "richardson": 2 * n * 3}
    assert estimate_gradient(f, x, "richardson", levels=2).evaluations == 2 * n * 2


def test_steps_are_representable_and_scaled_with_x() -> None:
    x = torch.tensor([1e-3, 1.0, 1e4], dtype=torch.float32)
    h = representable_step(x, 1e-3)
    # h is the perturbation x really receives, so adding it again lands on the same point: exact equality
    # is the property being tested (x + h is a representable number, and so is its distance from x).
    assert torch.equal((x + h) - x, h)
    # Scaled with max(|x|, 1): about 1e-3 near 0 and at 1, about 1e4 times larger at 1e4; "about" because
    # rounding against x moves each step by up to ε·|x|.
    assert abs(h[0].item() - 1e-3) < 1e-6 and abs(h[1].item() - 1e-3) < 1e-6
    assert abs(h[2].item() / 1e-3 - 1e4) / 1e4 < 1e-3
    estimate = estimate_gradient(lambda t: t.sum(), x, "forward", step=1e-3)
    assert torch.equal(estimate.step, h.double())


def test_richardson_reports_halved_steps_and_an_honest_error_estimate() -> None:
    x = torch.tensor(POINTS, dtype=torch.float64)
    f, df = FUNCTIONS["sum of sin(x)·x"]
    estimate = estimate_gradient(f, x, "richardson", levels=3)
    assert estimate.steps.shape == (3, 3)
    ratios = estimate.steps[1:] / estimate.steps[:-1]
    assert ((ratios - 0.5).abs() < 1e-6).all()
    assert estimate.error is not None and estimate.error.shape == x.shape
    actual = (estimate.values - df(x)).abs()
    # An estimate, not a bound: within a factor 10 of the actual error (or below float64 noise).
    assert (actual <= 10 * estimate.error + 1e-14).all(), (actual, estimate.error)
    assert estimate_gradient(f, x, "central").error is None


def test_vmap_and_loop_agree_and_the_loop_is_the_fallback() -> None:
    x = torch.tensor(POINTS, dtype=torch.float64)
    f = FUNCTIONS["x³ summed"][0]
    batched = estimate_gradient(f, x, "central")
    looped = estimate_gradient(f, x, "central", vectorize=False)
    assert batched.batched and not looped.batched
    # Same points, same float64 arithmetic, but a batched sum may add in another order on another CPU (its
    # vector width): f's last bits may differ, and the difference quotient divides them by 2h. A few units
    # in the last place of f, over 2h, is all that batching may change; a wrong point or step is far beyond.
    rounding = 4 * machine_epsilon(torch.float64) * f(x).abs() / (2 * looped.step)
    assert ((batched.values - looped.values).abs() <= rounding).all(), (batched.values - looped.values, rounding)

    def branching(t: torch.Tensor) -> torch.Tensor:  # .item() cannot run under vmap
        return t * t if t.item() > 0 else -t

    fallback = estimate_gradient(branching, torch.tensor(2.0, dtype=torch.float64), "central")
    assert not fallback.batched and abs(fallback.values.item() - 4.0) < 1e-8
    with pytest.raises(RuntimeError):
        estimate_gradient(branching, torch.tensor(2.0, dtype=torch.float64), "central", vectorize=True)


def test_a_step_below_the_dtype_resolution_is_refused() -> None:
    with pytest.raises(StepError, match="rounds to zero in float16"):
        estimate_gradient(lambda t: t * t, torch.tensor(3.0, dtype=torch.float16), "central", step=1e-6)


def test_complex_step_needs_a_complex_dtype_and_an_analytic_function() -> None:
    with pytest.raises(DtypeError, match="bfloat16"):
        estimate_gradient(lambda t: t * t, torch.tensor(3.0, dtype=torch.bfloat16), "complex")
    with pytest.raises(CheckInputError, match="imaginary part"):
        estimate_gradient(lambda t: t.abs() ** 2, torch.tensor(3.0, dtype=torch.float64), "complex")


@pytest.mark.parametrize(
    ("x", "error"),
    [
        (torch.tensor([1, 2]), DtypeError),
        (torch.tensor([1.0, float("nan")]), NaNInputError),
        ([1.0, 2.0], CheckInputError),
    ],
)
def test_bad_inputs_are_refused_with_a_clear_error(x: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        estimate_gradient(lambda t: t.sum(), x)  # type: ignore[arg-type]


def test_bad_arguments_are_refused() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with pytest.raises(NonScalarOutputError):
        estimate_gradient(lambda t: t * 2, x)
    with pytest.raises(CheckInputError, match="method"):
        estimate_gradient(lambda t: t.sum(), x, "backward")  # type: ignore[arg-type]
    with pytest.raises(CheckInputError, match="step"):
        estimate_gradient(lambda t: t.sum(), x, step=-1.0)
    with pytest.raises(CheckInputError, match="levels"):
        estimate_gradient(lambda t: t.sum(), x, "richardson", levels=1)
    with pytest.raises(CheckInputError, match="not a tensor"):
        estimate_gradient(lambda t: 1.0, x)  # type: ignore[arg-type, return-value]


def test_default_steps_come_from_machine_epsilon() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        eps = torch.finfo(dtype).eps
        assert default_step("forward", dtype).h0 == pytest.approx(eps ** 0.5)
        assert default_step("central", dtype).h0 == pytest.approx(eps ** (1 / 3))
        assert "ε" in default_step("central", dtype).reason
        # Richardson's step follows its levels: L levels remove h², ..., h^(2L-2), leaving h^(2L).
        assert default_step("richardson", dtype).h0 == pytest.approx(eps ** (1 / 7))
        assert default_step("richardson", dtype, levels=2).h0 == pytest.approx(eps ** (1 / 5))
    with pytest.raises(CheckInputError, match="levels"):
        default_step("richardson", torch.float64, levels=1)


def test_richardson_default_step_beats_the_other_level_count_s_step() -> None:
    # Summed over the test functions at nine points: three levels do better at their own step ε^(1/7) than
    # at two levels' ε^(1/5), in both dtypes; two levels do better at ε^(1/5) in float64 (in float32 their
    # rounding noise blurs the difference).
    def error(dtype: torch.dtype, levels: int, step_for: int) -> float:
        x = torch.linspace(-2, 2, 9, dtype=dtype)
        h0 = default_step("richardson", dtype, step_for).h0
        return sum((estimate_gradient(f, x, "richardson", h0, levels=levels).values.double() - df(x.double()))
                   .abs().max().item() for f, df in FUNCTIONS.values())

    for dtype in (torch.float64, torch.float32):
        assert error(dtype, 3, 3) < error(dtype, 3, 2) / 2
    assert error(torch.float64, 2, 2) < error(torch.float64, 2, 3) / 2


def test_summary_is_plain_python_for_records() -> None:
    estimate = estimate_gradient(lambda t: (t * t).sum(), torch.tensor([1.0, 2.0], dtype=torch.float64), "richardson")
    summary = estimate.summary()
    assert summary["method"] == "richardson" and summary["evaluations"] == 12
    assert len(summary["step"]) == 3 and len(summary["error_estimate"]) == 2
    assert all(isinstance(value, float) for value in summary["error_estimate"])
