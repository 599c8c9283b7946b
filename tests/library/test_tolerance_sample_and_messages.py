"""What an engineer's test suite meets: a tolerance of one's own, a sample of the elements, a module's input
gradients, a short repr, a message that names the wrong gradient, a short failure under pytest, a lean
import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from checks import GradientMismatchError, assert_gradients, check_jacobian, check_module

from ..toc import ROOT

F64 = torch.float64


class Scale(torch.autograd.Function):
    """a · b elementwise with a hand-written backward; `bug` scales the gradient with respect to b."""

    bug = 1.0

    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a * Scale.bug


@pytest.fixture
def off_by(request):
    Scale.bug = 1 + request.param
    yield Scale.apply
    Scale.bug = 1.0


def inputs(dtype: torch.dtype = F64) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([0.3, -0.7, 1.1], dtype=dtype), torch.tensor([1.5, 0.4, -2.0], dtype=dtype)


@pytest.mark.parametrize("off_by", [1e-4], indirect=True)
def test_a_tolerance_of_ones_own_is_recorded_and_decides_beside_the_estimate(off_by) -> None:
    assert check_jacobian(off_by, *inputs()).outcome == "fail"  # the estimate resolves 1e-4 in float64
    loose = check_jacobian(off_by, *inputs(), rtol=1e-3)
    assert loose.outcome == "pass"  # the caller accepts 1e-3 relative: 1e-4 is within it, whatever the estimate's error
    assert (loose.tolerance.atol, loose.tolerance.rtol) == (0.0, 1e-3)
    assert "given by the caller" in loose.tolerance.reason
    element = next(e for e in loose.elements() if e.argument == "b" and e.output == 0 and e.index == (0,))
    assert element.allowed == pytest.approx(1e-3 * abs(element.numerical)) and element.supported < 1e-8
    tight = check_jacobian(off_by, *inputs(), atol=1e-6, rtol=1e-5)
    assert tight.outcome == "fail"
    with pytest.raises(GradientMismatchError, match=r"atol=1e-06, rtol=1e-05, given"):
        assert_gradients(off_by, *inputs(), atol=1e-6, rtol=1e-5)


def test_a_tolerance_tighter_than_the_estimate_can_resolve_is_inconclusive_never_a_verdict() -> None:
    report = check_jacobian(torch.sin, torch.tensor([0.3, 1.0, 2.0]), atol=1e-12, rtol=0)  # float32
    assert report.outcome == "inconclusive"
    # The diagonal cannot be resolved to 1e-12 in float32; the zeros off it, found exactly by both, pass.
    assert {(e.output == e.input, e.verdict, e.reason) for e in report.elements()} == {
        (True, "inconclusive", "tolerance"), (False, "pass", "")}
    assert "float64" in report.explain("tolerance")


class NaNBackward(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def test_a_tolerance_never_passes_a_value_that_is_not_finite() -> None:
    assert check_jacobian(NaNBackward.apply, inputs()[0], atol=1e6).outcome == "fail"
    # sqrt at 0: autograd's derivative is infinite, the estimate has no finite value (f is not defined left of 0).
    report = check_jacobian(torch.sqrt, torch.tensor([0.0, 1.0], dtype=F64), atol=1e6)
    first = next(e for e in report.elements() if e.output == 0 and e.input == 0)
    assert first.verdict == "inconclusive" and first.reason == "domain"


def test_a_sample_checks_some_elements_of_each_input_drawn_with_the_seed() -> None:
    x, w = torch.linspace(-1, 1, 200, dtype=F64), torch.linspace(0.5, 1.5, 200, dtype=F64)
    report = check_jacobian(lambda x, w: torch.tanh(x * w), x, w, sample=5, seed=7)
    assert report.outcome == "pass" and report.seed == 7 and report.autograd.shape == (200, 10)
    positions = [a.positions for a in report.arguments]
    assert all(len(p) == 5 and len(set(p)) == 5 and all(0 <= k < 200 for k in p) for p in positions)
    assert {e.index[0] for e in report.elements() if e.argument == "x"} == set(positions[0])
    assert "Checked a random sample (seed 7): 5 of 200 elements of `x`, 5 of 200 elements of `w`" in report.message()
    again = check_jacobian(lambda x, w: torch.tanh(x * w), x, w, sample=5, seed=7)
    other = check_jacobian(lambda x, w: torch.tanh(x * w), x, w, sample=5, seed=8)
    assert again.arguments == report.arguments and other.arguments != report.arguments
    # A sample of all of them, or more, is the whole input.
    assert check_jacobian(torch.tanh, x[:4], sample=4).arguments[0].positions is None


@pytest.mark.parametrize("off_by", [1e-3], indirect=True)
def test_a_sample_finds_a_wrong_gradient_at_the_elements_it_checks(off_by) -> None:
    a, b = torch.linspace(-1, 1, 50, dtype=F64), torch.linspace(0.5, 1.5, 50, dtype=F64)
    report = check_jacobian(off_by, a, b, sample=3)
    assert report.outcome == "fail"
    (b_argument,) = [arg for arg in report.arguments if arg.name == "b"]
    assert {e.index[0] for e in report.elements() if e.verdict == "fail"} == set(b_argument.positions)


def test_the_message_names_the_wrong_gradient_and_the_repr_is_short() -> None:
    Scale.bug = 1.01
    try:
        report = check_jacobian(Scale.apply, *inputs())
    finally:
        Scale.bug = 1.0
    assert "the gradient with respect to input `b` is wrong" in report.message()
    assert report.wrong_gradients() == "the gradient with respect to input `b` is wrong"
    shown = repr(report)
    assert shown.startswith("<CheckReport of f(a, b): failed: 3 of 18 elements") and "tensor(" not in shown
    assert len(shown) < 150


class Linear(torch.autograd.Function):
    """x @ weight.T with a hand-written backward; `input_bug` scales the gradient with respect to x alone:
    every parameter gradient stays right."""

    input_bug = 1.0

    @staticmethod
    def forward(x, weight):
        return x @ weight.T

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight * Linear.input_bug, grad.T @ x


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 6, dtype=F64).reshape(2, 3))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return Linear.apply(features, self.weight)


def test_check_module_checks_the_gradient_with_respect_to_the_modules_input() -> None:
    features = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.4]], dtype=F64)
    loss = lambda out: (out ** 2).sum()  # noqa: E731
    assert check_module(Layer(), loss, features).outcome == "pass"
    Linear.input_bug = 1.01
    try:
        report = check_module(Layer(), loss, features)
        parameters_only = check_module(Layer(), loss, features, inputs=False)
    finally:
        Linear.input_bug = 1.0
    assert report.outcome == "fail" and [a.name for a in report.arguments] == ["weight", "features"]
    assert {e.argument for e in report.elements() if e.verdict == "fail"} == {"features"}
    assert "the gradient with respect to input `features` is wrong" in report.message()
    assert parameters_only.outcome == "pass"  # the bug is in the input's gradient alone


FAILING_TEST = '''
import torch
import checks


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a * 1.01


def test_scale():
    a, b = torch.tensor([0.3, -0.7, 1.1, 0.2]), torch.tensor([1.5, 0.4, -2.0, 0.9])
    checks.assert_gradients(Scale.apply, a.double(), b.double())
'''


def test_a_failure_under_pytest_prints_the_message_not_the_internals(tmp_path: Path) -> None:
    (tmp_path / "test_scale.py").write_text(textwrap.dedent(FAILING_TEST), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_scale.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-3000:]
    lines = run.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip("_ ") == "test_scale")
    end = next(k for k in range(start, len(lines)) if lines[k].startswith("test_scale.py:"))
    failure = lines[start:end + 1]
    # The test's own lines, the message (E), where: no frame of the checker's.
    assert len(failure) <= 15, "\n".join(failure)
    assert failure[-1].endswith("GradientMismatchError")
    shown = "\n".join(failure)
    assert "the gradient with respect to input `b` is wrong" in shown and "Mismatched elements: 4 / 32" in shown
    assert "_raise_unless_passed" not in run.stdout and "checks/core" not in run.stdout
    assert "tensor(" not in "\n".join(line for line in failure if line.startswith("E"))  # no tensors dumped


def test_importing_checks_and_checking_a_gradient_imports_no_book_stack() -> None:
    program = ("import sys, torch, checks\n"
               "report = checks.check_jacobian(torch.sin, torch.tensor([0.5, 1.0], dtype=torch.float64))\n"
               "import checks.core.pytest_plugin\n"
               "assert report.outcome == 'pass'\n"
               "heavy = ('pandas', 'matplotlib', 'IPython', 'sphinx', 'myst_nb', 'myst_parser', 'docutils',\n"
               "         'nbformat')\n"
               "print(sorted({name.split('.')[0] for name in sys.modules} & set(heavy)))")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[]"
