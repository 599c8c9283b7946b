"""Verdict: the one place where each element, and the whole check, gets its outcome.

Three outcomes per element, and for the whole check (a fail anywhere fails it; else an inconclusive
element makes it inconclusive). Every element is first sorted by whether its numbers are finite, because
a NaN compares false with every bound and would otherwise slip through as "not outside the allowance":

- pass: established positively, never by default: autograd and the estimate both finite, autograd within
  a finite allowance, and the allowance small enough to mean something (at most RESOLUTION of the entry's
  scale: the largest |J| in its row and column), at a point with no kink and no instability;
- fail: autograd outside its allowance (an allowance too wide to vouch for a pass can still be exceeded),
  or "non-finite": autograd NaN where the estimate is finite (f is finite at x ± h, so the derivative is a
  number; NaN is never one: 0/0 at a removable singularity, 0·log 0, an overflowing untaken branch of
  torch.where), or ±inf where the estimate converged to a finite value;
- inconclusive: the evidence cannot settle it. The report says why and what would settle it:
  "kink" (f is not differentiable at x, or a kink lies inside the stencil: check at another point),
  "domain" (the estimate is not finite: f is not finite at x ± h for every step tried, x is on the edge of
  f's domain; whatever autograd says, NaN included, there is nothing finite to compare it with),
  "infinite" (autograd ±inf where the estimate does not converge, or is the same infinity: f may have a
  vertical tangent at x; equal infinities are not evidence of a correct gradient, since a difference
  quotient cannot confirm an infinite slope and a bug that overflows gives the same inf),
  "unstable" (a mismatch that the finest window able to resolve it contradicts, or autograd's 0 in an
  output that the noise probe finds flat between jumps: f has structure at the scale of the step, a
  staircase or an oscillation),
  "unconfirmed" (a mismatch no independent window confirms: see below),
  "imprecise" (the estimate's own uncertainty is above RESOLUTION at every step: float64, or another point).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from .errors import CheckInputError
from .outcome import Outcome

if TYPE_CHECKING:
    from .report import CheckReport


def finite(t: torch.Tensor) -> torch.Tensor:
    """Where t is finite, computed in numpy on the same memory (for a large Jacobian a fresh torch tensor
    costs its pages one fault at a time)."""
    return torch.from_numpy(np.isfinite(t.numpy()))


def difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b|, NaN for inf - inf (as in torch), without a warning."""
    with np.errstate(invalid="ignore"):
        d = np.subtract(a.numpy(), b.numpy())
    return torch.from_numpy(np.abs(d, out=d))


def nonfinite(report: CheckReport) -> torch.Tensor:
    """Elements where autograd is wrong by not being finite: NaN where the estimate is finite, or ±inf
    where the estimate converged to a finite value. Caught before any allowance is consulted."""
    autograd, numerical = report._finite
    settled = report.converged & ~report.kink & ~report.unstable
    nan = torch.from_numpy(np.isnan(report.autograd.numpy()))
    return numerical & (nan | (~autograd & ~nan & settled))


def mismatch(report: CheckReport) -> torch.Tensor:
    """Failed elements: non-finite where they must be finite, or outside their allowance away from kinks
    (an allowance too wide to judge a pass can still be exceeded: autograd is then wrong by even more).
    With a tolerance given: outside it for every value the estimate allows (see _against_tolerance)."""
    if report.tolerance is not None:
        return report._against_tolerance[0]
    both = report._finite[0] & report._finite[1]
    outside = both & (report.difference > report.allowed) & ~report.kink & ~report.unstable & ~report.unconfirmed \
        & ~report.unresolved
    return report.nonfinite | outside


def agreed(report: CheckReport) -> torch.Tensor:
    """Passed elements, established positively: both values and the allowance finite, the difference
    within the allowance, the estimate converged (or equal to autograd exactly), no kink, no instability.
    A NaN anywhere makes one of these comparisons false, so it can never pass."""
    if report.tolerance is not None:
        return report._against_tolerance[1]
    both = report._finite[0] & report._finite[1] & finite(report.allowed)
    exact = report.autograd == report.numerical
    return both & (report.difference <= report.allowed) & (report.converged | exact) & ~report.kink & ~report.unstable \
        & ~report.unresolved


def inconclusive(report: CheckReport) -> torch.Tensor:
    """Elements the evidence cannot judge (a kink, f not finite near x, an infinite autograd that the
    estimate cannot confirm, or an unconverged estimate): neither failed nor established."""
    return ~report.mismatch & ~report.agreed


def given_allowed(report: CheckReport) -> torch.Tensor:
    """Per element, what the caller's atol and rtol allow: atol + rtol·|numerical| (as allclose)."""
    if report.tolerance is None:
        raise CheckInputError("no atol or rtol was given to this check: its allowance is the estimate's own "
                              "(`allowed`)")
    return report.tolerance.atol + report.tolerance.rtol * report.numerical.abs()


def _against_tolerance(report: CheckReport) -> tuple[torch.Tensor, torch.Tensor]:
    """(mismatch, agreed) against the caller's tolerance. The true derivative lies within the estimate's
    allowance of it, so autograd's distance from it lies within that allowance of the difference: a pass
    needs difference + allowance inside the tolerance, a fail difference - allowance outside it (and
    confirmed, as without a tolerance); the rest is inconclusive. Exact agreement passes, as without a
    tolerance (an entry of 0 that both find, where f_i does not depend on x_j, would otherwise need an
    atol). A NaN or inf is judged as without a tolerance: it never passes."""
    blind = report.kink | report.domain | report.unstable | report.unresolved
    both = report._finite[0] & report._finite[1]
    given = report.given_allowed
    outside = both & (report.difference > given + report.allowed) & ~blind & ~report.unconfirmed
    inside = (report.difference + report.allowed <= given) | (report.autograd == report.numerical)
    return report.nonfinite | outside, both & inside & ~blind


def outcome(report: CheckReport) -> Outcome:
    """"fail" where an element is outside its allowance or a property check failed; else "inconclusive"
    where an element could not be judged; else "pass"."""
    if bool(report.mismatch.any()) or any(check.outcome == "fail" for check in report.properties):
        return "fail"
    return "inconclusive" if bool(report.inconclusive.any()) else "pass"


def passed(report: CheckReport) -> bool:
    """Every element judged and within its allowance. Not passed is not failed: see outcome."""
    return report.outcome == "pass"


def failed(report: CheckReport) -> bool:
    """Some element is wrong, or a property check failed: see outcome."""
    return report.outcome == "fail"


def kinks(report: CheckReport) -> int:
    """Elements at a kink that did not fail (not those near one: "kink nearby" may be a change below f's
    rounding as well)."""
    return int((report.kink & ~report.unresolved & ~report.mismatch).sum())


def reason(report: CheckReport, i: int, j: int) -> str:
    """Why element (i, j) failed by not being finite ("non-finite") or could not be judged (a key of
    message.REASONS); "" for a pass or a plain fail."""
    if report.nonfinite[i, j]:
        return "non-finite"
    if not report.inconclusive[i, j]:
        return ""
    autograd, numerical = float(report.autograd[i, j]), float(report.numerical[i, j])
    if report.kink[i, j]:
        return "kink nearby" if report.unresolved[i, j] else "kink"
    if not math.isfinite(numerical):
        return "infinite" if autograd == numerical else "domain"
    if report.unstable[i, j]:
        return "unstable"
    if report.unconfirmed[i, j]:
        return "unconfirmed"
    if report.unresolved[i, j]:
        return "unresolved"
    if not math.isfinite(autograd):
        return "infinite"
    return "tolerance" if report.tolerance is not None else "imprecise"

