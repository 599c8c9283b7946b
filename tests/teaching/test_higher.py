"""checks.teaching.higher's matrix records: each way to a Hessian (torch.func.hessian, autograd.grad with
create_graph=True, Richardson differences) against the analytical matrix, and the refusals."""

from __future__ import annotations

import pytest
import torch

from checks.core.errors import CheckInputError, ShapeMismatchError
from checks.teaching.higher import AnalyticalMatrix, matrix_record


def test_matrix_records_hold_each_way_to_the_analytical_matrix() -> None:
    hessian = AnalyticalMatrix("x0²·x1", lambda x: x[0] ** 2 * x[1], "[[2x1, 2x0], [2x0, 0]]",
                               lambda x: torch.tensor([[2 * x[1], 2 * x[0]], [2 * x[0], 0.0]]), "twice", order=2)
    for way in ("hessian", "create_graph", "richardson"):
        record = matrix_record(hessian, [0.7, -1.3], way)
        assert record.executed and record.passed, (way, record.message)
        assert record.x == [0.7, -1.3]  # float64 from the start, not float32 widened
    numerical = matrix_record(hessian, [0.7, -1.3], "richardson")
    assert numerical.how == "numerical" and numerical.method == "richardson" and numerical.evaluations > 0
    with pytest.raises(CheckInputError, match="gives a Jacobian"):
        matrix_record(hessian, [0.7, -1.3], "jacrev")
    wrong = AnalyticalMatrix("x0²·x1", hessian.f, "2x1", lambda x: torch.tensor([2 * x[1]]), "wrong shape", order=2)
    with pytest.raises(ShapeMismatchError, match="outputs, inputs"):
        matrix_record(wrong, [0.7, -1.3], "hessian")
