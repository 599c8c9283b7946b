"""Executing a plan: one fresh leaf and forward per check, observed on its device, compared, recorded."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..core.compare import compare
from ..core.dtypes import to_dtype
from ..core.errors import CheckInputError
from ..core.numerical import estimate_gradient
from ..core.tolerances import NUMERICAL_SAFETY, Tolerance, estimate_tolerance
from .environment import device_name, environment
from .observe import observe
from .planning import PlannedCheck
from .records import Record, collect


def execute(check: PlannedCheck) -> Record:
    """Run one planned check and return its executed record (a failed check is a record, not an error)."""
    if not isinstance(check, PlannedCheck):
        raise CheckInputError(f"execute() runs a PlannedCheck (one item of checks.plan(...)), got "
                              f"{type(check).__name__}")
    torch.manual_seed(check.seed)
    x = check.x.to(device=check.device, dtype=to_dtype(check.dtype))
    if check.how == "numerical":
        return _execute_numerical(check, x)
    observed = observe(check.expectation.f, x, check.how)
    return _executed(check, check.record(), observed, check.tolerance)


def _execute_numerical(check: PlannedCheck, x: torch.Tensor) -> Record:
    """A finite-difference estimate in place of autograd, with its method, steps and evaluations."""
    method = check.method or "central"
    estimate = estimate_gradient(check.expectation.f, x, method, check.step, levels=check.levels)
    tolerance = estimate_tolerance(estimate) if check.adaptive else check.tolerance
    summary = estimate.summary()
    record = replace(check.record(), step=summary["step"], evaluations=summary["evaluations"],
                     error_estimate=summary["error_estimate"], tolerance=tolerance.to_dict())
    return _executed(check, record, estimate.values, tolerance)


def _executed(check: PlannedCheck, record: Record, observed: torch.Tensor, tolerance: Tolerance) -> Record:
    comparison = compare(observed, check.expected, tolerance)
    cannot = undiscriminating(check.expected, observed, tolerance) if check.how == "numerical" else ""
    if cannot:
        comparison = replace(comparison, passed=False, message=f"{cannot}\n{comparison.message}")
    return collect(replace(
        record,
        observed_gradient=observed.cpu().to(torch.float64).tolist(),
        executed=True,
        abs_error=comparison.abs_error,
        rel_error=comparison.rel_error,
        worst_index=list(comparison.worst_index),
        mismatched=comparison.mismatched,
        detectable_relative_error=comparison.detectable_relative_error,
        detectable_index=None if comparison.detectable_index is None else list(comparison.detectable_index),
        verdict="pass" if comparison.passed else "fail",
        message=comparison.message,
        device_name=device_name(check.device),
        environment=environment(check.seed),
    ))


def undiscriminating(expected: torch.Tensor, observed: torch.Tensor, tolerance: Tolerance) -> str:
    """Why a numerical check cannot fail, or "" when it can.

    plan() refuses a tolerance known in advance that covers every non-zero expected element; Richardson's
    own error estimate is known only once the estimate has run, so that test is repeated here. And where
    the expected gradient is 0 but the estimate lies beyond its own error (a tenth of the allowance, which
    is NUMERICAL_SAFETY times that error) and still within the allowance, a wrong zero would pass (a
    bfloat16 Richardson estimate of 0.52 against an expected 0). Either is recorded as a failure.
    """
    size = expected.abs().reshape(-1)
    estimate = observed.detach().cpu().to(torch.float64).abs().reshape(-1)
    allowed = tolerance.allowed(expected).reshape(-1)
    judged = size != 0
    if judged.any() and bool((allowed[judged] >= size[judged]).all()):
        index = int(size.argmax())
        return (f"Cannot discriminate: the allowance {float(allowed[index]):.3g} is at least the expected gradient "
                f"{float(size[index]):.3g} (flat index {index}); a zero gradient would pass too, so this is "
                f"recorded as a failure")
    hidden = ~judged & (estimate > allowed / NUMERICAL_SAFETY) & (estimate <= allowed)
    if hidden.any():
        index = int(torch.where(hidden, estimate, torch.zeros_like(estimate)).argmax())
        return (f"Cannot discriminate: the expected gradient is 0 at flat index {index}, the estimate "
                f"{float(estimate[index]):.3g} lies beyond its own error, yet the allowance "
                f"{float(allowed[index]):.3g} accepts it; a wrong zero would pass, so this is recorded as a failure")
    return ""
