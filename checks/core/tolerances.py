"""Tolerances: each one carries the reason it was chosen, and every change keeps old -> new and why.

Defaults for comparing autograd with the analytical gradient are torch.testing.assert_close's per-dtype
defaults, so a check here means what it means there. A numerical estimate gets a tolerance derived from
machine epsilon, its step and the size of f (numerical_tolerance), or from its own error estimate
(estimate_tolerance); each reason states the formula and the numbers that went into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .dtypes import dtype_name, to_dtype
from .errors import CheckInputError, DtypeError, ToleranceChangeError
from .numerical import Estimate, default_step, machine_epsilon
from .validate import integer, number

# torch.testing.assert_close defaults (torch/testing/_comparison.py, _DTYPE_PRECISIONS); float64 is also
# its fallback for dtypes it does not list.
ASSERT_CLOSE_DEFAULTS: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


@dataclass(frozen=True)
class ToleranceChange:
    """One change of a tolerance: what it was, what it became, and the written reason."""

    old_rtol: float
    old_atol: float
    rtol: float
    atol: float
    reason: str


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference |observed - expected| <= atol + rtol * |expected|, elementwise, with its reason."""

    rtol: float
    atol: float
    reason: str
    history: tuple[ToleranceChange, ...] = field(default=())

    def __post_init__(self) -> None:
        _require_reason(self.reason, "a tolerance")
        for name in ("rtol", "atol"):
            number(getattr(self, name), name, minimum=0, error=ToleranceChangeError)
        if self.rtol >= 1:
            raise ToleranceChangeError(
                f"rtol={self.rtol!r} allows a difference as large as the expected value itself: a zero (or "
                f"sign-flipped) gradient would pass, so the check cannot fail; use rtol < 1"
            )

    def changed(self, *, reason: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
        """A new tolerance with rtol and/or atol changed; refused without a written reason."""
        _require_reason(reason, "changing a tolerance")
        if rtol is None and atol is None:
            raise ToleranceChangeError("changed() needs rtol or atol: a change that changes nothing is not recorded")
        new_rtol = self.rtol if rtol is None else number(rtol, "rtol", minimum=0, error=ToleranceChangeError)
        new_atol = self.atol if atol is None else number(atol, "atol", minimum=0, error=ToleranceChangeError)
        change = ToleranceChange(self.rtol, self.atol, new_rtol, new_atol, reason.strip())
        return replace(self, rtol=new_rtol, atol=new_atol, reason=reason.strip(), history=(*self.history, change))

    def to_dict(self) -> dict:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "reason": self.reason,
            "history": [vars(change).copy() for change in self.history],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Tolerance:
        if not isinstance(data, dict):
            raise ToleranceChangeError(f"a tolerance is read from a dictionary, got {type(data).__name__}")
        missing = [key for key in ("rtol", "atol", "reason") if key not in data]
        if missing:
            raise ToleranceChangeError(f"a tolerance needs {', '.join(missing)}; the dictionary lacks them")
        history = tuple(ToleranceChange(**change) for change in data.get("history", ()))
        return cls(rtol=data["rtol"], atol=data["atol"], reason=data["reason"], history=history)


def default_tolerance(dtype: str | torch.dtype) -> Tolerance:
    """torch.testing.assert_close's default for this dtype, with that provenance as the reason."""
    name = dtype_name(to_dtype(dtype))
    if name not in ASSERT_CLOSE_DEFAULTS:
        raise DtypeError(f"torch.testing.assert_close has no default tolerance for {name}; use one of "
                         f"{', '.join(ASSERT_CLOSE_DEFAULTS)}")
    rtol, atol = ASSERT_CLOSE_DEFAULTS[name]
    return Tolerance(rtol=rtol, atol=atol, reason=f"torch.testing.assert_close default for {name}")


def tolerance_argument(tolerance: object, dtype: str) -> Tolerance:
    """A tolerance argument: None for the dtype's default, or a Tolerance; anything else has no reason."""
    if tolerance is None:
        return default_tolerance(dtype)
    if not isinstance(tolerance, Tolerance):
        raise ToleranceChangeError(
            f"tolerance={tolerance!r} has no written reason; pass a Tolerance, e.g. "
            f"default_tolerance({dtype!r}).changed(rtol=..., reason='why this is right')"
        )
    return tolerance


def _require_reason(reason: object, what: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ToleranceChangeError(f"{what} needs a written reason (reason='...'); none was given")


# Numerical estimates are compared with a tolerance derived from how they were made, not with
# assert_close's defaults (which assume two exact computations differing only in the last digits: a forward
# difference in float32 misses by ~√ε ≈ 3e-4 and would always fail them).
NUMERICAL_SAFETY = 10.0


def numerical_tolerance(
    dtype: str | torch.dtype,
    method: str,
    *,
    step: float | None = None,
    f_scale: float = 1.0,
    gradient_scale: float = 1.0,
    derivative_scale: float = 1.0,
    levels: int = 3,
    safety: float = NUMERICAL_SAFETY,
) -> Tolerance:
    """The tolerance a finite-difference estimate deserves, derived from ε, the step and the size of f.

    step             -- the absolute step h the estimate used (default: the method's default step,
                        numerical.default_step, as for |x| <= 1; for Richardson, its finest step)
    f_scale          -- |f(x)|: rounding each evaluation costs about ε·|f|, divided by h in the quotient
    gradient_scale   -- |f'(x)|: the complex step rounds relative to the derivative itself
    derivative_scale -- the size of the derivative that sets the truncation error (f'' for forward,
                        f''' for central and complex step, f^(2·levels+1) for Richardson); 1 when unknown
    levels           -- Richardson only: the tableau's levels; its finest default step is h0 / 2^(levels-1)
    safety           -- the factor between the leading-order error and the allowance

    atol = safety · (rounding + truncation); rtol = 2ε covers the estimate being rounded to dtype.
    """
    resolved = to_dtype(dtype)
    rule = default_step(method, resolved, levels)  # also refuses an unknown method
    eps = machine_epsilon(resolved)
    for name, value in (("f_scale", f_scale), ("gradient_scale", gradient_scale),
                        ("derivative_scale", derivative_scale)):
        number(value, name, minimum=0, error=ToleranceChangeError)
    number(safety, "safety", minimum=1, error=ToleranceChangeError)
    integer(levels, "levels", minimum=1)
    finest = rule.h0 / 2 ** (levels - 1) if method == "richardson" else rule.h0
    h = finest if step is None else number(step, "step", above=0, error=ToleranceChangeError)
    rounding, truncation, formula = {
        "forward": (eps * f_scale / h, h * derivative_scale / 2, "ε|f|/h + h|f''|/2"),
        "central": (eps * f_scale / h, h**2 * derivative_scale / 6, "ε|f|/h + h²|f'''|/6"),
        # No subtraction in the complex step: rounding is relative to the derivative, not to f/h.
        "complex": (eps * gradient_scale, h**2 * derivative_scale / 6, "ε|f'| + h²|f'''|/6"),
        # levels central differences remove h², ..., h^(2·levels-2): what is left is of order h^(2·levels).
        "richardson": (eps * f_scale / h, h ** (2 * levels) * derivative_scale,
                       f"ε|f|/h + h^{2 * levels}·|f^({2 * levels + 1})|"),
    }[method]
    atol = safety * (rounding + truncation)
    name = dtype_name(resolved)
    reason = (
        f"derived for {method} differences in {name}: atol = {safety:g}·({formula}) = {atol:.3g} with "
        f"ε = {eps:.3g}, h = {h:.3g}, |f| = {f_scale:.3g}, |f'| = {gradient_scale:.3g}, derivative scale "
        f"{derivative_scale:.3g}; rtol = 2ε for rounding the estimate to {name}"
    )
    return Tolerance(rtol=2 * eps, atol=atol, reason=reason)


def estimate_tolerance(estimate: Estimate, *, safety: float = NUMERICAL_SAFETY) -> Tolerance:
    """The tolerance an estimate's own error estimate supports (Richardson): safety · max error + ε.

    This is Option B of the decision guide: the allowance comes from the telemetry of this estimate, so
    it is only as trustworthy as that error estimate, and the record shows both.
    """
    if not isinstance(estimate, Estimate):
        raise CheckInputError(f"estimate_tolerance needs an Estimate (from estimate_gradient), got "
                              f"{type(estimate).__name__}")
    number(safety, "safety", minimum=1, error=ToleranceChangeError)
    if estimate.error is None:
        raise ToleranceChangeError(
            f"a {estimate.method} estimate reports no error estimate; derive its tolerance with "
            f"numerical_tolerance(dtype, {estimate.method!r}, step=..., f_scale=...) instead"
        )
    eps = machine_epsilon(to_dtype(estimate.dtype))
    largest = float(estimate.error.max()) if estimate.error.numel() else 0.0
    atol = safety * largest + eps
    return Tolerance(
        rtol=2 * eps,
        atol=atol,
        reason=(
            f"from the estimate's own error estimate: atol = {safety:g}·{largest:.3g} + ε = {atol:.3g} "
            f"({estimate.method}, {estimate.evaluations} evaluations, {estimate.dtype}); rtol = 2ε"
        ),
    )
