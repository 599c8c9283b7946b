"""Unit tests of checks.core.checker (and the mutant suite and higher-derivative helpers it is judged with)."""

from __future__ import annotations

import re

import pytest
import torch

import checks
from checks.core.checker import check_jacobian
from checks.core.estimate import NOISE_LINES, NOISE_REACH
from checks.core.errors import CheckInputError, DtypeError, NaNInputError, NoForwardModeError
from checks.teaching.higher import (
    SECOND_DERIVATIVE_CHECKS,
    run_torch_check,
    second_derivative_checks,
)
from checks.teaching.mutants import SCALED_BASES, BatchReversed, correct_cases, mutant, structural_cases

X = (0.3, -0.7, 1.1, 0.5)


def scaled(name: str, delta: float):
    forward, backward, _ = SCALED_BASES[name]
    return mutant(forward, lambda x, g: backward(x, g) * (1 + delta), "Scaled")


@pytest.mark.parametrize("name", sorted(SCALED_BASES))
def test_catches_a_backward_scaled_by_one_plus_1e_6_in_float64(name: str) -> None:
    report = check_jacobian(scaled(name, 1e-6), torch.tensor(X, dtype=torch.float64))
    assert not report.passed
    # Every non-zero entry is wrong by 1e-6 relative, and each must be flagged, not just the worst.
    nonzero = report.numerical.abs() > 1e-12
    assert bool(report.mismatch[nonzero].all())
    # The same base with a correct backward passes: the flag comes from δ, not from the mutant machinery.
    assert check_jacobian(scaled(name, 0.0), torch.tensor(X, dtype=torch.float64)).passed


def test_no_false_alarm_on_the_correct_ops_in_float64() -> None:
    flagged = [case.name for case in correct_cases() if not check_jacobian(case.f, case.input(torch.float64)).passed]
    assert flagged == []


def test_float32_false_alarm_rate_is_low_where_gradchecks_defaults_flag_correct_ops() -> None:
    cases = correct_cases()
    ours = sum(not check_jacobian(case.f, case.input(torch.float32)).passed for case in cases)
    gradcheck = sum(not run_torch_check(case.f, case.input(torch.float32), "gradcheck").passed for case in cases)
    assert ours / len(cases) <= 0.05
    assert gradcheck > len(cases) // 2  # the contrast the chapter shows is real on this machine
    # Still useful in float32: a 1 % error is caught.
    assert not check_jacobian(scaled("sin", 1e-2), torch.tensor(X, dtype=torch.float32)).passed


def test_every_structural_mutant_is_caught_in_float64() -> None:
    missed = [case.name for case in structural_cases() if check_jacobian(case.f, case.input(torch.float64)).passed]
    assert missed == []


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_tiny_derivative_reported_twice_too_large_is_caught_where_gradcheck_passes_it(dtype: torch.dtype) -> None:
    (case,) = [case for case in structural_cases() if case.kind == "small derivative doubled"]
    assert not check_jacobian(case.f, case.input(dtype)).passed
    if dtype == torch.float64:
        assert run_torch_check(case.f, case.input(dtype), "gradcheck").passed  # inside atol=1e-5


@pytest.mark.parametrize("f", [torch.relu, torch.abs], ids=["relu", "abs"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_kink_at_zero_is_inconclusive_not_failed_nor_passed(f, dtype: torch.dtype) -> None:
    report = check_jacobian(f, torch.tensor([0.0, 1.5, -2.0], dtype=dtype))
    assert report.kink.tolist() == [[True, False, False], [False, False, False], [False, False, False]]
    assert report.outcome == "inconclusive" and not report.passed and not report.failed and report.kinks == 1
    assert report.elements()[0].verdict == "inconclusive" and report.elements()[0].reason == "kink"
    assert "another point" in report.explain("kink")
    # Away from 0 the same function has no kink, and passes.
    assert check_jacobian(f, torch.tensor([0.5, 1.5, -2.0], dtype=dtype)).passed


def test_a_smooth_function_with_zero_curvature_is_not_a_kink() -> None:
    # f'' = 0 at x = 0 for x³: the one-sided gap falls like h², far from the ratio of a kink.
    report = check_jacobian(lambda x: x**3 + x, torch.tensor([0.0, 1e-3], dtype=torch.float64))
    assert report.kinks == 0 and report.passed


def test_a_smooth_function_whose_coarse_gaps_do_not_halve_is_not_a_kink() -> None:
    # x·sin x in float32 at ±3.64: at the first steps (about 0.1 and 0.05) h·f'' is far from asymptotic and the
    # gap fell by less than a quarter; from the next step on it halves, which a kink's gap would not.
    x = torch.linspace(-4, 4, 401)[[18, 382]]
    report = check_jacobian(lambda t: t * torch.sin(t), x)
    assert report.kinks == 0 and report.passed, report.message()


def clamped(t: torch.Tensor) -> torch.Tensor:
    return t.clamp(min=-1.0)


# clamp's backward leaking a gradient of 1 onto its flat side, up to 0.01 beyond its bound.
leaky_clamp = mutant(clamped, lambda x, g: g * (x > -1.01).to(g.dtype), "ClampLeakingBeyondItsBound")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_kink_a_step_away_is_named_as_near_not_at_x(dtype: torch.dtype) -> None:
    # 1e-3 beyond the bound: the first steps (0.0058 in float64, 0.1 in float32) cross it, the finest see f flat
    # at -1, where autograd claims a slope of 1 (a flat side is judged only where autograd is within its
    # rounding); at the bound itself, a kink.
    report = check_jacobian(leaky_clamp, torch.tensor([-1.001, -1.0], dtype=dtype))
    assert [e.reason for e in report.elements("inconclusive")] == ["kink nearby", "kink"]
    assert report.kinks == 1  # the summary counts the kink at x alone
    assert ("float64" in report.explain("kink nearby")) == (dtype == torch.float32)


class SortedValues(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        values, indices = x.sort(-1)
        ctx.save_for_backward(indices)
        return values

    @staticmethod
    def backward(ctx, g):
        (indices,) = ctx.saved_tensors
        return torch.zeros_like(g).scatter(-1, indices, g)


def test_f_flat_beside_x_below_a_breakpoint_is_judged_there() -> None:
    # f unchanged on both sides of x from some step down, changed at coarser steps: the slope below the
    # breakpoint is 0 to f's rounding over that step, and autograd's 0 passes (clamp beyond its bound).
    for distance in (1e-3, 4e-4, 1e-5):
        report = check_jacobian(clamped, torch.tensor([-1.0 - distance], dtype=torch.float64))
        assert report.outcome == "pass", report.message()
    # The class: sort, max-pooling and median at random points, whose inputs lie closer together than the
    # first steps (gradcheck's fixed step of 1e-6 seldom crosses them).
    def pool(t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.max_pool1d(t.unsqueeze(0), 3, 1).squeeze(0)

    def median(t: torch.Tensor) -> torch.Tensor:
        return t.median(-1).values

    for seed in range(3):
        x = torch.randn(8, 32, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        for f in (SortedValues.apply, pool, median):
            report = check_jacobian(f, x)
            assert report.outcome == "pass", report.message()
    # A wrong value there is not passed: the inverse permutation (gather for scatter).
    wrong = mutant(SortedValues.apply, lambda x, g: g.gather(-1, x.sort(-1).indices), "SortBackwardGathers")
    assert check_jacobian(wrong, x).outcome == "fail"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_relu_just_left_of_its_kink_is_judged_on_its_flat_side(dtype: torch.dtype) -> None:
    # f is exactly 0 at x and on the whole left side, and beside x on the right up to the kink: a slope of 0 is
    # resolved there, to ε·max(|x|, 1) over the largest such step.
    report = check_jacobian(torch.relu, torch.tensor([-1e-3, 2.0], dtype=dtype))
    assert report.outcome == "pass", report.message()
    assert float(report.allowed[0, 0]) < (1e-11 if dtype == torch.float64 else 1e-2)
    # A backward that leaks a gradient onto the flat side is not passed there.
    leaky = mutant(torch.relu, lambda x, g: g * (x > -0.01).to(g.dtype), "ReluLeakingLeft")
    assert check_jacobian(leaky, torch.tensor([-1e-3, 2.0], dtype=dtype)).outcome != "pass"


def test_the_per_element_report_has_both_values_the_error_estimate_and_a_verdict() -> None:
    x = torch.tensor([0.2, -0.4], dtype=torch.float64)
    report = check_jacobian(scaled("exp", 1e-3), x)
    elements = report.elements()
    assert [(e.output, e.input) for e in elements] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    diagonal = {e.input: e for e in elements if e.output == e.input}
    for j, e in diagonal.items():
        exact = float(torch.exp(x[j]))
        assert e.autograd == pytest.approx(exact * (1 + 1e-3), rel=1e-12)
        assert e.numerical == pytest.approx(exact, rel=1e-10)
        assert 0 <= e.error_estimate < e.allowed < 1e-9
        assert e.verdict == "fail"
    assert all(e.verdict == "pass" for e in elements if e.output != e.input)
    # A mismatch is confirmed by the next window and the finest that can still resolve it. 2 evaluations per step and
    # column; f(x) twice (the second: is f deterministic?), autograd's forward, the property checks' forward and
    # f(x) in the first batch (vmap's witness); the noise probe's points on its lines; the kink test reads the same.
    assert all(levels >= 6 for levels in report.levels.tolist())
    assert report.evaluations == 2 * int(report.levels.sum()) + 5 + NOISE_LINES * 2 * NOISE_REACH
    right = check_jacobian(scaled("exp", 0.0), x)
    assert right.passed and right.evaluations == 2 * int(right.levels.sum()) + 5 + NOISE_LINES * 2 * NOISE_REACH
    assert "failed: 2 of 4" in report.summary()


def test_forward_mode_uses_jacfwd_and_refuses_a_function_without_jvp() -> None:
    x = torch.tensor(X, dtype=torch.float64)
    plain = check_jacobian(torch.sin, x, mode="forward")
    assert (plain.mode, plain.note) == ("forward", "")
    with pytest.raises(NoForwardModeError, match="does not implement jvp"):
        check_jacobian(scaled("sin", 0.0), x, mode="forward")


def test_bad_input_gets_a_clear_error() -> None:
    with pytest.raises(CheckInputError, match="must be a tensor"):
        check_jacobian(torch.sin, [1.0, 2.0])
    with pytest.raises(DtypeError, match="int64"):
        check_jacobian(torch.sin, torch.tensor([1, 2]))
    with pytest.raises(DtypeError, match="float16"):
        check_jacobian(torch.sin, torch.tensor([1.0], dtype=torch.float16))
    with pytest.raises(NaNInputError):
        check_jacobian(torch.sin, torch.tensor([float("nan")], dtype=torch.float64))
    with pytest.raises(NaNInputError, match="f\\(x\\) is not finite"):
        check_jacobian(torch.log, torch.tensor([-1.0], dtype=torch.float64))
    with pytest.raises(CheckInputError, match="mode"):
        check_jacobian(torch.sin, torch.tensor([1.0], dtype=torch.float64), mode="sideways")
    with pytest.raises(CheckInputError, match="empty"):
        check_jacobian(torch.sin, torch.tensor([], dtype=torch.float64))
    with pytest.raises(CheckInputError, match="not a tensor"):
        check_jacobian(lambda x: 3.0, torch.tensor([1.0], dtype=torch.float64))
    assert issubclass(checks.CheckReport, object) and checks.check_jacobian is check_jacobian


def test_second_derivative_checks_see_a_detached_backward_that_gradcheck_passes() -> None:
    cube = mutant(lambda x: x**3, lambda x, g: g * 3 * x.detach() ** 2, "Detached")
    table = second_derivative_checks({"detached": lambda t: cube(t).sum(), "correct": lambda t: (t**3).sum()},
                                     torch.tensor([0.5, -1.2], dtype=torch.float64))
    passed = {(row.function, row.check): row.passed for row in table.itertuples()}
    gradcheck, gradgradcheck, ours = SECOND_DERIVATIVE_CHECKS
    assert passed == {("detached", gradcheck): True, ("detached", gradgradcheck): False, ("detached", ours): False,
                      ("correct", gradcheck): True, ("correct", gradgradcheck): True, ("correct", ours): True}
    assert all(table["message"].str.len() > 0)


def test_a_batching_rule_that_does_not_hold_for_f_is_caught_and_f_evaluated_point_by_point() -> None:
    # A batching rule that hands each point another point's value (vmap of torch.roll without dims does, in
    # op_db's sample): a batched evaluation is another point's value. The first batch evaluates x too; its
    # batched f(x) differs from the plain one.
    x = torch.tensor(-4.827, dtype=torch.float64)
    points = torch.stack([x + 0.1 * k for k in range(4)])
    assert not torch.equal(torch.func.vmap(BatchReversed.apply)(points), points)  # the rule is wrong
    report = check_jacobian(BatchReversed.apply, x)
    assert report.outcome == "pass" and float(report.numerical[0, 0]) == pytest.approx(1.0, abs=1e-9)
    assert "vmap" in report.note
    assert check_jacobian(torch.sin, x).note == ""


def test_elements_can_be_asked_for_by_verdict_and_an_unknown_verdict_is_named() -> None:
    def backward(x, g):
        return g * torch.cos(x) * torch.tensor([1.0, 1.0, 1.5], dtype=x.dtype)

    report = check_jacobian(mutant(torch.sin, backward, "WrongLast"), torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64))
    everything = report.elements()
    assert len(everything) == 9
    assert report.elements("fail") == [e for e in everything if e.verdict == "fail"]
    assert [(e.output, e.input) for e in report.elements("fail")] == [(2, 2)]
    assert report.elements("pass", "inconclusive") == [e for e in everything if e.verdict != "fail"]
    with pytest.raises(ValueError, match="unknown verdict.*'passed'"):
        report.elements("passed")


def test_max_step_keeps_the_steps_from_crossing_a_kink_near_the_point() -> None:
    x = torch.tensor([-1.001, -0.998, 0.5], dtype=torch.float64)
    # The first steps cross the bound; capped below its distance they show the flat side, and the leak is a
    # failure, not a kink nearby.
    assert {e.reason for e in check_jacobian(leaky_clamp, x).elements("inconclusive")} == {"kink nearby"}
    capped = check_jacobian(leaky_clamp, x, max_step=1e-4)
    assert capped.outcome == "fail" and [e.index for e in capped.elements("fail")] == [(0,)]
    report = check_jacobian(clamped, x, max_step=1e-4)
    assert report.outcome == "pass", report.message()
    assert float(report.details()[1].max()) <= 1e-4  # every chosen window's steps within the cap
    assert check_jacobian(torch.sin, x, max_step=1e-4).outcome == "pass"
    # A cap that still crosses the kink: the advice names the first step the check took, not the default.
    nearer = check_jacobian(leaky_clamp, torch.tensor([-1.0001], dtype=torch.float64), max_step=1e-3)
    assert "first step, 0.001·max" in nearer.explain("kink nearby")
    # The advice names a max_step below the kink, and following it settles the element: the leak fails.
    advised = re.search(r"max_step=([0-9.e-]+) \(f did not change", check_jacobian(leaky_clamp, x).message())
    assert advised, check_jacobian(leaky_clamp, x).message()
    assert float(advised.group(1)) <= check_jacobian(leaky_clamp, x).nearby_max_step
    assert check_jacobian(leaky_clamp, x, max_step=float(advised.group(1))).outcome == "fail"
    with pytest.raises(CheckInputError, match="max_step=1e-13 leaves no room"):
        check_jacobian(clamped, x, max_step=1e-13)
    with pytest.raises(CheckInputError, match="max_step"):
        check_jacobian(clamped, x, max_step=-1.0)


def piecewise(t: torch.Tensor) -> torch.Tensor:
    return t.clamp(-1, 1) + 2 * torch.relu(t - 0.5) + 0.5 * t.abs()


def piecewise_derivative(t: torch.Tensor, inside: float = 1.0) -> torch.Tensor:
    return (t.abs() < inside).to(t.dtype) + 2 * (t > 0.5).to(t.dtype) + 0.5 * t.sign()


def test_a_window_across_a_breakpoint_gives_way_to_finer_ones_past_it() -> None:
    # 4.4e-4 inside clamp's bound: float32's coarse windows cross it (their central differences near 3, their
    # gaps near 1 at every step) and look least uncertain; its finer windows see f linear with slope 3.5.
    x = torch.tensor([0.999559223651886, 0.2], dtype=torch.float32)
    correct = mutant(piecewise, lambda t, g: g * piecewise_derivative(t), "Piecewise")
    report = check_jacobian(correct, x)
    assert report.outcome == "pass", report.message()
    assert float(report.numerical[0, 0]) == pytest.approx(3.5, rel=1e-3)
    missing = mutant(piecewise, lambda t, g: g * (piecewise_derivative(t) - 0.5 * t.sign()), "PiecewiseWithoutAbs")
    assert check_jacobian(missing, x).outcome == "fail"
    # Past the bound, a backward that leaks clamp's slope there is not passed in either dtype.
    leaky = mutant(piecewise, lambda t, g: g * piecewise_derivative(t, inside=1.001), "PiecewiseLeaking")
    beyond = torch.tensor([1.00044, 0.2])
    assert check_jacobian(leaky, beyond.to(torch.float64)).outcome == "fail"
    assert check_jacobian(leaky, beyond.to(torch.float32)).outcome != "pass"


def test_a_mismatch_whose_own_window_crosses_a_breakpoint_is_a_kink_not_a_failure() -> None:
    # Two inputs of a sorted row 1.4e-4 apart in float32: the sorted value's estimate for the lower one comes
    # from windows across the tie (the average of slopes 0 and 1), while its column's finest-resolved element
    # chose a window below it.
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1010), dtype=torch.float64).to(torch.float32)
    report = check_jacobian(SortedValues.apply, x)
    assert report.outcome != "fail", report.message()
    assert report.inconclusive[3 * 32 + 7, 3 * 32 + 19]
    wrong = mutant(SortedValues.apply, lambda t, g: g.gather(-1, t.sort(-1).indices), "SortBackwardGathers")
    assert check_jacobian(wrong, x).outcome == "fail"


def test_a_flat_side_in_float32_is_judged_against_f_s_own_scale() -> None:
    # 0.1 beyond clamp's bound, float32's first step just crosses it; below, f is flat at 0.3. Its row and column
    # hold this element alone, whose estimate comes from across the bound: the slope's scale is f over x.
    def f(a: torch.Tensor) -> torch.Tensor:
        return 2 * torch.relu(a) - torch.clamp(a, -0.3, 0.3)

    x = torch.tensor([-0.40043, 0.7], dtype=torch.float32)
    report = check_jacobian(f, x)
    assert report.outcome == "pass", report.message()
    leaky = mutant(f, lambda a, g: g * (2 * (a > 0).to(a.dtype) - (a.abs() < 0.5).to(a.dtype)), "ClampLeaking")
    assert check_jacobian(leaky, x).outcome != "pass"
    # A non-zero claim is judged at its own scale: erfc at -4.15 rounds to 2 in float32, flat to its rounding
    # around x, while its slope, -3.9e-8, lies far below what that flatness bounds.
    saturated = check_jacobian(torch.special.erfc, torch.tensor([-4.146041393280029, 0.3], dtype=torch.float32))
    assert saturated.inconclusive[0, 0] and saturated.agreed[1, 1]


def test_a_mismatch_across_a_breakpoint_beside_x_is_not_a_failure() -> None:
    # topk's second value, 1.9e-4 above the third, in float32: moving it down crosses the tie at the coarse
    # steps (a change on that side alone), below the tie f is flat on both sides. The coarse estimate (0.47)
    # is not f's slope at x, whatever its allowance; the noise probe, crossing the tie too, leaves the flat
    # side's bound too coarse to pass autograd's 0 in float32, and the element is unjudged.
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(torch.float32)
    report = check_jacobian(lambda t: t.topk(3, -1).values, x)
    assert report.outcome != "fail", report.message()
    assert report.elements()[17 * 256 + 179].reason == "kink nearby"
    assert check_jacobian(lambda t: t.topk(3, -1).values, x.double()).outcome == "pass"
