"""Inputs the checker cannot perturb get a clear error naming the input and what is supported, and a
wrong gradient caused by a detached output says so (issue 29, item 7)."""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian, check_module
from checks.core.errors import CheckInputError

F64 = torch.float64


@pytest.mark.parametrize("layout", ["sparse_csr", "sparse_csc"])
def test_a_compressed_sparse_input_is_refused_by_name(layout: str) -> None:
    dense = torch.eye(3, dtype=F64)
    sparse = dense.to_sparse_csr() if layout == "sparse_csr" else dense.to_sparse_csc()
    with pytest.raises(CheckInputError, match=rf"input `weight` is a {layout} tensor.*to_sparse\(\).*to_dense\(\)"):
        check_jacobian(lambda x, weight: x @ weight, torch.ones(3, dtype=F64), sparse)


def test_a_meta_tensor_is_refused_by_name() -> None:
    with pytest.raises(CheckInputError, match=r"input `x` is on the meta device.*no values"):
        check_jacobian(torch.sin, torch.zeros(3, dtype=F64, device="meta"))


@pytest.mark.parametrize("detach", [
    lambda t: t.detach(),
    lambda t: torch.tensor(t.detach().numpy()),
])
def test_a_detached_output_is_named_in_the_failure(detach) -> None:
    x = torch.tensor([0.3, 0.5], dtype=F64)
    report = check_jacobian(lambda t: detach(t) * 2, x)
    assert report.outcome == "fail" and report.detached == ("output",)
    assert "`output` does not require grad" in report.message()


def test_only_the_detached_output_of_a_tuple_is_named() -> None:
    x = torch.tensor([0.3, 0.5], dtype=F64)
    report = check_jacobian(lambda t: (t.sin(), t.detach() ** 2), x)
    assert report.outcome == "fail" and report.detached == ("output 1",)
    assert "`output 1` does not require grad" in report.message()
    assert check_jacobian(lambda t: (t.sin(), t ** 2), x).detached == ()


def test_a_random_f_is_named_as_not_deterministic_and_not_sent_to_float64() -> None:
    torch.manual_seed(0)
    dropout = torch.nn.Dropout(0.5)
    report = check_jacobian(lambda t: dropout(t).sin(), torch.linspace(0.1, 1.0, 6, dtype=F64))
    assert report.outcome != "pass" and report.nondeterminism > 0
    message = report.message()
    assert "f is not deterministic" in message and "check in float64" not in message
    assert check_jacobian(torch.sin, torch.linspace(0.1, 1.0, 6, dtype=F64)).nondeterminism == 0


def test_every_forward_of_a_module_in_train_mode_is_counted() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1)).double()
    before = int(model[1].num_batches_tracked)
    report = check_module(model, lambda out: out.sum(), torch.randn(5, 3, dtype=F64))
    assert int(model[1].num_batches_tracked) - before == report.evaluations
