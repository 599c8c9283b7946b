"""Numerical estimates as checks: derived tolerances with their provenance, records, and refusals."""

from __future__ import annotations

import pytest
import torch

import checks
from checks.core.tolerances import estimate_tolerance, numerical_tolerance
from checks.teaching.display import COLUMNS, NUMERICAL_COLUMNS, records_html

SIN_X = checks.Expectation(
    "sin(x)*x", lambda x: torch.sin(x) * x, "cos(x)*x + sin(x)", lambda x: torch.cos(x) * x + torch.sin(x),
    "product rule",
)
METHODS = ("forward", "central", "complex", "richardson")


def test_numerical_records_carry_method_step_evaluations_and_a_derived_tolerance() -> None:
    results = checks.plan(SIN_X, 1.3, how="numerical", method=METHODS, dtypes=("float32", "float64"),
                          devices="cpu").run()
    assert len(results) == 8 and results.passed
    for record in results:
        assert record.how == "numerical" and record.method in METHODS and record.executed
        assert record.evaluations == {"forward": 2, "central": 2, "complex": 1, "richardson": 6}[record.method]
        assert record.tolerance["reason"].startswith(f"derived for {record.method} differences in {record.dtype}")
        assert (record.error_estimate is None) == (record.method != "richardson")
        again = checks.Record.from_json(record.to_json())
        assert again == record
    assert len({record.id for record in results}) == 8


def test_autograd_rows_keep_assert_close_defaults_beside_numerical_rows() -> None:
    results = checks.plan(SIN_X, 1.3, how=("stored", "numerical"), devices="cpu").run()
    stored = results.one(how="stored")
    assert stored.method == "" and stored.step is None
    assert stored.tolerance["reason"] == "torch.testing.assert_close default for float64"


def test_a_wrong_expectation_fails_the_numerical_check_too() -> None:
    wrong = checks.Expectation("sin(x)*x", SIN_X.f, "cos(x)*x", lambda x: torch.cos(x) * x, "forgot a term")
    (record,) = checks.plan(wrong, 1.3, how="numerical", devices="cpu").run()
    assert record.verdict == "fail" and record.abs_error > 0.9


def test_the_adaptive_tolerance_comes_from_the_estimate() -> None:
    (record,) = checks.plan(SIN_X, 1.3, how="numerical", method="richardson", tolerance="estimate",
                            devices="cpu").run()
    assert record.tolerance["reason"].startswith("from the estimate's own error estimate")
    assert record.tolerance["atol"] >= 10 * record.error_estimate and record.passed
    with pytest.raises(checks.ToleranceChangeError, match="richardson"):
        checks.plan(SIN_X, 1.3, how="numerical", method="central", tolerance="estimate", devices="cpu")


def test_derived_tolerances_state_their_provenance_and_scale_with_epsilon() -> None:
    by_dtype = {d: numerical_tolerance(d, "central") for d in ("float16", "bfloat16", "float32", "float64")}
    atols = [by_dtype[d].atol for d in ("float64", "float32", "float16", "bfloat16")]
    assert atols == sorted(atols)  # coarser dtype, larger allowance
    assert all("ε = " in t.reason and "h = " in t.reason and "|f| = " in t.reason for t in by_dtype.values())
    # Twice the size of f doubles the rounding part; at the default step that is most of the allowance.
    assert numerical_tolerance("float32", "central", f_scale=2.0).atol > 1.5 * by_dtype["float32"].atol


def test_a_tolerance_change_without_a_reason_is_refused_and_history_is_kept() -> None:
    derived = numerical_tolerance("float32", "forward")
    for reason in ("", "   ", None):
        with pytest.raises(checks.ToleranceChangeError, match="written reason"):
            derived.changed(rtol=1e-2, reason=reason)  # type: ignore[arg-type]
    looser = derived.changed(atol=1e-2, reason="f is a sum of 100 terms: rounding grows with the count")
    (change,) = looser.history
    assert (change.old_atol, change.atol) == (derived.atol, 1e-2) and change.reason.startswith("f is a sum")
    with pytest.raises(checks.ToleranceChangeError):
        checks.plan(SIN_X, 1.3, how="numerical", tolerance=(1e-3, 1e-3), devices="cpu")  # type: ignore[arg-type]


def test_estimate_tolerance_refuses_estimates_without_an_error_estimate() -> None:
    estimate = checks.estimate_gradient(lambda t: t * t, torch.tensor(2.0, dtype=torch.float64), "central")
    with pytest.raises(checks.ToleranceChangeError, match="no error estimate"):
        estimate_tolerance(estimate)


def test_unknown_method_is_refused_by_plan() -> None:
    with pytest.raises(checks.CheckInputError, match="method"):
        checks.plan(SIN_X, 1.3, how="numerical", method="secant", devices="cpu")  # type: ignore[arg-type]


def test_numerical_columns_show_the_telemetry_and_embed_the_records() -> None:
    results = checks.plan(SIN_X, 1.3, how="numerical", method="richardson", devices="cpu").run()
    text = records_html(list(results), columns=(*COLUMNS, *NUMERICAL_COLUMNS))
    assert "f evaluations" in text and "Richardson-extrapolated central differences" in text
    assert "application/vnd.checks.records+json" in text and '"evaluations": 6' in text


def test_complex_step_in_half_precision_is_refused_when_planned() -> None:
    with pytest.raises(checks.DtypeError, match="float16"):
        checks.plan(SIN_X, 1.3, how="numerical", method="complex", dtypes="float16", devices="cpu")
