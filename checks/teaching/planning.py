"""Checks written down before anything runs: expectation, input, device, dtype, way of observing, tolerance.

A PlannedCheck holds the analytical gradient with observed = none and executed = false; checks.teaching.plan
shows them as a Plan and runs them (checks.teaching.execute observes f itself, checks.teaching.witness runs
the reader's code).

Each dtype's row holds the input rounded to that dtype, and its expected gradient is the analytical
derivative at that rounded input: a float32 row then measures autograd's error, not the input's rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

import torch

from ..core.compare import detectable
from ..core.devices import resolve_devices
from ..core.dtypes import dtype_name, real_dtype, to_dtype
from ..core.errors import CheckInputError, DtypeError, ToleranceChangeError
from ..core.numerical import COMPLEX_OF, MAX_LEVELS, METHODS, Method, default_step, representable_step
from ..core.tolerances import Tolerance, default_tolerance, element_numerical_tolerance
from ..core.validate import choices, flag, integer, number, text
from .expectations import Expectation, reference_input
from .records import Provenance, Record
from .source import source_code

# Ways a plan can observe a gradient: every provenance, for the reader's code (Plan.run(code)); checks
# observes OWN_HOWS by itself (Plan.run()).
PLAN_HOWS: tuple[Provenance, ...] = get_args(Provenance)
OWN_HOWS: tuple[Provenance, ...] = ("stored", "returned", "numerical")
# tolerance=ADAPTIVE: a numerical check's allowance comes from its estimate's own error estimate (Richardson).
ADAPTIVE = "estimate"


@dataclass(frozen=True)
class PlannedCheck:
    """One check on one device, dtype and way of observing, not yet executed."""

    label: str
    expectation: Expectation
    x: torch.Tensor
    expected: torch.Tensor
    how: Provenance
    dtype: str
    device: str
    tolerance: Tolerance
    expected_failure: bool
    seed: int
    # Numerical checks only: the estimator, its relative step (None: the method's default), Richardson's
    # levels, and whether the tolerance is taken from the estimate's error estimate when it runs.
    method: Method | None = None
    step: float | None = None
    levels: int = 3
    adaptive: bool = False
    # Why a weak allowance is acceptable for this check, as declared (weak=...); "" when undeclared.
    weak_reason: str = ""

    def summary(self):
        """The plan's record in its documented keys, as JSON: observed_gradient null, executed false."""
        return self.record().summary()

    def record(self) -> Record:
        # What the allowance can catch is known before running, except where the run sets the allowance.
        caught = None if self.adaptive else detectable(self.expected, self.tolerance)
        return Record(
            check=self.label,
            function=self.expectation.function,
            x=self.x.tolist(),
            input_shape=list(self.x.shape),
            dtype=self.dtype,
            device=self.device,
            how=self.how,
            gradient_formula=self.expectation.gradient,
            derivative_source=self.expectation.source,
            analytical_gradient=self.expected.tolist(),
            tolerance=self.tolerance.to_dict(),
            expected_failure=self.expected_failure,
            code=source_code(self.expectation),
            method=self.method or "",
            detectable_relative_error=caught and caught.relative_error,
            detectable_index=list(caught.index) if caught and caught.index is not None else None,
            weak_reason=self.weak_reason,
        )


def planned_checks(
    expectation: Expectation,
    x: object,
    *,
    how: Provenance | Sequence[Provenance] = "stored",
    dtypes: str | Sequence[str] = ("float64",),
    devices: str | Sequence[str] | None = None,
    tolerance: Tolerance | Mapping[str, Tolerance] | str | None = None,
    label: str | None = None,
    expected_failure: bool = False,
    seed: int = 0,
    method: Method | Sequence[Method] = "central",
    step: float | None = None,
    levels: int = 3,
    weak: str | Mapping[str, str] | None = None,
) -> tuple[PlannedCheck, ...]:
    """The checks of expectation at x on each device (all available by default) and dtype, as planned.

    tolerance -- None for the default (torch.testing's per-dtype default for autograd; for a numerical
    estimate, one derived for each element from ε, its step and |f|: element_numerical_tolerance), a Tolerance for
    every dtype, or one per dtype name; any other tolerance must carry its written reason (see
    Tolerance.changed). "estimate" takes a numerical check's tolerance from its own error estimate
    (Richardson only), so it is known only once the check has run.
    how="numerical" plans one finite-difference estimate per method (forward, central, complex,
    richardson), with relative step step (None: numerical.default_step) and Richardson's levels.
    weak -- why a coarse allowance is acceptable here, for a check shown weak on purpose (see weak_reasons).
    """
    if not isinstance(expectation, Expectation):
        raise CheckInputError("plan() needs an Expectation written first (checks.Expectation(...))")
    hows = choices(how, "how", PLAN_HOWS)
    methods = choices(method, "method", METHODS)
    flag(expected_failure, "expected_failure")
    integer(seed, "seed")
    if label is not None:
        text(label, "label")
    if step is not None:
        number(step, "step (a relative step h0)", above=0)
    if "numerical" in hows and "richardson" in methods:
        integer(levels, "levels", minimum=2, maximum=MAX_LEVELS)
    adaptive = tolerance == ADAPTIVE
    if adaptive and ("numerical" not in hows or set(methods) != {"richardson"}):
        raise ToleranceChangeError(
            'tolerance="estimate" needs how="numerical" with method="richardson": only Richardson '
            "reports an error estimate to take the tolerance from"
        )
    names = planned_dtypes(dtypes, tolerance)
    reasons = weak_reasons(weak, names)
    reference = reference_input(x)
    label = label or f"{expectation.function} at x={_short(reference)}"
    # The input each dtype really holds, and the derivative there (computed in float64).
    rounded = {name: reference.to(to_dtype(name)).to(torch.float64) for name in names}
    expected_at = {name: expectation.analytical(rounded[name]) for name in names}
    checks = []
    for device in resolve_devices(devices):
        for name in names:
            point, expected = rounded[name], expected_at[name]
            for item in hows:
                if item != "numerical":
                    chosen = None if adaptive else tolerance
                    checks.append(PlannedCheck(label, expectation, point, expected, item, name, device,
                                               tolerance_for(chosen, name), expected_failure, seed,
                                               weak_reason=reasons[name]))
                    continue
                for estimator in methods:
                    if estimator == "complex" and to_dtype(name) not in COMPLEX_OF:
                        raise DtypeError(
                            f"the complex step cannot run in {name}: torch.complex32 (for float16) exists but "
                            f"few ops support it, and there is no complex bfloat16; plan method='complex' for "
                            f"float32 or float64 only"
                        )
                    allowed = (_adaptive_placeholder(name) if adaptive else
                               tolerance_for(tolerance, name, lambda: _numerical_default(
                                   expectation, point, expected, name, estimator, step, levels)))
                    checks.append(PlannedCheck(label, expectation, point, expected, item, name, device,
                                               allowed, expected_failure, seed, estimator, step, levels,
                                               adaptive, reasons[name]))
    for check in checks:
        if not check.adaptive:
            _require_discrimination(check)
    return tuple(checks)


def planned_dtypes(dtypes: object, tolerance: object) -> list[str]:
    """The dtypes a plan (or a script) runs in, by name: at least one, each real, none twice; a per-dtype
    tolerance may name only these."""
    names = [dtype_name(real_dtype(d)) for d in choices(dtypes, "dtypes")]
    choices(names, "dtypes")  # "float64" and torch.float64 are the same dtype twice
    if isinstance(tolerance, Mapping):
        _require_tolerance_keys(tolerance, names)
    return names


def weak_reasons(weak: object, names: list[str]) -> dict[str, str]:
    """weak= as the declared reason for each planned dtype ("" where none is declared).

    A check is weak when it passes although its allowance would also pass a gradient more than 1 % wrong
    (checks.teaching.records.WEAK_ABOVE); a chapter that shows one on purpose says why that is acceptable
    there: weak="why", for every dtype, or {"float32": "why"} for the dtypes it concerns. The page shows the
    reason beside the check, and python -m checks lists it instead of reporting a problem.
    """
    if weak is None:
        return dict.fromkeys(names, "")
    if isinstance(weak, str):
        return dict.fromkeys(names, text(weak, "weak (why a coarse allowance is acceptable here)").strip())
    if not isinstance(weak, Mapping):
        raise CheckInputError(f"weak={weak!r}: write why a coarse allowance is acceptable here, as text "
                              f"(weak=\"...\") or per dtype (weak={{'float32': '...'}})")
    reasons = dict.fromkeys(names, "")
    for key, reason in weak.items():
        try:
            name = dtype_name(to_dtype(key))  # type: ignore[arg-type]
        except DtypeError:
            raise CheckInputError(f"weak has an entry for {key!r}, which is not a dtype; the checks planned are "
                                  f"in {', '.join(names)}") from None
        if name not in names:
            raise CheckInputError(f"weak has an entry for {name}, but no {name} check is planned "
                                  f"(dtypes: {', '.join(names)})")
        reasons[name] = text(reason, f"weak[{name!r}] (why a coarse allowance is acceptable here)").strip()
    return reasons


def _require_tolerance_keys(tolerance: Mapping[object, object], names: list[str]) -> None:
    """Every key of a per-dtype tolerance names a dtype that is planned: a misspelt one is not ignored."""
    for key in tolerance:
        try:
            name = dtype_name(to_dtype(key))  # type: ignore[arg-type]
        except DtypeError:
            raise ToleranceChangeError(f"tolerance has an entry for {key!r}, which is not a dtype; the checks "
                                       f"planned are in {', '.join(names)}") from None
        if name not in names:
            raise ToleranceChangeError(f"tolerance has an entry for {name}, but no {name} check is planned "
                                       f"(dtypes: {', '.join(names)}); a tolerance that is never used is a slip")


def _require_discrimination(check: PlannedCheck) -> None:
    """Refuse a tolerance that would accept a zero gradient wherever the expected one is not zero.

    Such an allowance is at least as large as the quantity it judges: a missing or sign-flipped gradient
    would pass (a numerical step of 10, forward differences in bfloat16), so the check cannot fail.
    """
    expected = check.expected.abs().reshape(-1)
    allowed = check.tolerance.allowed(check.expected).reshape(-1)
    nonzero = expected != 0
    if nonzero.any() and bool((allowed[nonzero] >= expected[nonzero]).all()):
        index = int(expected.argmax())
        raise CheckInputError(
            f"the check {check.label!r} ({check.how}{' ' + check.method if check.method else ''}, {check.dtype}) "
            f"cannot discriminate: it allows {float(allowed[index]):.3g} where the expected gradient is "
            f"{float(expected[index]):.3g}, so a zero or sign-flipped gradient would pass. "
            f"Tolerance: {check.tolerance.reason}. Use a smaller step, another method or a finer dtype"
        )


def _numerical_default(
    expectation: Expectation, reference: torch.Tensor, expected: torch.Tensor, dtype: str,
    method: Method, step: float | None, levels: int,
) -> Tolerance:
    """element_numerical_tolerance: each element's allowance from its own step and derivative scale.

    |f| is f at x in float64 (a value, not a gradient: nothing is checked by computing it), one number for
    every element. The scale of the higher derivative that sets an element's truncation error is unknown,
    so it is taken as max(1, |∂f/∂x_i|): that element's own expected derivative, or 1.
    One allowance sized by the largest element would let an element with a small derivative pass a
    gradient many percent wrong.
    """
    resolved = to_dtype(dtype)
    with torch.no_grad():
        f_scale = float(torch.as_tensor(expectation.f(reference.clone())).abs().max())
    h0 = default_step(method, resolved, levels).h0 if step is None else step
    finest = h0 / 2 ** (levels - 1) if method == "richardson" else h0
    if method == "complex":
        steps = finest * torch.clamp(reference.abs(), min=1.0)
    else:
        steps = representable_step(reference.to(resolved), finest).to(torch.float64)
    gradient = expected.abs().to(torch.float64)
    return element_numerical_tolerance(resolved, method, steps=steps, f_scale=f_scale, gradient_scales=gradient,
                                       derivative_scales=torch.clamp(gradient, min=1.0), levels=levels)


def _adaptive_placeholder(dtype: str) -> Tolerance:
    # Replaced when the check runs (execute), by estimate_tolerance of the estimate it made.
    return Tolerance(rtol=0.0, atol=0.0, reason=f"from the estimate's own error estimate ({dtype}), set when run")


def tolerance_for(
    tolerance: Tolerance | Mapping[str, Tolerance] | str | None,
    dtype: str,
    default: Callable[[], Tolerance] | None = None,
) -> Tolerance:
    fallback = default or (lambda: default_tolerance(dtype))
    if tolerance is None:
        return fallback()
    if isinstance(tolerance, Mapping):
        chosen = tolerance.get(dtype)
        return fallback() if chosen is None else tolerance_for(chosen, dtype, default)
    if not isinstance(tolerance, Tolerance):
        raise ToleranceChangeError(
            f"tolerance={tolerance!r} has no written reason; pass a Tolerance, e.g. "
            f"default_tolerance({dtype!r}).changed(rtol=..., reason='why this is right')"
        )
    return tolerance


def _short(x: torch.Tensor) -> str:
    values = x.tolist()
    text = f"{values:g}" if isinstance(values, float) else str(values)
    return text if len(text) <= 30 else f"tensor of shape {tuple(x.shape)}"


