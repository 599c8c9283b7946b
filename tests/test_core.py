"""Unit tests of the checks core: expectations, observing autograd, comparison, records, devices."""

from __future__ import annotations

import json
import re

import pytest
import torch

import checks
from checks.core.compare import beyond_allowance, compare
from checks.teaching.observe import observe_returned, observe_stored

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule")
VECTOR_SUM = checks.Expectation("x.sum()", lambda x: x.sum(), "ones_like(x)", torch.ones_like, "sum rule")


def test_plan_shows_the_analytical_value_and_nothing_observed() -> None:
    (record,) = checks.plan(SQUARE, 3, devices="cpu").records()
    data = record.to_dict()
    assert data["function"] == "x*x" and data["x"] == 3 and data["analytical_gradient"] == 6
    assert data["observed_gradient"] is None and data["executed"] is False and data["verdict"] is None


def test_run_observes_stored_and_returned_on_each_dtype() -> None:
    results = checks.plan(SQUARE, 3, how=("stored", "returned"), dtypes=("float32", "float64"), devices="cpu").run()
    assert len(results) == 4
    for record in results:
        assert record.executed and record.observed_gradient == 6 and record.verdict == "pass"
        assert record.input_shape == [] and record.device == "cpu" and record.device_name
    assert {(r.how, r.dtype) for r in results} == {(h, d) for h in ("stored", "returned") for d in ("float32", "float64")}


def test_vector_sum_gradient_keeps_the_input_shape() -> None:
    (record,) = checks.plan(VECTOR_SUM, [1.0, 2.0, 3.0], devices="cpu").run()
    assert record.input_shape == [3] and record.observed_gradient == [1.0, 1.0, 1.0] and record.passed


def test_python_floats_are_read_in_float64_not_the_default_dtype() -> None:
    square_sum = checks.Expectation("(x*x).sum()", lambda x: (x * x).sum(), "2*x", lambda x: 2 * x, "power rule")
    (record,) = checks.plan(square_sum, [0.7, 0.1], dtypes="float64", devices="cpu").run()
    assert record.x == [0.7, 0.1] and record.analytical_gradient == [1.4, 0.2]
    assert record.observed_gradient == [1.4, 0.2] and record.passed


def test_a_wrong_expectation_is_a_failed_record_with_the_discrepancy() -> None:
    wrong = checks.Expectation("x*x", lambda x: x * x, "x", lambda x: x, "a deliberate mistake")
    (record,) = checks.plan(wrong, 3, devices="cpu").run()
    assert record.verdict == "fail" and record.abs_error == 3 and record.rel_error == 1
    assert "Greatest absolute difference: 3" in record.message and "allowed" in record.message


def test_record_json_round_trip() -> None:
    (record,) = checks.plan(SQUARE, 3, devices="cpu").run()
    again = checks.Record.from_json(record.to_json())
    assert again == record
    assert checks.load_records(checks.dump_records([record])) == [record]
    assert json.loads(record.to_json())["tolerance"]["reason"].startswith("torch.testing.assert_close default")


def test_record_ids_are_stable_and_distinct() -> None:
    first = checks.plan(SQUARE, 3, how=("stored", "returned"), devices="cpu").records()
    second = checks.plan(SQUARE, 3, how=("stored", "returned"), devices="cpu").records()
    assert [r.id for r in first] == [r.id for r in second]
    assert len({r.id for r in first}) == 2


def test_observers_store_and_return() -> None:
    x = torch.tensor(3.0, dtype=torch.float64)
    assert observe_stored(SQUARE.f, x).item() == 6
    assert observe_returned(SQUARE.f, x).item() == 6


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: observe_stored(lambda x: x * 2, torch.ones(3, dtype=torch.float64)), checks.NonScalarOutputError, "shape (3,)"),
        (lambda: observe_stored(SQUARE.f, torch.tensor(3)), checks.DtypeError, "int64"),
        (lambda: checks.plan(SQUARE, 3, dtypes="int32"), checks.DtypeError, "int32"),
        (lambda: checks.plan(SQUARE, float("nan")), checks.NaNInputError, "NaN"),
        (lambda: checks.plan(VECTOR_SUM.__class__("x.sum()", VECTOR_SUM.f, "1", lambda x: torch.tensor(1.0), "oops"),
                             [1.0, 2.0]), checks.ShapeMismatchError, "shape ()"),
        (lambda: checks.plan(SQUARE, 3, devices="cuda:7" if torch.cuda.is_available() else "cuda"),
         checks.DeviceUnavailableError, "does not have"),
        (lambda: checks.plan(SQUARE, 3, tolerance=(1e-3, 1e-3)), checks.ToleranceChangeError, "reason"),
        (lambda: checks.default_tolerance("float32").changed(rtol=1e-3, reason=" "), checks.ToleranceChangeError, "reason"),
        (lambda: checks.plan(SQUARE, "three"), checks.CheckInputError, "three"),
    ],
)
def test_bad_input_gets_an_error_that_names_the_problem(call, error, words) -> None:
    with pytest.raises(error, match=re.escape(words)):
        call()


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


def test_devices_follow_the_machine_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHECKS_DEVICES", raising=False)
    detected = checks.detected_devices()
    assert detected[0] == "cpu" and ("cuda" in detected) == torch.cuda.is_available()
    assert checks.available_devices() == detected
    monkeypatch.setenv("CHECKS_DEVICES", "cpu")
    assert checks.available_devices() == ["cpu"]
    assert {record.device for record in checks.plan(SQUARE, 3).records()} == {"cpu"}
    monkeypatch.setenv("CHECKS_DEVICES", "tpu")
    with pytest.raises(checks.DeviceUnavailableError, match="tpu"):
        checks.available_devices()
