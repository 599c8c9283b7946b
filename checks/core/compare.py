"""Comparing observed with expected, reported the way torch.testing reports a mismatch.

What differs, where (the worst element's index), by how much, and how much was allowed.
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


def beyond_tolerance(observed: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Where |observed - expected| > atol + rtol * |expected|; a NaN observed is always beyond."""
    difference = (observed - expected).abs()
    return torch.isnan(difference) | (difference > atol + rtol * expected.abs())


def compare(observed: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> Comparison:
    """Elementwise |observed - expected| <= atol + rtol * |expected|, in float64 on the CPU."""
    observed = observed.detach().cpu().to(torch.float64)
    expected = expected.detach().cpu().to(torch.float64)
    if observed.shape != expected.shape:
        raise ShapeMismatchError(
            f"observed gradient has shape {tuple(observed.shape)}, expected {tuple(expected.shape)}"
        )
    difference = (observed - expected).abs()
    # NaN in observed counts as a mismatch of infinite size, never as a pass.
    difference = torch.where(torch.isnan(difference), torch.full_like(difference, float("inf")), difference)
    bad = beyond_tolerance(observed, expected, tolerance.rtol, tolerance.atol)
    relative = difference / expected.abs()
    relative = torch.where(difference == 0, torch.zeros_like(relative), relative)
    flat_worst = int(difference.reshape(-1).argmax()) if difference.numel() else 0
    worst_index = unravel(flat_worst, difference.shape)
    mismatched = int(bad.sum())
    total = difference.numel()
    abs_error = float(difference.max()) if total else 0.0
    rel_error = float(relative.max()) if total else 0.0
    passed = mismatched == 0
    if passed:
        message = (
            f"Close: greatest absolute difference {abs_error:.3g} (up to {tolerance.atol:.3g} allowed), "
            f"greatest relative difference {rel_error:.3g} (up to {tolerance.rtol:.3g} allowed)"
        )
    else:
        rel_index = unravel(int(relative.reshape(-1).argmax()), relative.shape)
        message = (
            f"Gradients are not close!\n"
            f"Mismatched elements: {mismatched} / {total} ({100 * mismatched / total:.1f}%)\n"
            f"Greatest absolute difference: {abs_error:.6g} at index {worst_index} "
            f"(up to {tolerance.atol:.3g} allowed)\n"
            f"Greatest relative difference: {rel_error:.6g} at index {rel_index} "
            f"(up to {tolerance.rtol:.3g} allowed)"
        )
    return Comparison(abs_error, rel_error, worst_index, mismatched, total, passed, message)
