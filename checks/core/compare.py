"""Comparing observed with expected, reported the way torch.testing reports a mismatch.

What differs, where (the worst element's index), by how much, and how much was allowed.

Non-finite numbers are judged before any tolerance, because a NaN compares false with every bound: an
element whose observed or expected value is NaN or ±inf is a mismatch, always. That includes an observed
+inf where +inf was expected: equal, but an infinite gradient is not a derivative a tolerance can vouch for
(a bug that overflows gives the same inf), so the comparison says what it saw instead of passing it.

What a comparison could have caught: for each element with a finite, non-zero expected value, the
detectable relative error (atol + rtol·|expected|)/|expected|, the smallest relative error of the observed
value that the tolerance fails; the comparison's figure is the largest of them. Elements expected to be 0
are judged by atol alone (a relative error of 0 means nothing) and are left out of it, and so are
non-finite expected values; with no element left the figure is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import ShapeMismatchError
from .indices import unravel
from .tolerances import Tolerance


@dataclass(frozen=True)
class Comparison:
    abs_error: float
    rel_error: float
    worst_index: tuple[int, ...]
    mismatched: int
    total: int
    passed: bool
    message: str
    # The largest (atol + rtol·|expected|)/|expected| over the elements with a finite, non-zero expected
    # value; None when there are none.
    detectable_relative_error: float | None


def beyond_tolerance(observed: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Where |observed - expected| > atol + rtol * |expected|, or either value is NaN or ±inf (never close)."""
    difference = (observed - expected).abs()
    nonfinite = ~torch.isfinite(observed) | ~torch.isfinite(expected)
    return nonfinite | (difference > atol + rtol * expected.abs())


def detectable_relative_error(expected: torch.Tensor, tolerance: Tolerance) -> float | None:
    """The smallest relative error of an observed value that the tolerance fails, at the element where it is
    largest: max of (atol + rtol·|expected|)/|expected| over finite non-zero expected values, else None."""
    magnitude = expected.detach().cpu().to(torch.float64).abs().reshape(-1)
    magnitude = magnitude[torch.isfinite(magnitude) & (magnitude > 0)]
    if not magnitude.numel():
        return None
    return float(((tolerance.atol + tolerance.rtol * magnitude) / magnitude).max())


def compare(observed: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> Comparison:
    """Elementwise |observed - expected| <= atol + rtol * |expected|, in float64 on the CPU; a NaN or ±inf on
    either side is a mismatch."""
    observed = observed.detach().cpu().to(torch.float64)
    expected = expected.detach().cpu().to(torch.float64)
    if observed.shape != expected.shape:
        raise ShapeMismatchError(
            f"observed gradient has shape {tuple(observed.shape)}, expected {tuple(expected.shape)}"
        )
    nonfinite = ~torch.isfinite(observed) | ~torch.isfinite(expected)
    difference = (observed - expected).abs()
    # A non-finite element counts as a mismatch of infinite size, never as a pass (inf - inf is NaN).
    difference = torch.where(nonfinite, torch.full_like(difference, float("inf")), difference)
    bad = beyond_tolerance(observed, expected, tolerance.rtol, tolerance.atol)
    relative = difference / expected.abs()
    relative = torch.where(difference == 0, torch.zeros_like(relative), relative)
    relative = torch.where(nonfinite, torch.full_like(relative, float("inf")), relative)
    flat_worst = int(difference.reshape(-1).argmax()) if difference.numel() else 0
    worst_index = unravel(flat_worst, difference.shape)
    mismatched = int(bad.sum())
    total = difference.numel()
    abs_error = float(difference.max()) if total else 0.0
    rel_error = float(relative.max()) if total else 0.0
    passed = mismatched == 0
    detectable = detectable_relative_error(expected, tolerance)
    if passed:
        message = (
            f"Close: greatest absolute difference {abs_error:.3g} (up to {tolerance.atol:.3g} allowed), "
            f"greatest relative difference {rel_error:.3g} (up to {tolerance.rtol:.3g} allowed)"
        )
        if detectable is not None:
            message += f"; a relative error above {detectable:.3g} would have failed every element"
    else:
        rel_index = unravel(int(relative.reshape(-1).argmax()), relative.shape)
        lines = [
            "Gradients are not close!",
            f"Mismatched elements: {mismatched} / {total} ({100 * mismatched / total:.1f}%)",
        ]
        if bool(nonfinite.any()):
            lines.append(_nonfinite_line(observed, expected, nonfinite))
        lines += [
            f"Greatest absolute difference: {abs_error:.6g} at index {worst_index} "
            f"(up to {tolerance.atol:.3g} allowed)",
            f"Greatest relative difference: {rel_error:.6g} at index {rel_index} "
            f"(up to {tolerance.rtol:.3g} allowed)",
        ]
        message = "\n".join(lines)
    return Comparison(abs_error, rel_error, worst_index, mismatched, total, passed, message, detectable)


def _nonfinite_line(observed: torch.Tensor, expected: torch.Tensor, nonfinite: torch.Tensor) -> str:
    """What the first non-finite element shows, and how many there are: a NaN or inf has no difference."""
    count = int(nonfinite.sum())
    first = unravel(int(nonfinite.reshape(-1).nonzero()[0]), nonfinite.shape)
    seen, wanted = float(observed[first]), float(expected[first])
    if seen == wanted:
        why = "equal infinities, but an infinite gradient is not a finite derivative a tolerance can vouch for"
    elif torch.isfinite(observed[first]):
        why = "the expected value is not finite"
    else:
        why = "the observed gradient is not finite"
    return (f"Not finite: {count} element{'s' * (count > 1)}; at index {first} observed {seen:g} where "
            f"{wanted:g} was expected ({why})")
