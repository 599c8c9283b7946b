"""sample=k in reverse mode pays per sampled element, not per output (issue 29, item 6): where f has more
outputs than checked inputs, autograd's Jacobian is read column by column from f's backward."""

from __future__ import annotations

import torch

from checks import check_jacobian
from checks.core.autograd import DOUBLE_BACKWARD

F64 = torch.float64


class CountedTanh(torch.autograd.Function):
    """tanh, counting its backward calls."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        CountedTanh.calls += 1
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


def test_a_sample_of_a_large_input_costs_a_few_backwards() -> None:
    x = torch.randn(20_000, dtype=F64, generator=torch.Generator().manual_seed(0))
    CountedTanh.calls = 0
    report = check_jacobian(CountedTanh.apply, x, sample=5)
    assert report.outcome == "pass" and report.method == DOUBLE_BACKWARD
    # One backward with create_graph for the Jacobian, a few for the property checks: not one per output.
    assert CountedTanh.calls <= 10


class WrongTanh(CountedTanh):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) * 1.001


def test_a_wrong_backward_still_fails_on_a_sample() -> None:
    x = torch.randn(20_000, dtype=F64, generator=torch.Generator().manual_seed(1))
    report = check_jacobian(WrongTanh.apply, x, sample=5)
    assert report.outcome == "fail" and int(report.mismatch.sum()) == 5


class Detached(torch.autograd.Function):
    """A backward that cannot be differentiated (it leaves autograd): the rows come one per output instead."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(g.detach().numpy() * x.cos().detach().numpy())


def test_a_backward_that_cannot_be_differentiated_is_read_row_by_row() -> None:
    x = torch.randn(50, dtype=F64, generator=torch.Generator().manual_seed(2))
    report = check_jacobian(Detached.apply, x, sample=3)
    assert report.outcome == "pass" and report.method != DOUBLE_BACKWARD
    assert "could not be differentiated" in report.note
