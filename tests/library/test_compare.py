"""checks.core.compare and checks.core.tolerances: where and by how much two tensors differ, judged as
torch.isclose judges them, under a tolerance whose every change keeps the old value and the reason."""

from __future__ import annotations

import pytest
import torch

import checks
from checks.core.compare import beyond_allowance, compare


def test_compare_reports_where_and_by_how_much() -> None:
    tolerance = checks.default_tolerance("float64")
    result = compare(torch.tensor([1.0, 2.5, 3.0]), torch.tensor([1.0, 2.0, 3.0]), tolerance)
    assert not result.passed and result.worst_index == (1,) and result.mismatched == 1
    assert result.abs_error == 0.5 and result.rel_error == 0.25
    nan = compare(torch.tensor([float("nan")]), torch.tensor([1.0]), tolerance)
    assert not nan.passed


def test_the_worst_element_reported_is_a_mismatched_one() -> None:
    # The greatest absolute difference (index 1) is inside its allowance, being relative to a large value;
    # the only element outside is index 0, and that is the one the record must point at.
    tolerance = checks.default_tolerance("float64").changed(rtol=1e-3, atol=0.0, reason="test")
    result = compare(torch.tensor([1.01, 1000.5]), torch.tensor([1.0, 1000.0]), tolerance)
    assert result.mismatched == 1 and result.worst_index == (0,)
    assert result.abs_error == pytest.approx(0.5)  # still the greatest over all, as torch.testing reports it
    assert "Greatest absolute difference: 0.5 at index (1,)" in result.message


def test_compare_judges_infinities_and_nan_as_torch_isclose_does() -> None:
    # sqrt'(0) is +inf: an expected infinity matches the same infinity only, never a finite number or the other sign.
    tolerance = checks.default_tolerance("float64")
    inf, nan = float("inf"), float("nan")
    same = compare(torch.tensor([inf, 0.25]), torch.tensor([inf, 0.25]), tolerance)
    assert same.passed and same.abs_error == 0 and same.rel_error == 0
    for observed, expected in ((1e300, inf), (-inf, inf), (inf, 1.0), (nan, nan), (nan, inf)):
        result = compare(torch.tensor([observed], dtype=torch.float64), torch.tensor([expected]), tolerance)
        assert not result.passed and result.mismatched == 1, (observed, expected)
        assert result.abs_error == inf and result.rel_error == inf, (observed, expected)
    observed = torch.tensor([inf, -inf, nan, 2.0, 1e300], dtype=torch.float64)
    expected = torch.tensor([inf, -inf, nan, 2.0, inf], dtype=torch.float64)
    beyond = beyond_allowance(observed, expected, tolerance.allowed(expected))
    assert torch.equal(beyond, ~torch.isclose(observed, expected, tolerance.rtol, tolerance.atol))


def test_tolerance_change_keeps_old_new_and_why() -> None:
    base = checks.default_tolerance("float32")
    wider = base.changed(rtol=1e-4, reason="float32 forward pass rounds at 1e-7 per op")
    assert (wider.rtol, wider.atol) == (1e-4, base.atol)
    (change,) = wider.history
    assert (change.old_rtol, change.rtol, change.reason) == (base.rtol, 1e-4, wider.reason)
    assert checks.Tolerance.from_dict(wider.to_dict()) == wider


