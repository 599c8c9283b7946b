"""Arguments without a gradient (integer and bool tensors, Python numbers and strings) are held fixed and named
in the report, as gradcheck skips them; so are integer outputs of a tuple (the indices of torch.max)."""

from __future__ import annotations

import pytest
import torch

from checks import DtypeError, GradientMismatchError, assert_gradients, check_jacobian

F64 = torch.float64


def x() -> torch.Tensor:
    return torch.tensor([[0.3, -0.7, 1.1, 0.5], [2.0, -1.5, 0.2, 0.9]], dtype=F64)


INDEX = torch.tensor([[3, 0], [1, 1]])


class Pick(torch.autograd.Function):
    """x.gather(dim, index) * scale with a hand-written backward; `bug` scales the gradient it scatters."""

    bug = 1.0

    @staticmethod
    def forward(x, index, dim, scale):
        return x.gather(dim, index) * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, index, dim, scale = inputs
        ctx.save_for_backward(index)
        ctx.shape, ctx.dim, ctx.scale = x.shape, dim, scale

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        gradient = torch.zeros(ctx.shape, dtype=grad.dtype).scatter_add(ctx.dim, index, grad * ctx.scale * Pick.bug)
        return gradient, None, None, None


@pytest.fixture
def buggy():
    Pick.bug = 1.001
    yield Pick.apply
    Pick.bug = 1.0


def test_integer_and_python_arguments_are_held_fixed_and_named() -> None:
    report = check_jacobian(Pick.apply, x(), INDEX, 1, 2.5)
    assert report.outcome == "pass", report.message()
    assert [a.name for a in report.arguments] == ["x"]
    assert [(s.name, s.what) for s in report.skipped] == [("index", "an int64 tensor"), ("dim", "an int"),
                                                          ("scale", "a float")]
    assert "Held fixed (no gradient): `index` (an int64 tensor), `dim` (an int), `scale` (a float)" in report.message()
    assert report.autograd.shape == (4, 8)


def test_a_wrong_gradient_beside_integer_arguments_is_named_by_its_input(buggy) -> None:
    with pytest.raises(GradientMismatchError, match="the gradient with respect to input `x` is wrong") as caught:
        assert_gradients(buggy, x(), INDEX, 1, 2.5)
    assert "Held fixed (no gradient): `index`" in str(caught.value)
    report = check_jacobian(buggy, x(), INDEX, 1, 2.5)
    # Exactly the entries the index picks: the (output, input element) pairs of the gather.
    picked = {(0, (0, 3)), (1, (0, 0)), (2, (1, 1)), (3, (1, 1))}
    assert {(e.output, e.index) for e in report.elements() if e.verdict == "fail"} == picked


def test_a_bool_mask_is_held_fixed() -> None:
    mask = torch.tensor([True, False, True])
    report = check_jacobian(lambda t, keep: torch.where(keep, t ** 2, -t), torch.tensor([0.5, 1.5, -2.0], dtype=F64),
                            mask)
    assert report.outcome == "pass" and [s.describe() for s in report.skipped] == ["`keep` (a bool tensor)"]
    assert torch.diagonal(report.autograd).tolist() == [1.0, -1.0, -4.0]


def test_integer_outputs_of_a_tuple_are_held_fixed_and_named() -> None:
    report = check_jacobian(lambda t: torch.max(t, dim=1), x())
    assert report.outcome == "pass"
    assert [o.name for o in report.outputs] == ["output 0"]
    assert [(s.name, s.what) for s in report.skipped] == [("output 1", "an int64 tensor")]


def test_nothing_to_differentiate_is_refused_naming_each_argument() -> None:
    with pytest.raises(DtypeError, match=r"`index` has dtype int64, which has no gradient.*`dim` must be a tensor"):
        check_jacobian(lambda index, dim: index.sum(dim), INDEX, 1)
    with pytest.raises(DtypeError, match="no floating-point tensor"):
        check_jacobian(lambda t: (t.argmax(), t.argmin()), x())
