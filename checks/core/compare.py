"""Comparing observed with expected, reported the way torch.testing reports a mismatch.

What differs, where (the worst element's index), by how much, and how much was allowed; and what the
allowance could have caught at all: the smallest relative error of the gradient it fails (detectable).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import ShapeMismatchError
from .indices import unravel
from .tolerances import Tolerance


@dataclass(frozen=True)
class Comparison:
    """abs_error and rel_error are the greatest over all elements, as torch.testing reports them; worst_index
    is the element with the greatest absolute difference among those outside the tolerance (among all of
    them when none is)."""

    abs_error: float
    rel_error: float
    worst_index: tuple[int, ...]
    mismatched: int
    total: int
    passed: bool
    message: str
    # The smallest relative error of the gradient the allowance fails at every element, and the element
    # that sets it (see detectable); None when every expected element is 0 (atol alone judges those).
    detectable_relative_error: float | None = None
    detectable_index: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Detectable:
    """What an allowance can catch: a gradient wrong by more than relative_error at every element fails."""

    relative_error: float | None
    index: tuple[int, ...] | None


def detectable(expected: torch.Tensor, tolerance: Tolerance) -> Detectable:
    """The smallest relative error of the gradient, element by element, that the allowance would fail.

    At an element with expected e ≠ 0, a gradient e·(1 + r) fails when |r·e| > atol + rtol·|e|, i.e. when
    r > (atol + rtol·|e|)/|e|. The check detects an error of a given size at every element only beyond the
    largest of these: that largest value, and the element it comes from (the first, on a tie), is what this
    returns. Elements where e is 0 have no relative error (atol alone judges them) and non-finite ones no
    meaningful one: both are left out, and with nothing left the answer is None.
    """
    expected = expected.detach().cpu().to(torch.float64)
    size = expected.abs().reshape(-1)
    judged = (size != 0) & torch.isfinite(size)
    if not bool(judged.any()):
        return Detectable(None, None)
    ratio = torch.where(judged, tolerance.allowed(expected).reshape(-1) / size, torch.full_like(size, -1.0))
    flat = int(ratio.argmax())
    return Detectable(float(ratio[flat]), unravel(flat, expected.shape))


def beyond_allowance(observed: torch.Tensor, expected: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Where |observed - expected| > allowed (one allowance per element), as torch.isclose judges: equal values
    match, an infinity only its equal (inf - inf is NaN, and inf is within rtol * inf of any number), and a
    NaN observed is always beyond."""
    difference = (observed - expected).abs()
    close = (observed == expected) | (torch.isfinite(expected) & (difference <= allowed))
    return ~close


def _allowed_at(tolerance: Tolerance, flat_index: int) -> str:
    """What atol allowed at one element: the one for all, or that element's own and the others' range."""
    if tolerance.element_atol is None:
        return f"up to {tolerance.atol:.3g} allowed"
    return f"up to {tolerance.element_atol[flat_index]:.3g} allowed there; atol {tolerance.atol_words()}"


def compare(observed: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> Comparison:
    """Elementwise |observed - expected| <= atol + rtol * |expected|, in float64 on the CPU."""
    observed = observed.detach().cpu().to(torch.float64)
    expected = expected.detach().cpu().to(torch.float64)
    if observed.shape != expected.shape:
        raise ShapeMismatchError(
            f"observed gradient has shape {tuple(observed.shape)}, expected {tuple(expected.shape)}"
        )
    difference = (observed - expected).abs()
    # Equal values differ by 0, equal infinities included; NaN (observed NaN, or an infinity against another
    # value) counts as a mismatch of infinite size, never as a pass.
    difference = torch.where(observed == expected, torch.zeros_like(difference), difference)
    difference = torch.where(torch.isnan(difference), torch.full_like(difference, float("inf")), difference)
    bad = beyond_allowance(observed, expected, tolerance.allowed(expected))
    relative = difference / expected.abs()
    relative = torch.where(difference == 0, torch.zeros_like(relative), relative)
    relative = torch.where(torch.isnan(relative), torch.full_like(relative, float("inf")), relative)
    flat_greatest = int(difference.reshape(-1).argmax()) if difference.numel() else 0
    # The worst element is one that failed: the greatest difference can sit where the allowance is larger.
    among = torch.where(bad, difference, torch.full_like(difference, -1.0)) if bool(bad.any()) else difference
    flat_worst = int(among.reshape(-1).argmax()) if difference.numel() else 0
    worst_index = unravel(flat_worst, difference.shape)
    mismatched = int(bad.sum())
    total = difference.numel()
    abs_error = float(difference.max()) if total else 0.0
    rel_error = float(relative.max()) if total else 0.0
    passed = mismatched == 0
    atol = tolerance.atol_words()
    if passed:
        message = (
            f"Close: greatest absolute difference {abs_error:.3g} (up to {atol} allowed), "
            f"greatest relative difference {rel_error:.3g} (up to {tolerance.rtol:.3g} allowed)"
        )
    else:
        rel_index = unravel(int(relative.reshape(-1).argmax()), relative.shape)
        message = (
            f"Gradients are not close!\n"
            f"Mismatched elements: {mismatched} / {total} ({100 * mismatched / total:.1f}%)\n"
            f"Greatest absolute difference: {abs_error:.6g} at index {unravel(flat_greatest, difference.shape)} "
            f"({_allowed_at(tolerance, flat_greatest)})\n"
            f"Greatest relative difference: {rel_error:.6g} at index {rel_index} "
            f"(up to {tolerance.rtol:.3g} allowed)"
        )
    caught = detectable(expected, tolerance)
    return Comparison(abs_error, rel_error, worst_index, mismatched, total, passed, message,
                      caught.relative_error, caught.index)
