"""A sparse COO input is checked at its specified elements, as gradcheck's masked=True checks it (issue 29,
items 7 and 9): each named by its index in the dense tensor; a wrong gradient there fails, blaming it."""

from __future__ import annotations

import inspect

import pytest
import torch

from checks import check_jacobian
from checks.core.errors import CheckInputError

F64 = torch.float64
# gradcheck's check at the specified elements: masked=True since torch 2.1, check_sparse_nnz=True before.
MASKED = "masked" if "masked" in inspect.signature(torch.autograd.gradcheck).parameters else "check_sparse_nnz"


def matrix() -> torch.Tensor:
    return torch.tensor([[0.0, 2.0, 0.0], [1.5, 0.0, -0.5]], dtype=F64).to_sparse()


def weight() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 6, dtype=F64).reshape(3, 2)


def product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.sparse.mm(x, w)


class DoubledSparseGradient(torch.autograd.Function):
    """torch.sparse.mm with the sparse input's gradient twice too large."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.sparse.mm(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return 2 * (g @ w.T).sparse_mask(x.coalesce()), x.t() @ g


def test_a_right_gradient_passes_at_the_specified_elements_as_gradcheck_masked_does() -> None:
    report = check_jacobian(product, matrix(), weight())
    assert report.outcome == "pass"
    x = report.arguments[0]
    assert (x.numel, x.specified, x.size) == (3, 3, 6)
    assert [x.index(x.offset + k) for k in range(x.numel)] == [(0, 1), (1, 0), (1, 2)]
    assert "3 of 6 elements of `x`" in report.message()
    leaves = (matrix().requires_grad_(True), weight().requires_grad_(True))
    assert torch.autograd.gradcheck(product, leaves, **{MASKED: True})


def test_a_wrong_gradient_of_the_sparse_input_fails_and_names_its_specified_elements() -> None:
    report = check_jacobian(DoubledSparseGradient.apply, matrix(), weight())
    assert report.outcome == "fail"
    assert "input `x` is wrong" in report.wrong_gradients()
    wrong = {(e.argument, e.index) for e in report.elements() if e.verdict == "fail"}
    assert wrong == {("x", (0, 1)), ("x", (1, 0)), ("x", (1, 2))}


def test_a_sample_of_a_sparse_input_is_drawn_among_its_specified_elements() -> None:
    report = check_jacobian(product, matrix(), weight(), sample=2)
    x = report.arguments[0]
    assert x.numel == 2 and x.sampled and set(x.positions) <= {1, 3, 5}
    assert "2 of 3 specified elements of `x`" in report.message()


@pytest.mark.parametrize("options", [{"mode": "forward"}, {"order": 2}])
def test_forward_mode_and_second_order_are_refused_for_a_sparse_input(options: dict) -> None:
    with pytest.raises(CheckInputError, match=r"input `x` is sparse.*reverse mode, first order.*to_dense\(\)"):
        check_jacobian(product, matrix(), weight(), **options)


def test_a_sparse_input_that_specifies_nothing_or_has_dense_dimensions_is_refused() -> None:
    with pytest.raises(CheckInputError, match=r"input `x` is sparse and specifies no element"):
        check_jacobian(lambda x: x.to_dense().sin(), torch.zeros(2, 3, dtype=F64).to_sparse())
    hybrid = torch.ones(2, 3, dtype=F64).to_sparse(1)
    with pytest.raises(CheckInputError, match=r"input `x` is a hybrid sparse COO tensor \(1 sparse and 1 dense"):
        check_jacobian(lambda x: x.to_dense().sin(), hybrid)
