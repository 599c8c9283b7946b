"""Tolerances: each one carries the reason it was chosen, and every change keeps old -> new and why.

Defaults for comparing autograd with the analytical gradient are torch.testing.assert_close's per-dtype
defaults, so a check here means what it means there. A numerical estimate gets a tolerance derived from
machine epsilon, its step and the size of f (numerical_tolerance; per element, each from its own step and
derivative scale: element_numerical_tolerance), or from its own error estimate (estimate_tolerance); each
reason states the formula and the numbers that went into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from .dtypes import dtype_name, to_dtype
from .errors import CheckInputError, DtypeError, ShapeMismatchError, ToleranceChangeError
from .indices import unravel
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
    """Allowed difference |observed - expected| <= atol + rtol * |expected|, elementwise, with its reason.

    element_atol -- None: atol applies to every element. Otherwise each element's own atol, one per element
                    of the gradient in row-major order (Tolerance.per_element), and atol is the largest of
                    them: an allowance derived per element where the elements' scales differ.
    """

    rtol: float
    atol: float
    reason: str
    history: tuple[ToleranceChange, ...] = field(default=())
    element_atol: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _require_reason(self.reason, "a tolerance")
        for name in ("rtol", "atol"):
            number(getattr(self, name), name, minimum=0, error=ToleranceChangeError)
        if self.rtol >= 1:
            raise ToleranceChangeError(
                f"rtol={self.rtol!r} allows a difference as large as the expected value itself: a zero (or "
                f"sign-flipped) gradient would pass, so the check cannot fail; use rtol < 1"
            )
        if self.element_atol is not None:
            if not isinstance(self.element_atol, tuple) or not self.element_atol:
                raise ToleranceChangeError("element_atol holds one atol per element, as a non-empty tuple; "
                                           "use Tolerance.per_element(rtol, atols, reason)")
            for value in self.element_atol:
                number(value, "each element's atol", minimum=0, error=ToleranceChangeError)
            if self.atol != max(self.element_atol):
                raise ToleranceChangeError(f"atol={self.atol!r} must be the largest element's atol, "
                                           f"{max(self.element_atol)!r}, when each element has its own")

    @classmethod
    def per_element(cls, rtol: float, atols: Sequence[float] | torch.Tensor, reason: str) -> Tolerance:
        """A tolerance whose atol is each element's own (row-major, one per element of the gradient)."""
        values = atols.reshape(-1).tolist() if isinstance(atols, torch.Tensor) else list(atols)
        if not values:
            raise ToleranceChangeError("a per-element tolerance needs at least one element's atol")
        return cls(rtol=rtol, atol=max(values), reason=reason, element_atol=tuple(float(v) for v in values))

    def allowed(self, expected: torch.Tensor) -> torch.Tensor:
        """The allowance atol + rtol·|expected| of each element of expected, in float64."""
        expected = expected.detach().cpu().to(torch.float64)
        if self.element_atol is None:
            return self.atol + self.rtol * expected.abs()
        if len(self.element_atol) != expected.numel():
            raise ShapeMismatchError(
                f"the tolerance has an atol for each of {len(self.element_atol)} elements, but the gradient it "
                f"judges has {expected.numel()} (shape {tuple(expected.shape)})")
        atol = torch.tensor(self.element_atol, dtype=torch.float64).reshape(expected.shape)
        return atol + self.rtol * expected.abs()

    def atol_words(self) -> str:
        """atol as a reader sees it: one number, or the range of the elements' own."""
        return atol_words(self.atol, self.element_atol)

    def changed(self, *, reason: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
        """A new tolerance with rtol and/or atol changed; refused without a written reason."""
        _require_reason(reason, "changing a tolerance")
        if rtol is None and atol is None:
            raise ToleranceChangeError("changed() needs rtol or atol: a change that changes nothing is not recorded")
        new_rtol = self.rtol if rtol is None else number(rtol, "rtol", minimum=0, error=ToleranceChangeError)
        new_atol = self.atol if atol is None else number(atol, "atol", minimum=0, error=ToleranceChangeError)
        change = ToleranceChange(self.rtol, self.atol, new_rtol, new_atol, reason.strip())
        # A new atol is one for every element: the elements' own are replaced with it.
        element_atol = self.element_atol if atol is None else None
        return replace(self, rtol=new_rtol, atol=new_atol, reason=reason.strip(), history=(*self.history, change),
                       element_atol=element_atol)

    def to_dict(self) -> dict:
        data = {
            "rtol": self.rtol,
            "atol": self.atol,
            "reason": self.reason,
            "history": [vars(change).copy() for change in self.history],
        }
        if self.element_atol is not None:
            data["element_atol"] = list(self.element_atol)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Tolerance:
        if not isinstance(data, dict):
            raise ToleranceChangeError(f"a tolerance is read from a dictionary, got {type(data).__name__}")
        missing = [key for key in ("rtol", "atol", "reason") if key not in data]
        if missing:
            raise ToleranceChangeError(f"a tolerance needs {', '.join(missing)}; the dictionary lacks them")
        history = tuple(ToleranceChange(**change) for change in data.get("history", ()))
        element_atol = data.get("element_atol")
        return cls(rtol=data["rtol"], atol=data["atol"], reason=data["reason"], history=history,
                   element_atol=None if element_atol is None else tuple(element_atol))


def atol_words(atol: float, element_atol: Sequence[float] | None = None) -> str:
    """"1e-05", or "0.0335 to 0.045 per element" where each element has its own atol."""
    if element_atol is None or min(element_atol) == max(element_atol):
        return f"{atol:.3g}"
    return f"{min(element_atol):.3g} to {max(element_atol):.3g} per element"


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
    One atol for every element: element_numerical_tolerance gives each element its own.
    """
    resolved, eps, finest = _numerical_inputs(dtype, method, f_scale, safety, levels)
    for name, value in (("gradient_scale", gradient_scale), ("derivative_scale", derivative_scale)):
        number(value, name, minimum=0, error=ToleranceChangeError)
    h = finest if step is None else number(step, "step", above=0, error=ToleranceChangeError)
    rounding, truncation, formula = _error_model(method, eps, levels, h, f_scale, gradient_scale, derivative_scale)
    atol = safety * (rounding + truncation)
    name = dtype_name(resolved)
    reason = (
        f"derived for {method} differences in {name}: atol = {safety:g}·({formula}) = {atol:.3g} with "
        f"ε = {eps:.3g}, h = {h:.3g}, |f| = {f_scale:.3g}, |f'| = {gradient_scale:.3g}, derivative scale "
        f"{derivative_scale:.3g}; rtol = 2ε for rounding the estimate to {name}"
    )
    return Tolerance(rtol=2 * eps, atol=atol, reason=reason)


def element_numerical_tolerance(
    dtype: str | torch.dtype,
    method: str,
    *,
    steps: torch.Tensor,
    f_scale: float,
    gradient_scales: torch.Tensor,
    derivative_scales: torch.Tensor,
    levels: int = 3,
    safety: float = NUMERICAL_SAFETY,
) -> Tolerance:
    """numerical_tolerance for each element of the gradient: its own step, |f'| and derivative scale.

    steps, gradient_scales, derivative_scales -- one value per element (the gradient's shape): the step
    that element received, its |∂f/∂x_i| and the size of the derivative that sets its truncation error.
    f_scale is |f(x)|, one number: every element's quotient subtracts two values of the same f.

    One allowance from the largest of them would let an element with a small derivative pass a gradient
    many percent wrong (its allowance sized by another element's scale); here each element is held to its
    own. Where every element gets the same atol, this is numerical_tolerance of that element.
    """
    resolved, eps, _ = _numerical_inputs(dtype, method, f_scale, safety, levels)
    h = torch.as_tensor(steps, dtype=torch.float64)
    gradient = torch.as_tensor(gradient_scales, dtype=torch.float64)
    derivative = torch.as_tensor(derivative_scales, dtype=torch.float64)
    if not h.shape == gradient.shape == derivative.shape or h.numel() == 0:
        raise ShapeMismatchError(f"steps {tuple(h.shape)}, gradient_scales {tuple(gradient.shape)} and "
                                 f"derivative_scales {tuple(derivative.shape)} must hold one value per element")
    finite = bool(torch.isfinite(torch.stack([h, gradient, derivative])).all())
    if not (finite and bool((h > 0).all()) and bool((gradient >= 0).all()) and bool((derivative >= 0).all())):
        raise ToleranceChangeError("every step must be finite and positive, every scale finite and non-negative")
    rounding, truncation, formula = _error_model(method, eps, levels, h, f_scale, gradient, derivative)
    atols = safety * (rounding + truncation)
    flat = atols.reshape(-1)
    if bool((flat == flat[0]).all()):
        return numerical_tolerance(resolved, method, step=float(h.reshape(-1)[0]), f_scale=f_scale,
                                   gradient_scale=float(gradient.reshape(-1)[0]),
                                   derivative_scale=float(derivative.reshape(-1)[0]), levels=levels, safety=safety)
    low, high = (list(unravel(int(index), atols.shape)) for index in (flat.argmin(), flat.argmax()))
    name = dtype_name(resolved)
    reason = (
        f"derived per element for {method} differences in {name}: atol = {safety:g}·({formula}) with each "
        f"element's own step h, |f'| and derivative scale, from {float(flat.min()):.3g} at element {low} to "
        f"{float(flat.max()):.3g} at element {high}; ε = {eps:.3g}, |f| = {f_scale:.3g}, h {_range(h)}, "
        f"|f'| {_range(gradient)}, derivative scale {_range(derivative)}; rtol = 2ε for rounding the "
        f"estimate to {name}"
    )
    return Tolerance.per_element(2 * eps, flat, reason)


def _numerical_inputs(dtype: str | torch.dtype, method: str, f_scale: float, safety: float,
                      levels: int) -> tuple[torch.dtype, float, float]:
    """The dtype, its ε and the method's finest default step, with the shared arguments checked."""
    resolved = to_dtype(dtype)
    rule = default_step(method, resolved, levels)  # also refuses an unknown method
    number(f_scale, "f_scale", minimum=0, error=ToleranceChangeError)
    number(safety, "safety", minimum=1, error=ToleranceChangeError)
    integer(levels, "levels", minimum=1)
    finest = rule.h0 / 2 ** (levels - 1) if method == "richardson" else rule.h0
    return resolved, machine_epsilon(resolved), finest


def _error_model(method: str, eps: float, levels: int, h, f_scale: float, gradient, derivative):
    """(rounding, truncation, formula) of a method's leading-order error, for numbers or tensors alike."""
    return {
        "forward": (eps * f_scale / h, h * derivative / 2, "ε|f|/h + h|f''|/2"),
        "central": (eps * f_scale / h, h**2 * derivative / 6, "ε|f|/h + h²|f'''|/6"),
        # No subtraction in the complex step: rounding is relative to the derivative, not to f/h.
        "complex": (eps * gradient, h**2 * derivative / 6, "ε|f'| + h²|f'''|/6"),
        # levels central differences remove h², ..., h^(2·levels-2): what is left is of order h^(2·levels).
        "richardson": (eps * f_scale / h, h ** (2 * levels) * derivative,
                       f"ε|f|/h + h^{2 * levels}·|f^({2 * levels + 1})|"),
    }[method]


def _range(values: torch.Tensor) -> str:
    low, high = float(values.min()), float(values.max())
    return f"= {low:.3g}" if low == high else f"from {low:.3g} to {high:.3g}"


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
