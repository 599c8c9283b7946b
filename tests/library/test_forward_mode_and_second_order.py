"""Forward mode (gradcheck's check_forward_ad) and second order (gradgradcheck): each against the numerical
estimate, with a correct and a planted wrong derivative."""

from __future__ import annotations

import pytest
import torch

from checks import GradientMismatchError, assert_gradients, check_jacobian
from checks.core.errors import NoForwardModeError
from checks.core.forward import DUAL_NUMBERS, JACFWD
from checks.teaching.mutants import mutant

F64 = torch.float64
X = (0.3, -0.7, 1.1, 0.5)


def x(dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.tensor(X, dtype=dtype)


class Cube(torch.autograd.Function):
    """x³ with a backward and a jvp of its own, and no vmap rule (so torch.func.jacfwd cannot transform it).
    `jvp_bug` scales the jvp alone: the backward stays right."""

    jvp_bug = 1.0

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return tangent * 3 * x ** 2 * Cube.jvp_bug


@pytest.fixture
def wrong_jvp():
    Cube.jvp_bug = 1.001
    yield Cube.apply
    Cube.jvp_bug = 1.0


def test_forward_mode_uses_jacfwd_where_torch_func_can_transform_f() -> None:
    report = check_jacobian(torch.sin, x(), mode="forward")
    assert (report.mode, report.method, report.note, report.outcome) == ("forward", JACFWD, "", "pass")


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_dual_numbers_check_a_jvp_that_jacfwd_cannot_transform(dtype: torch.dtype) -> None:
    report = check_jacobian(Cube.apply, x(dtype), mode="forward")
    assert (report.mode, report.method, report.outcome) == ("forward", DUAL_NUMBERS, "pass")
    assert "torch.func.jacfwd could not transform f" in report.note and "vmap" in report.note


def test_a_wrong_jvp_fails_in_forward_mode_while_the_backward_passes(wrong_jvp) -> None:
    forward = check_jacobian(wrong_jvp, x(), mode="forward")
    assert forward.outcome == "fail" and forward.mode == "forward"
    assert {(e.output, e.input) for e in forward.elements() if e.verdict == "fail"} == {(k, k) for k in range(4)}
    assert check_jacobian(wrong_jvp, x()).outcome == "pass"  # reverse mode reads the backward, which is right
    assert forward.message().splitlines()[0].endswith("are not close! (float64, cpu, forward mode)")
    with pytest.raises(GradientMismatchError, match=r"torch.autograd.forward_ad.*\(forward mode\)"):
        assert_gradients(wrong_jvp, x(), mode="forward")


def test_without_a_jvp_forward_mode_is_refused_and_says_why() -> None:
    no_jvp = mutant(torch.sin, lambda t, g: g * torch.cos(t), "NoJvp")
    with pytest.raises(NoForwardModeError, match="`NoJvp` does not implement jvp"):
        check_jacobian(no_jvp, x(), mode="forward")


def cube_sum(t: torch.Tensor) -> torch.Tensor:
    return (t ** 3).sum()


class DetachedCube(torch.autograd.Function):
    """x³ whose backward treats x as a constant: its first derivatives are right, its second (through
    create_graph, or through the backward's tangents) miss the term from the saved x. Its jvp is right."""

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() ** 2

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return tangent * 3 * x ** 2


detached_cube = DetachedCube.apply


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_second_order_checks_the_vector_jacobian_products_jacobian(mode: str) -> None:
    report = check_jacobian(cube_sum, x(), order=2, mode=mode, seed=5)
    assert report.outcome == "pass", report.message()
    assert report.order == 2 and report.seed == 5 and report.mode == mode
    assert report.method == ("torch.autograd.grad" if mode == "reverse" else DUAL_NUMBERS)
    assert [a.name for a in report.arguments] == ["t", "grad_output"]
    # The vector–Jacobian product is v·3x² (v the scalar grad_output): by x, 6x·v on the diagonal; by v, 3x².
    v = float(report.autograd[0, 0] / (6 * x()[0]))
    assert -1 <= v <= 1
    torch.testing.assert_close(report.autograd[:, :4], torch.diag(6 * x() * v))
    torch.testing.assert_close(report.autograd[:, 4], 3 * x() ** 2)
    assert "Second derivatives of f(t)" in report.message() and "seed 5" in report.message()


def test_the_seed_draws_the_grad_output() -> None:
    first, second = (check_jacobian(lambda t: t ** 3, x(), order=2, seed=seed) for seed in (0, 1))
    assert first.outcome == second.outcome == "pass"
    assert not torch.equal(first.autograd, second.autograd)
    assert torch.equal(first.autograd, check_jacobian(lambda t: t ** 3, x(), order=2, seed=0).autograd)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_backward_that_detaches_its_input_fails_at_second_order_only(mode: str) -> None:
    assert check_jacobian(detached_cube, x(), mode=mode).outcome == "pass"
    report = check_jacobian(detached_cube, x(), order=2, mode=mode)
    assert report.outcome == "fail" and report.mode == mode
    assert {e.argument for e in report.elements() if e.verdict == "fail"} == {"x"}
    with pytest.raises(GradientMismatchError, match="vector–Jacobian product with respect to input `x` is wrong"):
        assert_gradients(detached_cube, x(), order=2, mode=mode)


def test_forward_mode_shows_none_of_torch_s_own_jit_script_deprecation_warnings() -> None:
    """In a fresh process: torch scripts its decompositions, and warns, on the first jacfwd only."""
    import subprocess
    import sys

    program = ("import torch, checks\n"
               "checks.check_jacobian(torch.sin, torch.tensor([0.3, 1.0], dtype=torch.float64), mode='forward')\n")
    run = subprocess.run([sys.executable, "-W", "always", "-c", program], capture_output=True, text=True, check=True)
    assert "jit.script" not in run.stderr
