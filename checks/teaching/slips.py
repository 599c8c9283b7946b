"""The slips a failed check can name: a constant factor, a flipped sign, a missing term, all zeros.

A failure reads better with a diagnosis than with "Greatest relative difference: 2". Each is stated as a
question (the check knows the numbers, not the reader's intent), and only where the numbers show it: the
observed value equals the expected one times a constant, or plus a term of a short list evaluated at the
input, within the check's own tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..core.compare import compare
from ..core.tolerances import Tolerance

# Terms a derivative commonly loses (the product rule's other half, a chain rule's inner factor), evaluated
# at the check's input x.
TERMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "x": lambda x: x,
    "2x": lambda x: 2 * x,
    "x²": lambda x: x**2,
    "sin(x)": torch.sin,
    "cos(x)": torch.cos,
    "exp(x)": torch.exp,
    "1/x": lambda x: 1 / x,
    "log(x)": torch.log,
}


def _close(observed: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> bool:
    return bool(torch.isfinite(expected).all()) and compare(observed, expected, tolerance).passed


def diagnosis(observed: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance, how: str,
              at: torch.Tensor | None = None) -> str:
    """A slip the numbers show, as one sentence; '' when none is recognised. observed and expected are float64."""
    if observed.shape != expected.shape or not bool(torch.isfinite(observed).all() & torch.isfinite(expected).all()):
        return ""
    nonzero = expected != 0
    if not bool(nonzero.any()):
        return ""
    if bool((observed == 0).all()):
        if how in ("forward", "numerical"):  # a quotient of f's values, not autograd's: f did not change
            return ("observed is all zeros: f did not change between the points it was evaluated at (a flat "
                    "stretch, such as a staircase like round, or a step below f's resolution)?")
        return ("observed is all zeros: did the graph reach x (a detach(), torch.no_grad(), "
                "an integer step)?")
    ratio = float((observed[nonzero] / expected[nonzero]).median())
    several = int(nonzero.sum()) > 1
    whole = round(ratio) if abs(ratio) >= 0.5 else 0
    inverse = round(1 / ratio) if 0 < abs(ratio) < 0.75 else 0
    if whole == -1 and _close(observed, -expected, tolerance):
        return "sign flipped: observed is −1 × the expected"
    if whole not in (0, 1) and _close(observed, whole * expected, tolerance):
        accumulated = (f", or .grad accumulated over {whole} backward() calls (reset it with x.grad = None)"
                       if how == "stored" and whole > 0 else "")
        if whole < 0:
            return f"observed is {whole}× the expected: a flipped sign and a missing factor {-whole}?"
        return f"observed is {whole}× the expected: a missing factor {whole} in the expectation{accumulated}?"
    if abs(inverse) > 1 and _close(observed, expected / inverse, tolerance):
        sign = "a flipped sign and " if inverse < 0 else ""
        return f"observed is 1/{inverse} of the expected: {sign}an extra factor {abs(inverse)} in the expectation?"
    difference = observed - expected
    if at is not None and at.shape == observed.shape:
        for name, term in TERMS.items():
            with torch.no_grad():
                value = term(at)
            for sign, words in ((1, "a missing term"), (-1, "an extra term")):
                if _close(difference, sign * value, tolerance):
                    return f"observed − expected = {'−' if sign < 0 else ''}{name} at x: {words} {name}?"
    if several and ratio != 0 and _close(observed, ratio * expected, tolerance):
        return f"observed is {ratio:.6g}× the expected at every element: a constant factor?"
    if several and _close(difference, difference.reshape(-1)[0].expand_as(difference), tolerance):
        return (f"observed − expected is {float(difference.reshape(-1)[0]):.6g} at every element: "
                f"a missing constant term?")
    return ""
