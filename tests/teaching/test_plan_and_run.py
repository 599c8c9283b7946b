"""The teaching API's core: expectations, plans and their records, observing autograd, the devices a plan runs on."""

from __future__ import annotations

import json
import re

import pytest
import torch

import checks
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
