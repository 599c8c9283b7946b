"""Report: what a check found, element by element: both Jacobians, allowances, the evidence, the verdict.

What a check could have caught: per element, detectable relative error = allowed / |estimate|, the
smallest relative error of autograd's value that its allowance would have failed (the estimate, not
autograd, is the reference: a wrong autograd value must not make its own check look sharper). Elements
whose estimate is not resolved from 0 (|estimate| at most its uncertainty, allowed/safety) have none: a
relative error of an entry that is 0 means nothing, and such an entry is held to its absolute allowance.
The report's figure is the largest over the elements it judged (passed or failed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch

from . import message, verdict
from .fast import Projections
from .indices import unravel
from .outcome import Outcome
from .properties import PropertyCheck
from .signature import Argument, Skipped
from .tolerances import Tolerance

Mode = Literal["reverse", "forward"]


@dataclass(frozen=True)
class Element:
    """One Jacobian entry: d f_output / d input by autograd and numerically, what was allowed, the verdict."""

    output: int
    input: int  # the column: the element's position among all inputs' elements, flattened
    argument: str
    index: tuple[int, ...]
    autograd: float
    numerical: float
    error_estimate: float
    allowed: float
    step: float
    verdict: Outcome
    reason: str  # "" for pass and fail, "non-finite" for a fail by a NaN or inf; else a key of REASONS
    # allowed / |numerical|: the smallest relative error of autograd's value its allowance fails; None
    # where the estimate is not resolved from 0 (or not finite).
    detectable_relative_error: float | None = None
    # What the estimate alone supports (its allowance: safety × uncertainty, plus autograd's rounding);
    # the same as allowed unless the caller gave atol/rtol.
    supported: float = math.nan

    @property
    def difference(self) -> float:
        return abs(self.autograd - self.numerical)


@dataclass(frozen=True, eq=False)
class CheckReport:
    """The outcome of check_jacobian: both Jacobians (outputs, inputs) in float64, allowances and verdicts.

    mode         -- the autograd mode that produced `autograd` ("reverse" or "forward")
    method       -- the function that produced it: torch.autograd.grad (reverse mode: one backward per
                    output, or "with is_grads_batched=True" for many) or torch.func.jacfwd (forward mode)
    note         -- why a fallback happened ("" when none)
    error        -- per element, the Richardson error estimate of the chosen window (built when first read)
    steps        -- per element, the finest step of the chosen window (built when first read)
    details      -- builds error and steps: for a large Jacobian each table costs what an evaluation of f does
    levels       -- per column, how many steps were tried (FIRST_LEVELS, 4, for a smooth f: the first batch)
    first_step   -- the first step, relative to max(|x_j|, 1): ε^(1/7), or max_step where that is smaller
    nearby_max_step -- where an element is unjudged for a kink nearby, the largest first step (relative, as
                    max_step=) that keeps every step on x's side of each such kink; NaN where there is none
    kink, domain, unstable, unconfirmed, unresolved, converged -- per element: a kink found; no finite
                    estimate at any step; a mismatch that a window at smaller steps contradicts; a mismatch no
                    independent window confirms; f unchanged at every step where autograd's value is below f's
                    resolution (the estimate 0 resolves nothing); allowed small enough to judge
    noise        -- per output, the bound on one evaluation's rounding error the allowances used: the
                    larger of ε·(|f_i| + Σ|J_ik||x_k|) and NOISE_BOUND × the noise measured at x
    amplification -- the largest ratio of measured noise to ε·(|f_i| + Σ|J_ik||x_k|) over the outputs:
                    above 1 where f amplifies its own rounding
    nondeterminism -- the largest difference between f's outputs at x on two calls (0: the same values):
                    above 0, f is not a function of its inputs alone (a random op such as dropout, or state a
                    module in train mode keeps), and its measured "noise" is that
    safety       -- the allowance factor over the uncertainty
    arguments    -- the checked inputs, named, with their shapes (a complex `z` as `z.real` and `z.imag`; a
                    sample's positions)
    evaluations  -- every evaluation of f at a point: the estimate's, the noise probe's, the kink test's,
                    f(x) twice, autograd's forward and the reverse-mode property checks' forward; forward
                    mode evaluates f with tangents besides, not counted (its dual numbers once per input
                    element, where torch.func cannot transform f; its property checks)
    seconds      -- wall time of the whole check
    outputs      -- the differentiable outputs, named and placed among the rows
    skipped      -- the arguments and outputs held fixed (no gradient: integers, bools, non-tensors)
    call         -- f with its argument names, as the messages show it: "f(x, weight, bias)"
    order        -- 1, or 2: the Jacobian of f's vector–Jacobian product (second derivatives)
    seed         -- the seed of every random draw (a sample's elements, order 2's grad_output, the property
                    checks' vectors)
    tolerance    -- the caller's atol/rtol (a Tolerance whose reason says so), or None: the estimate's own
    properties   -- the property checks beside the Jacobian (checks.core.properties), each per element
    detached     -- where a mismatch was found: the outputs that do not require grad although a checked input
                    does (cut off by .detach(), torch.no_grad, .item() or a numpy round trip inside f)
    projections  -- fast mode's random vectors (checks.core.fast), or None: then every array above is
                    (outputs, inputs) of projections vᵀ·J·u, one per output and input of f, not of Jacobian entries
    """

    autograd: torch.Tensor
    numerical: torch.Tensor
    allowed: torch.Tensor
    details: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    levels: torch.Tensor
    kink: torch.Tensor
    domain: torch.Tensor
    unstable: torch.Tensor
    unconfirmed: torch.Tensor
    unresolved: torch.Tensor
    converged: torch.Tensor
    noise: torch.Tensor
    amplification: float
    safety: float
    mode: Mode
    method: str
    note: str
    dtype: str
    device: str
    arguments: tuple[Argument, ...]
    output_shape: tuple[int, ...]
    evaluations: int
    seconds: float
    resolution: float
    first_step: float
    nearby_max_step: float
    outputs: tuple[Argument, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    call: str = ""
    order: int = 1
    seed: int | None = None
    tolerance: Tolerance | None = None
    properties: tuple[PropertyCheck, ...] = ()
    detached: tuple[str, ...] = ()
    projections: Projections | None = None
    nondeterminism: float = 0.0

    @cached_property
    def error(self) -> torch.Tensor:
        return self._details[0]

    @cached_property
    def steps(self) -> torch.Tensor:
        return self._details[1]

    @cached_property
    def _details(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.details()

    def __repr__(self) -> str:  # the tensors stay out of a test runner's output
        return f"<CheckReport of {self.call or 'f'}: {self.summary()}>"

    def __bool__(self) -> bool:
        """True for a pass only, as gradcheck(..., raise_exception=False) returns: `assert report` fails on a
        fail and on an inconclusive check alike (`report.outcome != "fail"` accepts the inconclusive)."""
        return self.outcome == "pass"

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.arguments[0].shape if len(self.arguments) == 1 else (self.autograd.shape[1],)

    # Cached: a report is immutable, and outcome, summary and message each read these masks.
    @cached_property
    def difference(self) -> torch.Tensor:
        return verdict.difference(self.autograd, self.numerical)

    @cached_property
    def _finite(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Where autograd, and the estimate, are finite."""
        return verdict.finite(self.autograd), verdict.finite(self.numerical)

    # The verdict is decided in checks.core.verdict; cached: a report is immutable, and outcome, summary and
    # message each read these masks.
    nonfinite = cached_property(verdict.nonfinite)
    mismatch = cached_property(verdict.mismatch)
    agreed = cached_property(verdict.agreed)
    inconclusive = cached_property(verdict.inconclusive)
    given_allowed = property(verdict.given_allowed)
    _against_tolerance = cached_property(verdict._against_tolerance)
    outcome = cached_property(verdict.outcome)
    passed = property(verdict.passed)
    failed = property(verdict.failed)
    kinks = property(verdict.kinks)
    reason = verdict.reason

    @cached_property
    def detectable(self) -> torch.Tensor:
        """(outputs, inputs): the smallest relative error of autograd's value that each element's allowance
        fails: allowed / |numerical| (with a tolerance given, (its allowance + the estimate's) / |numerical|,
        the fail threshold); NaN where the estimate is not resolved from 0 (|numerical| at most its
        uncertainty, allowed / safety) or not finite."""
        magnitude = self.numerical.abs()
        threshold = self.allowed if self.tolerance is None else self.given_allowed + self.allowed
        resolved = torch.isfinite(magnitude) & torch.isfinite(threshold) & (self.safety * magnitude > self.allowed)
        return torch.where(resolved, threshold / magnitude, torch.full_like(magnitude, math.nan))

    @property
    def detectable_relative_error(self) -> float | None:
        """The largest detectable relative error over the judged (passed or failed) elements whose estimate is
        resolved from 0: a wrong gradient whose every element is off by more than this relatively fails.
        None where no judged element has a resolved, non-zero estimate."""
        values = self.detectable[(self.mismatch | self.agreed) & ~self.detectable.isnan()]
        return float(values.max()) if values.numel() else None

    def explain(self, reason: str) -> str:
        """Why an element could not be judged (a key of message.REASONS), and what would settle it."""
        return message.explain(self, reason)

    def argument_of(self, column: int) -> Argument:
        return next(a for a in reversed(self.arguments) if a.offset <= column)

    def elements(self, *verdicts: str) -> list[Element]:
        """The per-element report, row by row (output index, then column): every element, or only those whose
        verdict is one of `verdicts` ("pass", "fail", "inconclusive"). Only the elements asked for are visited,
        so a message about a few failures among millions of elements stays cheap."""
        mismatch, inconclusive, detectable = self.mismatch, self.inconclusive, self.detectable
        masks = {"fail": mismatch, "inconclusive": inconclusive & ~mismatch, "pass": ~mismatch & ~inconclusive}
        unknown = set(verdicts) - set(masks)
        if unknown:
            raise ValueError(f"elements(): unknown verdict {sorted(unknown)}; choose from {sorted(masks)}")
        chosen = torch.zeros_like(mismatch)
        for verdict in verdicts or masks:
            chosen |= masks[verdict]
        allowed = self.allowed if self.tolerance is None else self.given_allowed
        rows = []
        for i, j in chosen.nonzero().tolist():
            verdict = "fail" if mismatch[i, j] else "inconclusive" if inconclusive[i, j] else "pass"
            argument = self.argument_of(j)
            relative = float(detectable[i, j])
            rows.append(Element(i, j, argument.name, argument.index(j), float(self.autograd[i, j]),
                                float(self.numerical[i, j]), float(self.error[i, j]), float(allowed[i, j]),
                                float(self.steps[i, j]), verdict, self.reason(i, j),
                                None if math.isnan(relative) else relative, float(self.allowed[i, j])))
        return rows

    def summary(self) -> str:
        """One line: the outcome, how many elements failed or could not be judged, mode, dtype, device."""
        return message.summary(self)

    def output_index(self, row: int) -> tuple[int, ...]:
        """The multi-index in f's output of a Jacobian row (flat for tuple outputs)."""
        return unravel(row, self.output_shape)

    def output_label(self, row: int) -> str:
        """A Jacobian row as f's output and index: "output (2,)", "output 1 (0,)", "output.imag (3,)"."""
        if not self.outputs:
            return f"output {self.output_index(row)}"
        output = next(o for o in reversed(self.outputs) if o.offset <= row)
        return f"{output.name} {output.index(row)}"

    def where(self, element: Element) -> str:
        return message.where(self, element)

    def wrong_gradients(self) -> str:
        """The backward that is wrong, by input ("" if none)."""
        return message.wrong_gradients(self)

    def message(self, limit: int = 3) -> str:
        """A torch.testing.assert_close-style account: see checks.core.message."""
        return message.message(self, limit)
