"""A gradient checker: autograd's Jacobian against an adaptive Richardson estimate, element by element.

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

The allowance of element (i, j):

    allowed = safety · (error + noise_i/h + ρ·max(|J| in row i and column j) + tiny)

- error: how much the window's extrapolated value T22 differs from those of the windows one step coarser
  and one finer (the larger change; as numdifftools estimates it). Ridders' error, the change the last
  extrapolation made, measures the once-extrapolated value instead, far above T22's own error.
- noise_i/h: rounding of the evaluations of f_i, divided by the finest step of the tableau. noise_i is
  the larger of two bounds on one evaluation's rounding error:
  ε·scale_i, with scale_i = |f_i(x)| + Σ_k |J_ik|·|x_k|, the size of what f_i is computed from: right for
  an f computed accurately, far too small where f amplifies its own rounding (an ill-conditioned solve,
  cancellation between large terms: inv(A + diag x).sum() with cond(A) ≈ 4e6 carries noise far above ε);
  and NOISE_BOUND·σ_i, with σ_i f_i's noise measured at x (Moré & Wild's ECnoise, numerical.noise_level:
  the scaled higher differences of f at 9 equally spaced points on each of NOISE_LINES random lines through
  x, spaced ε^(2/3)·max(|x_j|, 1) apart; the larger of the lines). Rounding is not random, but it is far
  from smooth: the higher differences of a smooth f vanish like δ^k while those of its rounding stay level,
  so the measurement sees what this machine's BLAS, vector units and thread count do to f, and the
  allowance follows it. The tableau's own steps cannot show it: 2^-k apart, their rounding can line up
  exactly (an ill-conditioned inverse can give the same, wrong, central difference at several consecutive
  halved steps, so that the windows agree and the error estimate is 0); the probe's points share no such
  ratios.
- ρ·max(|J| in row, column): autograd's own rounding, and the estimate's share of f's relative noise.
  ρ = ε·max(1, A), A the largest ratio over the outputs of measured noise to ε·scale_i (the report's
  amplification). An entry computed as 1e-17 where f does not depend on x_j at all is rounding, not a bug;
  where f amplifies its rounding, its backward runs through the same operations, and f's noise at x ± h
  grows with |f(x ± h)|, an error of relative size ρ in the estimate that no step reduces (an output that
  vanishes at x shows its relative noise only away from x, hence the largest over the outputs).
- tiny: the smallest normal number of the dtype, a floor for subnormal results.

A correct gradient is never failed on another machine: where f's rounding is amplified, the allowance
grows with it, and a mismatch must be confirmed. The window chosen is the least uncertain of several, and
one of them can agree with its neighbours by chance (a coarse window of a fast oscillation aliased into a
smooth-looking tableau; a noisy f). Columns with a mismatch get smaller steps (the next window, and the
finest whose rounding is at most a quarter of the mismatch, the witness); then
- "unstable" where the chosen window and the witness disagree by more than both allowances (a staircase
  such as round fits coarse steps exactly and is flat below a stair), or where autograd is 0 in an output
  that is a staircase on the noise probe (most of its values at distinct points equal, the rest jumps, all
  one way): its measured "noise" is the stair height, which keeps the witness from steps fine enough to
  see a stair's flat, and 0 is the slope of every stair (rounding noise quantized by large intermediates,
  as in an ill-conditioned inverse, jumps both ways, and is judged as noise);
- "unconfirmed" unless an independent window (sharing no step with the chosen one, and least uncertain
  relative to its value among those) resolves the mismatch (its uncertainty at most the mismatch) and its
  value sides with the chosen estimate rather than with autograd.
What differs between machines is then only how often the estimate is precise enough to pass. Tested by
injecting noise: f's output × (1 + u·k·ε), u uniform in [-1, 1] afresh per evaluation, k from 10 to 10⁶
(tests/test_checker_noise.py; the sweep over the mutant suite, the hard cases and all of op_db:
benchmarks/noise.py).

What a check could have caught: per element, detectable relative error = allowed / |estimate|, the
smallest relative error of autograd's value that its allowance would have failed (the estimate, not
autograd, is the reference: a wrong autograd value must not make its own check look sharper). Elements
whose estimate is not resolved from 0 (|estimate| at most its uncertainty, allowed/safety) have none: a
relative error of an entry that is 0 means nothing, and such an entry is held to its absolute allowance.
The report's figure is the largest over the elements it judged (passed or failed).

The step adapts to f (as numdifftools does): central differences at h0·max(|x_j|, 1)·2^-k for k = 0, 1, ...,
each window of three consecutive steps extrapolated, and per element the window whose uncertainty
(error + rounding) is smallest relative to its value (or to √ε of the entry's scale, for an entry near 0)
wins. Columns whose elements are not yet judged (the tableau has not
converged, or a stencil point left f's domain, or the estimate is less precise than ε^(2/3) of the entry's
scale and still improving) get smaller steps, down to ε^(3/4)·max(|x_j|, 1) or until rounding at the step
alone exceeds the best uncertainty found; a smooth f is settled by the first four steps (two windows, each
judged against the other), evaluated in one batch.

The cost stays that of the Jacobian's non-zeros, not of n·m per step. The search holds only the elements at
which f_i changed when x_j was perturbed (an elementwise f's diagonal, a Linear layer's rows of weights);
every other element is flat, its differences exactly 0 at every step, so its estimate is 0, its error 0, its
uncertainty the rounding at its column's first window, and it has no kink: it is judged like any element,
filled in where the report's (outputs, inputs) tables are built, and it neither keeps its column searching
nor stops it (a smaller step cannot make it more precise). "Unchanged" is judged against f(x) as the batched
evaluation computes it (a batched matrix product sums in another order than a plain one). The points go to
f in chunks of at most CHUNK_BYTES, built in place; the report's masks are computed in numpy on the tables'
memory (for a large Jacobian a fresh torch tensor costs its pages one fault at a time).

A kink (relu or abs at 0, a clamp's bound) makes both numbers meaningless: one-sided differences D+ and D-
disagree by the jump in slope at every step, whereas for a smooth f their gap h·f'' halves with the step.
The gap |f(x + h) + f(x - h) - 2 f(x)| / h comes from the evaluations the estimate made anyway, at the first
two steps of each column's chosen window (and of its finest, for a mismatch); it counts when it exceeds
KINK_NOISE times the rounding noise of a one-sided difference, 2·noise_i/h.

Several inputs: f(x, weight, bias) is checked as one function of all inputs' elements concatenated;
each element is named by its input and index ("input `weight`, element (2, 1)"). check_module does this
for an nn.Module's parameters and inputs, and assert_gradients raises for a test suite. Complex inputs and
outputs are checked by their real and imaginary parts; integer, bool and non-tensor arguments are held
fixed and named (checks.core.signature). Beside the Jacobian, every check runs the property checks of
checks.core.properties (f does not change its inputs; a reentrant backward; undefined output gradients;
batched gradients on request). order=2 checks the Jacobian of the vector–Jacobian product, as gradgradcheck
does. atol/rtol replace the estimate's own allowance by the caller's, judged against the estimate's
uncertainty: pass only where autograd is within the tolerance of every value the estimate allows, fail only
where it is outside it for every one (and confirmed, as above; NaN and inf are judged as above, before any
tolerance). The detectable relative error then uses that fail threshold: (atol + rtol·|estimate| + the
estimate's allowance) / |estimate|.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import torch

from .dtypes import dtype_name
from .errors import CheckInputError, NaNInputError, in_place_named
from .fast import Projection, Projections, projected_gradients
from .indices import unravel
from .forward import NoForwardMode, first_line, flat_jacobian, forward_jacobian
from .numerical import _Evaluator, _relative_step, default_step, machine_epsilon, noise_level, require_memory
from .properties import (
    Graph,
    PropertyCheck,
    batched,
    batched_forward,
    reentrant,
    undefined_gradients,
    undefined_tangents,
    unmutated,
)
from .signature import Argument, SecondOrder, Signature, Skipped, parameter_names
from .tolerances import Tolerance
from .validate import flag, integer, memory, number

Function = Callable[..., torch.Tensor]
Mode = Literal["reverse", "forward"]
MODES: tuple[Mode, ...] = ("reverse", "forward")
Outcome = Literal["pass", "fail", "inconclusive"]
ElementVerdict = Literal["pass", "fail", "inconclusive"]

# Allowance factor over the uncertainty; the same 10 as checks.core.tolerances.NUMERICAL_SAFETY: an estimate
# rarely misses by ten times its own error estimate.
SAFETY = 10.0
# An element is judged only when its allowance is at most this fraction of the entry's scale: a pass with
# an allowance of 50 % would vouch for nothing.
RESOLUTION = 1e-2
# For a smooth f the one-sided gap halves with the step (ratio 0.5, or 0.125 where f'' = 0); a kink keeps
# it near 1. 0.75 sits between the two.
KINK_RATIO = 0.75
# A gap must exceed this many times the rounding noise of a one-sided difference (2·noise_i/h) to count.
KINK_NOISE = 100.0
# Up to this many outputs, reverse mode runs one backward per output; beyond, the backwards are batched
# (torch.autograd.grad with is_grads_batched), the identity it is seeded with this many elements at a time.
FEW_OUTPUTS = 4
BATCHED_ROWS_LIMIT = 4_000_000
# The steps evaluated first, in one batch: the two windows a smooth f needs (each judged against the other).
FIRST_LEVELS = 4
# Steps per later batch, for the columns not settled by the first: a window's worth.
LATER_LEVELS = 3
# The points of one evaluation of f (and its values) stay under this many bytes: a large x is evaluated
# in chunks of columns, one batch each.
CHUNK_BYTES = 64 * 2**20
# Rows of the allowance the autograd floor is added to at once.
FLOOR_ROWS = 256
# The noise probe: f at x + t·δ·p for t = ±1, ..., ±NOISE_REACH on NOISE_LINES random lines p (16 points,
# in the first batch). Two lines of nine points: for white noise, an estimate from one line falls below a
# quarter of the true noise about once in a thousand checks (measured), the larger of two independent ones
# about once in a million.
NOISE_REACH = 4
NOISE_LINES = 2
# Measured noise σ counts as a bound of NOISE_BOUND·σ on one evaluation's rounding (uniform noise of
# amplitude A has σ = A/√3).
NOISE_BOUND = 3.0

REASONS = {
    "non-finite": "autograd gave nan or inf where f is finite at x ± h and the estimate is finite: the "
                  "derivative there is a finite number (NaN in a backward is usually 0/0 at a removable "
                  "singularity, 0·log 0, or an overflowing untaken branch of torch.where)",
    "infinite": "autograd gave inf and the estimate does not settle on a finite value (or is the same "
                "infinity): f may have a vertical tangent at x, and an infinite slope is not one a difference "
                "quotient can confirm; check at another point",
    "kink": "one-sided differences disagree at every step: f is not differentiable at x, or a kink lies "
            "within h of it; check at another point",
    "domain": "f is not finite at x ± h for every step tried: x is on the edge of f's domain; check at an "
              "interior point",
    "unconfirmed": "autograd is outside the chosen estimate's allowance, but no independent estimate (a window "
                   "sharing none of its steps) resolves the mismatch and sides with it: one window of several can "
                   "agree with its neighbours by chance (f's rounding noise, or an oscillation aliased at coarse "
                   "steps); {remedy}",
    "unstable": "estimates at coarse and fine steps disagree, or f is flat between jumps at a fine scale: f "
                "varies on a scale near the step (a staircase such as round, or a fast oscillation); check at "
                "another point",
    "imprecise": "the estimate's uncertainty (its error and f's rounding noise divided by the step) stays "
                 "above {resolution:g} of the entry's scale at every step tried; {remedy}",
    "tolerance": "the estimate's uncertainty is too large to tell whether autograd is within the atol and rtol "
                 "given; loosen them, or {remedy}",
}


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
    verdict: ElementVerdict
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
    requested    -- the mode asked for; differs from mode when forward mode was not supported
    note         -- why a fallback happened ("" when none)
    error        -- per element, the Richardson error estimate of the chosen window (built when first read)
    steps        -- per element, the finest step of the chosen window (built when first read)
    details      -- builds error and steps: for a large Jacobian each table costs what an evaluation of f does
    levels       -- per column, how many steps were tried (FIRST_LEVELS, 4, for a smooth f: the first batch)
    kink, domain, unstable, unconfirmed, converged -- per element: a kink found; no finite estimate at any
                    step; a mismatch that a window at smaller steps contradicts; a mismatch no independent
                    window confirms; allowed small enough to judge
    noise        -- per output, the bound on one evaluation's rounding error the allowances used: the
                    larger of ε·(|f_i| + Σ|J_ik||x_k|) and NOISE_BOUND × the noise measured at x
    amplification -- the largest ratio of measured noise to ε·(|f_i| + Σ|J_ik||x_k|) over the outputs:
                    above 1 where f amplifies its own rounding
    safety       -- the allowance factor over the uncertainty
    arguments    -- the checked inputs, named, with their shapes (a complex `z` as `z.real` and `z.imag`; a
                    sample's positions)
    evaluations  -- every evaluation of f: the estimate's, the noise probe's, the kink test's, f(x) and
                    autograd's forward (the property checks add one forward of their own, not counted)
    seconds      -- wall time of the whole check
    outputs      -- the differentiable outputs, named and placed among the rows
    skipped      -- the arguments and outputs held fixed (no gradient: integers, bools, non-tensors)
    call         -- f with its argument names, as the messages show it: "f(x, weight, bias)"
    order        -- 1, or 2: the Jacobian of f's vector–Jacobian product (second derivatives)
    seed         -- the seed of every random draw (a sample's elements, order 2's grad_output, the property
                    checks' vectors)
    tolerance    -- the caller's atol/rtol (a Tolerance whose reason says so), or None: the estimate's own
    properties   -- the property checks beside the Jacobian (checks.core.properties), each per element
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
    converged: torch.Tensor
    noise: torch.Tensor
    amplification: float
    safety: float
    mode: Mode
    method: str
    requested: Mode
    note: str
    dtype: str
    device: str
    arguments: tuple[Argument, ...]
    output_shape: tuple[int, ...]
    evaluations: int
    seconds: float
    resolution: float
    outputs: tuple[Argument, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    call: str = ""
    order: int = 1
    seed: int | None = None
    tolerance: Tolerance | None = None
    properties: tuple[PropertyCheck, ...] = ()
    projections: Projections | None = None

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

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.arguments[0].shape if len(self.arguments) == 1 else (self.autograd.shape[1],)

    # Cached: a report is immutable, and outcome, summary and message each read these masks.
    @cached_property
    def difference(self) -> torch.Tensor:
        return _difference(self.autograd, self.numerical)

    @cached_property
    def _finite(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Where autograd, and the estimate, are finite."""
        return _finite(self.autograd), _finite(self.numerical)

    @cached_property
    def nonfinite(self) -> torch.Tensor:
        """Elements where autograd is wrong by not being finite: NaN where the estimate is finite, or ±inf
        where the estimate converged to a finite value. Caught before any allowance is consulted."""
        autograd, numerical = self._finite
        settled = self.converged & ~self.kink & ~self.unstable
        nan = torch.from_numpy(np.isnan(self.autograd.numpy()))
        return numerical & (nan | (~autograd & ~nan & settled))

    @cached_property
    def mismatch(self) -> torch.Tensor:
        """Failed elements: non-finite where they must be finite, or outside their allowance away from kinks
        (an allowance too wide to judge a pass can still be exceeded: autograd is then wrong by even more).
        With a tolerance given: outside it for every value the estimate allows (see _against_tolerance)."""
        if self.tolerance is not None:
            return self._against_tolerance[0]
        finite = self._finite[0] & self._finite[1]
        outside = finite & (self.difference > self.allowed) & ~self.kink & ~self.unstable & ~self.unconfirmed
        return self.nonfinite | outside

    @cached_property
    def agreed(self) -> torch.Tensor:
        """Passed elements, established positively: both values and the allowance finite, the difference
        within the allowance, the estimate converged (or equal to autograd exactly), no kink, no instability.
        A NaN anywhere makes one of these comparisons false, so it can never pass."""
        if self.tolerance is not None:
            return self._against_tolerance[1]
        finite = self._finite[0] & self._finite[1] & _finite(self.allowed)
        exact = self.autograd == self.numerical
        return finite & (self.difference <= self.allowed) & (self.converged | exact) & ~self.kink & ~self.unstable

    @cached_property
    def inconclusive(self) -> torch.Tensor:
        """Elements the evidence cannot judge (a kink, f not finite near x, an infinite autograd that the
        estimate cannot confirm, or an unconverged estimate): neither failed nor established."""
        return ~self.mismatch & ~self.agreed

    @property
    def given_allowed(self) -> torch.Tensor:
        """Per element, what the caller's atol and rtol allow: atol + rtol·|numerical| (as allclose)."""
        if self.tolerance is None:
            raise CheckInputError("no atol or rtol was given to this check: its allowance is the estimate's own "
                                  "(`allowed`)")
        return self.tolerance.atol + self.tolerance.rtol * self.numerical.abs()

    @cached_property
    def _against_tolerance(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mismatch, agreed) against the caller's tolerance. The true derivative lies within the estimate's
        allowance of it, so autograd's distance from it lies within that allowance of the difference: a pass
        needs difference + allowance inside the tolerance, a fail difference - allowance outside it (and
        confirmed, as without a tolerance); the rest is inconclusive. Exact agreement passes, as without a
        tolerance (an entry of 0 that both find, where f_i does not depend on x_j, would otherwise need an
        atol). A NaN or inf is judged as without a tolerance: it never passes."""
        blind = self.kink | self.domain | self.unstable
        finite = self._finite[0] & self._finite[1]
        given = self.given_allowed
        outside = finite & (self.difference > given + self.allowed) & ~blind & ~self.unconfirmed
        inside = (self.difference + self.allowed <= given) | (self.autograd == self.numerical)
        return self.nonfinite | outside, finite & inside & ~blind

    @cached_property
    def outcome(self) -> Outcome:
        """"fail" where an element is outside its allowance or a property check failed; else "inconclusive"
        where an element could not be judged; else "pass"."""
        if bool(self.mismatch.any()) or any(check.outcome == "fail" for check in self.properties):
            return "fail"
        return "inconclusive" if bool(self.inconclusive.any()) else "pass"

    @property
    def passed(self) -> bool:
        """Every element judged and within its allowance. Not passed is not failed: see outcome."""
        return self.outcome == "pass"

    @property
    def failed(self) -> bool:
        """Some element is wrong, or a property check failed: see outcome."""
        return self.outcome == "fail"

    @property
    def kinks(self) -> int:
        return int((self.kink & ~self.mismatch).sum())

    def reason(self, i: int, j: int) -> str:
        if self.nonfinite[i, j]:
            return "non-finite"
        if not self.inconclusive[i, j]:
            return ""
        autograd, numerical = float(self.autograd[i, j]), float(self.numerical[i, j])
        if self.kink[i, j]:
            return "kink"
        if not math.isfinite(numerical):
            return "infinite" if autograd == numerical else "domain"
        if self.unstable[i, j]:
            return "unstable"
        if self.unconfirmed[i, j]:
            return "unconfirmed"
        if not math.isfinite(autograd):
            return "infinite"
        return "tolerance" if self.tolerance is not None else "imprecise"

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
        """Why an element could not be judged (a key of REASONS: "kink", "domain", ...), and what would settle
        it."""
        remedy = "check in float64" if self.dtype == "float32" else \
            "check at another point, or rescale f so that it does not vary on a scale near ε"
        return REASONS[reason].format(resolution=self.resolution, remedy=remedy)

    def argument_of(self, column: int) -> Argument:
        return next(a for a in reversed(self.arguments) if a.offset <= column)

    def elements(self) -> list[Element]:
        """The per-element report, row by row (output index, then column)."""
        mismatch, inconclusive, detectable = self.mismatch, self.inconclusive, self.detectable
        allowed = self.allowed if self.tolerance is None else self.given_allowed
        rows = []
        for i in range(self.autograd.shape[0]):
            for j in range(self.autograd.shape[1]):
                verdict = "fail" if mismatch[i, j] else "inconclusive" if inconclusive[i, j] else "pass"
                argument = self.argument_of(j)
                relative = float(detectable[i, j])
                rows.append(Element(i, j, argument.name, argument.index(j), float(self.autograd[i, j]),
                                    float(self.numerical[i, j]), float(self.error[i, j]), float(allowed[i, j]),
                                    float(self.steps[i, j]), verdict, self.reason(i, j),
                                    None if math.isnan(relative) else relative, float(self.allowed[i, j])))
        return rows

    def frame(self):
        """The per-element report as a table (pandas), with the dtype and device of the check beside."""
        import pandas as pd

        several = len(self.arguments) > 1
        return pd.DataFrame([
            # The verdict first: on a phone the rest of the row scrolls, the verdict stays in view.
            {"verdict": e.verdict, "why": e.reason, "output": e.output,
             **({"argument": e.argument, "index": str(e.index)} if several else {"input": e.input}),
             "autograd": e.autograd, "numerical": e.numerical, "error estimate": e.error_estimate,
             "allowed": e.allowed, "dtype": self.dtype, "device": self.device, "mode": self.mode}
            for e in self.elements()
        ])

    def summary(self) -> str:
        """One line: the outcome, how many elements failed or could not be judged, mode, dtype, device."""
        total = self.autograd.numel()
        failed, unsure = int(self.mismatch.sum()), int(self.inconclusive.sum())
        unit = "elements" if self.projections is None else "projections"
        nonfinite = int(self.nonfinite.sum())
        elements = f"{failed} of {total} {unit} outside their allowance"
        if nonfinite:
            kinds = {"nan" if math.isnan(value) else "inf" for value in self.autograd[self.nonfinite].tolist()}
            elements += f" ({nonfinite} of them {' or '.join(sorted(kinds))} in autograd where the estimate is finite)"
        wrong = [elements] if failed else []
        wrong += [f"{check.name} failed" for check in self.properties if check.outcome == "fail"]
        state = {"pass": "passed",
                 "fail": "failed: " + ", ".join(wrong),
                 "inconclusive": f"inconclusive: {unsure} of {total} {unit} could not be judged"}[self.outcome]
        if self.outcome == "fail" and unsure:
            state += f", {unsure} could not be judged"
        kinks = f", {self.kinks} at a kink" if self.kinks else ""
        order = "second order, " if self.order == 2 else ""
        order += "fast: projections, " if self.projections is not None else ""
        return (f"{state}{kinks} ({order}{self.mode} mode, {self.dtype}, {self.device}, "
                f"{self.evaluations} evaluations of f)")

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
        """An element named by input and index, and by output and index (fast mode: the projection of an
        input and an output)."""
        if self.projections is not None:
            output = next(o for o in reversed(self.outputs) if o.offset <= element.output)
            return f"the projection of input `{element.argument}` and {output.name}"
        return f"input `{element.argument}`, element {element.index}, {self.output_label(element.output)}"

    def wrong_gradients(self) -> str:
        """The backward that is wrong, by input: "the gradient with respect to input `b` is wrong" ("" if
        none)."""
        wrong = list(dict.fromkeys(self.argument_of(int(j)).name for j in self.mismatch.any(0).nonzero()[:, 0]))
        if not wrong:
            return ""
        names = " and ".join(", ".join(f"`{name}`" for name in wrong).rsplit(", ", 1))
        several = len(wrong) > 1
        if self.order == 2:
            return (f"the derivative{'s' * several} of the vector–Jacobian product with respect to "
                    f"input{'s' * several} {names} {'are' if several else 'is'} wrong (f's double backward)")
        return (f"the gradient{'s' * several} with respect to input{'s' * several} {names} "
                f"{'are' if several else 'is'} wrong")

    def message(self, limit: int = 3) -> str:
        """A torch.testing.assert_close-style account: what differed, where, by how much, what was allowed;
        which gradient is wrong; the worst `limit` elements."""
        total = self.autograd.numel()
        signature = self.call or f"f({', '.join(a.name for a in self.arguments)})"
        how = f"{self.method} ({self.mode} mode)"
        elements = self.elements()
        wrong = [e for e in elements if e.verdict == "fail"]
        unsure = [e for e in elements if e.verdict == "inconclusive"]
        head = {"fail": "are not close!", "inconclusive": "could not be judged!", "pass": "are close."}
        if any(check.outcome == "fail" for check in self.properties) and not wrong:
            head["fail"] = "are close, but a property check failed!"
        what = "Gradients" if self.order == 1 else "Second derivatives"
        lines = [f"{what} of {signature} {head[self.outcome]} ({self.dtype}, {self.device})"]
        if wrong:
            lines.append(f"Mismatched elements: {len(wrong)} / {total} ({100 * len(wrong) / total:.1f}%): "
                         f"{self.wrong_gradients()}")
        # A NaN or inf has no difference to rank: such elements are listed first, on their own.
        nonfinite = [e for e in wrong if e.reason == "non-finite"]
        if nonfinite:
            lines.append(f"Not finite: {len(nonfinite)} element{'s' * (len(nonfinite) > 1)} where autograd gave nan "
                         f"or inf and the estimate is finite:")
            for e in nonfinite[:limit]:
                lines.append(f"  {self.where(e)}: autograd gave {e.autograd:g} where the estimate is finite "
                             f"({e.numerical:.10g} ± {e.allowed:.2g})")
            if len(nonfinite) > limit:
                lines.append(f"  and {len(nonfinite) - limit} more")
        finite = [e for e in wrong if e.reason != "non-finite"]
        if finite:
            def relative(e: Element) -> float:
                return e.difference / abs(e.numerical) if e.numerical else float("inf")

            absolute, worst_relative = max(finite, key=lambda e: e.difference), max(finite, key=relative)
            lines += [
                f"Greatest absolute difference: {absolute.difference:.3g} at {self.where(absolute)} "
                f"(up to {absolute.allowed:.3g} allowed)",
                f"Greatest relative difference: {relative(worst_relative):.3g} at {self.where(worst_relative)} "
                f"(up to {worst_relative.allowed / abs(worst_relative.numerical or 1):.3g} allowed)",
            ]
            # The worst first; the count of the rest is in the "Mismatched elements" line.
            for e in sorted(finite, key=lambda e: -e.difference / e.allowed if e.allowed else -math.inf)[:limit]:
                lines.append(f"  {self.where(e)}: autograd {e.autograd:.10g} vs numerical {e.numerical:.10g}, "
                             f"difference {e.difference:.3g} (up to {e.allowed:.3g} allowed)")
        if unsure:
            lines.append(f"Elements not judged: {len(unsure)} / {total}")
            for reason in dict.fromkeys(e.reason for e in unsure):
                mine = [e for e in unsure if e.reason == reason]
                lines.append(f"  {reason}: {self.explain(reason)}")
                for e in mine[:limit]:
                    lines.append(f"    {self.where(e)}: autograd {e.autograd:.6g}, numerical {e.numerical:.6g} "
                                 f"± {e.supported:.2g}")
                if len(mine) > limit:
                    lines.append(f"    and {len(mine) - limit} more")
        for check in self.properties:
            lines += check.message()
        detectable = self.detectable_relative_error
        # A failure says what was allowed where it failed; a pass or an inconclusive says what it could catch.
        if detectable is not None and not wrong:
            lines.append(f"Detectable: autograd off by a relative error above {detectable:.3g} fails in every judged "
                         f"element (the largest allowed / |numerical| among them)")
        if self.amplification > 1:
            lines.append(f"f amplifies its own rounding: its noise, measured at x, is up to {self.amplification:.3g} × "
                         f"ε·(|f| + Σ|J||x|) (an ill-conditioned solve, or cancellation); the allowances include it")
        allowed = f"{self.safety:g} × (its error estimate + f's rounding noise / step)" if self.tolerance is None else \
            (f"atol + rtol·|numerical| (atol={self.tolerance.atol:g}, rtol={self.tolerance.rtol:g}, given) beyond "
             f"the estimate's own allowance")
        if self.order == 2:
            how += (" of f's vector–Jacobian product J(x)ᵀ·v, v (`grad_output`) uniform in [-1, 1] with seed "
                    f"{self.seed}")
        if self.projections is not None:
            lines.append(f"Fast mode: {self.projections.describe()}. A fail says that some element of the block "
                         f"is wrong, not which: rerun without fast=True to find it.")
        lines.append(f"Autograd by {how}; numerical by Richardson-extrapolated central differences at steps "
                     f"chosen per element ({int(self.levels.max())} steps tried at most), each element allowed "
                     f"{allowed}; {self.evaluations} evaluations of f.{self._held()}")
        return "\n".join(lines)

    def _held(self) -> str:
        """What the check left out: arguments held fixed, elements not sampled ("" when nothing)."""
        words = ""
        if self.skipped:
            words += f" Held fixed (no gradient): {', '.join(s.describe() for s in self.skipped)}."
        sampled = [a for a in self.arguments if a.positions is not None]
        if sampled:
            words += (f" Checked a random sample (seed {self.seed}): "
                      + ", ".join(f"{a.numel} of {a.size} elements of `{a.name}`" for a in sampled) + ".")
        return words


def check_jacobian(
    f: Function,
    *inputs: object,
    mode: Mode = "reverse",
    order: int = 1,
    atol: float | None = None,
    rtol: float | None = None,
    sample: int | None = None,
    seed: int = 0,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_batched_grad: bool = False,
    step: float | None = None,
    safety: float = SAFETY,
    resolution: float = RESOLUTION,
    kinks: bool = True,
    names: Sequence[str] | None = None,
    fast: bool = False,
) -> CheckReport:
    """Compare autograd's Jacobian of f at the inputs with an adaptive Richardson estimate.

    A mismatch is a report, not a raise (assert_gradients raises). f takes the inputs and returns a tensor
    or a tuple of tensors. Real floating-point tensors (float32, float64; all checked ones of one dtype and
    device) are checked element by element; a complex tensor by its real and imaginary parts (the
    Wirtinger derivatives, as gradcheck checks them); integer and bool tensors and non-tensor arguments are
    held fixed and named in the report (skipped), as are integer outputs in a tuple.

    mode       -- "reverse" (plain autograd: torch.autograd.grad) or "forward" (forward-mode derivatives,
                  as gradcheck's check_forward_ad: torch.func.jacfwd, or dual numbers of
                  torch.autograd.forward_ad where torch.func cannot transform f); where f has no forward-mode
                  derivative at all (a custom Function without jvp) the check falls back to reverse mode,
                  and the report's mode and note say so
    order      -- 1 (the Jacobian), or 2: the Jacobian of the vector–Jacobian product J(x)ᵀ·v with respect to
                  the inputs and v (random, from seed), as gradgradcheck: autograd differentiates the
                  backward again (reverse mode: reverse-over-reverse; forward: forward-over-reverse)
    atol, rtol -- a tolerance of your own: each element allowed atol + rtol·|numerical| (a missing one is 0).
                  Judged against the estimate's own uncertainty, recorded beside it: a pass needs autograd
                  within the tolerance however the estimate errs, a fail outside it; NaN never passes
    sample     -- check this many elements of each input, drawn at random with seed (the rest held fixed)
    seed       -- seeds every random draw (sample, order 2's v, the property checks' vectors); in the report
    nondet_tol -- how far two backward passes over one graph may differ (the reentrancy check, as
                  gradcheck's nondet_tol; 0: exactly equal)
    check_undefined_grad -- check the backward with undefined (None) output gradients, as gradcheck does
    check_batched_grad   -- check that vmap over the backward (is_grads_batched) agrees with a loop
    step       -- the relative start step h0 (default ε^(1/7)); smaller steps follow where needed
    safety     -- the allowance factor over the uncertainty
    resolution -- an element is judged only when its allowance is at most this fraction of its scale
    kinks      -- run the one-sided kink test (from the same evaluations: no extra cost)
    names      -- the inputs' names (default: f's parameter names)
    fast       -- compare random projections vᵀ·J·u, one per input and output, instead of every element, as
                  gradcheck's fast_mode (checks.core.fast): a few evaluations of f per input, whatever its
                  size; the report's elements are then projections, and a fail says which input's gradient
                  is wrong but not where (rerun without fast to find it)
    """
    if mode not in MODES:
        raise CheckInputError(f"mode={mode!r} is not an autograd mode; use one of {MODES}")
    integer(order, "order (1: the Jacobian; 2: second derivatives)", minimum=1, maximum=2)
    tolerance = _given_tolerance(atol, rtol)
    if sample is not None:
        integer(sample, "sample (elements checked per input)", minimum=1)
    integer(seed, "seed", minimum=0)
    number(nondet_tol, "nondet_tol", minimum=0)
    flag(check_undefined_grad, "check_undefined_grad")
    flag(check_batched_grad, "check_batched_grad")
    number(safety, "safety (a factor over the error estimate)", minimum=1)
    flag(kinks, "kinks")
    flag(fast, "fast (random projections instead of every element)")
    if not (isinstance(resolution, (int, float)) and 0 < resolution < 1):
        raise CheckInputError(f"resolution must be a fraction between 0 and 1, got {resolution!r}")
    start = time.perf_counter()
    first = Signature(f, inputs, names, sample=sample, seed=seed)
    g = first if order == 1 else SecondOrder(first, seed)
    if not torch.isfinite(g.value).all():
        raise NaNInputError(f"{g.call} is not finite at {g.shown()}: the Jacobian there is undefined")
    # Fast mode checks the projections' Jacobian instead; the property checks below still run on g itself.
    checked = Projection(g, seed) if fast else g
    arguments, x, value = checked.arguments, checked.x, checked.value
    memory(value.numel() * x.numel() * 8, f"autograd's Jacobian of {value.numel()} outputs by {x.numel()} inputs",
           "it is held whole in float64 beside a numerical one of the same size; check a smaller x, or "
           "sample=k elements of each input")
    require_memory(x, "richardson")
    # Fast mode in reverse mode projects f's own vector–Jacobian products, on the graph the property checks
    # use too (one forward for both).
    graph = Graph.of(g) if fast and mode == "reverse" else None
    jacobian, used, method, note = projected_gradients(graph, checked) if graph is not None else \
        _autograd_jacobian(checked, x, mode, value.numel(), order)
    eps, tiny = machine_epsilon(x.dtype), float(torch.finfo(x.dtype).tiny)
    # ε^(1/7), the optimum of a window of three steps (T22, truncation of order h⁶); smaller steps follow
    # where an element needs them.
    h0 = default_step("richardson", x.dtype, 3).h0 if step is None else _relative_step(step)
    evaluate = _Evaluator(checked.at_points, x, None, scalar=False, reference=value)
    # Fast mode settles for √ε: one batch of steps where the projection is smooth.
    search = _Search(evaluate, x, value, h0, eps, tiny, safety, resolution,
                     checked.rounding_scale if fast else None, math.sqrt(eps) if fast else None)
    search.run()
    # f's relative noise: ε for an accurately computed f, more where it amplifies its rounding (and so does
    # its backward, through the same operations; and f's noise at x ± h grows with |f(x ± h)|, an error of
    # the same relative size in the estimate).
    relative_noise = eps * max(1.0, search.amplification())
    numerical, allowed, converged = search.result()
    _add_autograd_floor(allowed, jacobian, numerical, relative_noise, safety)
    # A failure must survive smaller steps: a staircase (round) or a fast oscillation can fool one window
    # into converging to a slope f does not have, and among many windows of a noisy f one can agree with its
    # neighbours by chance. Columns with a mismatch get every smaller step that could still resolve it;
    # where the chosen and that finest (witness) window disagree, neither is believed (unstable), and a
    # mismatch no independent window confirms is not believed either (unconfirmed).
    difference = _difference(jacobian, numerical)
    # A non-finite autograd value is judged without an allowance (CheckReport.nonfinite): no step can settle it.
    suspect_elements = _finite(numerical)
    suspect_elements &= _finite(jacobian)
    suspect_elements &= difference > allowed
    suspect = suspect_elements.any(0)
    unstable = unconfirmed = torch.zeros_like(converged)
    if suspect.any():
        search.confirm(torch.where(suspect_elements, difference, torch.zeros_like(difference)))
        numerical, allowed, converged = search.result()
        _add_autograd_floor(allowed, jacobian, numerical, relative_noise, safety)
        finest, finest_allowed = search.finest()
        unstable = (numerical - finest).abs() > allowed + finest_allowed
        # On a staircase both 0 (each stair's slope, autograd's for round) and the slope across stairs (the
        # estimate's) are defensible; any other value is wrong at both scales, and is judged as usual.
        flats = torch.from_numpy(search.staircase).unsqueeze(1) & (jacobian == 0)
        unstable |= flats & ((jacobian - numerical).abs() > allowed)
        unstable &= suspect.unsqueeze(0)
        # The chosen window is the least uncertain of several, and one of them can agree with its neighbours
        # by chance (a coarse window of a fast oscillation aliased into a smooth-looking tableau, a noisy f).
        # An independent window, sharing no step with it, confirms the mismatch when it can resolve it (its
        # uncertainty at most the mismatch) and its value sides with the chosen estimate, not with autograd.
        independent, spread = search.independent()
        mismatch = difference = _difference(jacobian, numerical)
        sides = (jacobian - independent).abs() > (numerical - independent).abs()
        unconfirmed = suspect.unsqueeze(0) & (mismatch > allowed) & ~(sides & (spread <= mismatch))
    domain = ~_finite(numerical)
    kink = torch.zeros_like(domain)
    if kinks:
        kink = search.kinks(search.chosen_window())
        if suspect.any():
            # A jump closer to x than the chosen steps (round near its boundary) shows at the witness steps.
            kink |= search.kinks(search.finest_window()) & suspect.unsqueeze(0)
        kink &= ~domain
    evaluations = evaluate.count + 2  # plus f(x) above and autograd's own forward
    note = "; ".join(filter(None, [note, evaluate.note]))
    properties = (unmutated(first.names, first.before, first.after),
                  *_derivative_properties(g, used, seed, nondet_tol, check_undefined_grad, check_batched_grad, graph))
    return CheckReport(
        autograd=jacobian, numerical=numerical, allowed=allowed, details=search.details,
        levels=torch.from_numpy(search.tried.copy()), kink=kink, domain=domain, unstable=unstable & ~domain,
        unconfirmed=unconfirmed & ~domain, converged=converged & ~domain, noise=torch.from_numpy(search.noise()),
        amplification=search.amplification(), safety=float(safety), mode=used, method=method, requested=mode,
        note=note, dtype=dtype_name(x.dtype), device=x.device.type,
        arguments=arguments, output_shape=tuple(value.shape) if len(g.outputs) > 1 or fast else g.outputs[0].shape,
        evaluations=evaluations, seconds=time.perf_counter() - start, resolution=resolution,
        outputs=checked.outputs, skipped=g.skipped, call=g.call, order=order, seed=seed, tolerance=tolerance,
        properties=properties, projections=checked.projections if fast else None,
    )


def _given_tolerance(atol: object, rtol: object) -> Tolerance | None:
    """The caller's atol/rtol as a Tolerance that says whose it is; None when neither was given."""
    if atol is None and rtol is None:
        return None
    atol = 0.0 if atol is None else number(atol, "atol", minimum=0)
    rtol = 0.0 if rtol is None else number(rtol, "rtol", minimum=0)
    if rtol >= 1:
        raise CheckInputError(f"rtol={rtol!r} allows a difference as large as the gradient itself: a zero (or "
                              f"sign-flipped) gradient would pass; use rtol < 1")
    return Tolerance(rtol=rtol, atol=atol, reason=f"given by the caller (atol={atol:g}, rtol={rtol:g}); checked "
                                                  f"against the estimate's own uncertainty")


def _derivative_properties(g: Signature | SecondOrder, mode: Mode, seed: int, nondet_tol: float,
                           undefined: bool, vectorized: bool, graph: Graph | None = None) -> tuple[PropertyCheck, ...]:
    """The property checks of the derivatives the check used: reentrancy and undefined output gradients of
    the backward (reverse mode); undefined tangents (forward mode, first order: second order's tangents
    enter f's backward through one flat vector); batched gradients on request (either mode)."""
    checks = []
    if mode == "forward":
        if undefined and isinstance(g, Signature):
            checks.append(undefined_tangents(g, seed))
        if vectorized:
            checks.append(batched_forward(g, seed))
        return tuple(checks)
    graph = Graph.of(g) if graph is None else graph
    checks.append(reentrant(graph, seed, nondet_tol))
    if undefined:
        checks.append(undefined_gradients(graph, seed))
    if vectorized:
        checks.append(batched(graph, seed))
    return tuple(checks)


class _Search:
    """The adaptive step search: central differences at h0·max(|x|, 1)·2^-k, column by column.

    Its bookkeeping is numpy float64 on the CPU: each torch operation on the tables would cost more in
    dispatch than in arithmetic; f is evaluated in torch, on x's device, in x's dtype.

    The tables are sparse: they hold the elements (column j, output i) at which f_i changed when x_j was
    perturbed, at some step tried (f_i(x ± h e_j) ≠ f_i(x); NaN counts as a change), and the elements a
    mismatch added. Every other element is flat: its central differences and one-sided gaps are exactly 0
    at every step, so its estimate is 0 with error 0, its uncertainty the rounding at its column's first
    window, and it has no kink; it is filled in where a dense (outputs, inputs) result is asked for. An
    elementwise f has n such elements of n², a Linear layer's output one row of weights per element: the
    tables then cost what the Jacobian's non-zeros cost, not n·m per step. A flat element cannot improve at
    smaller steps (its rounding only grows), so it neither keeps its column searching nor stops it.
    """

    def __init__(self, evaluate: _Evaluator, x: torch.Tensor, value: torch.Tensor, h0: float, eps: float,
                 tiny: float, safety: float, resolution: float, base: np.ndarray | None = None,
                 precision: float | None = None) -> None:
        """base: per output, the size of what it is computed from besides the Jacobian's share Σ_k |J_ik|·|x_k|
        (default |f_i(x)|; a sum of many terms, as a projection is, passes the sum of their sizes).
        precision: the relative uncertainty at which a column stops improving (default ε^(2/3), as good as a
        smooth f gives)."""
        self.evaluate, self.eps, self.tiny = evaluate, eps, tiny
        self.safety, self.resolution = safety, resolution
        self.precision = eps ** (2 / 3) if precision is None else precision
        self.device = x.device
        self.x = x.detach().reshape(-1).cpu().numpy()  # in x's dtype: the points are built from it
        self.value = value.detach().to(torch.float64).reshape(-1).cpu().numpy()
        self.base = np.abs(self.value) if base is None else base
        self.magnitude = np.abs(self.x.astype(np.float64))
        n, m = self.x.size, self.value.size
        self.n, self.m = n, m
        self.size = np.maximum(self.magnitude, 1.0)
        self.h0 = h0
        floor = eps ** 0.75
        self.max_levels = max(FIRST_LEVELS, math.ceil(math.log2(h0 / floor)) + 1)
        # The elements held, as keys column·m + output, sorted (so that a column's elements are contiguous,
        # from starts[j] to starts[j + 1]); per level (NaN where not computed) their central differences and
        # the gaps between one-sided differences |f(x + h) + f(x - h) - 2 f(x)| / h = |D+ - D-|, which the
        # kink test reads from the same evaluations, (level, element); the steps (level, n).
        self.keys = np.empty(0, dtype=np.int64)
        self._index()
        self.differences = np.full((FIRST_LEVELS, 0), np.nan)
        self.gaps = np.full((FIRST_LEVELS, 0), np.nan)
        self.h = np.full((FIRST_LEVELS, n), np.nan)
        self.levels = np.zeros(n, dtype=np.int64)  # per column, one past its finest level
        self.tried = np.zeros(n, dtype=np.int64)  # per column, how many steps were evaluated
        self.active = np.ones(n, dtype=bool)
        self.witness = np.full(n, -1, dtype=np.int64)  # per column, the window confirm() checks against
        self.depth = 0  # levels computed for at least one column
        self.measured = np.zeros(m)  # per output, the measured noise bound (set by the first batch)
        self.staircase = np.zeros(m, dtype=bool)  # per output, flat between jumps on the probe
        # The windows and the choice for the tables as they stand (recomputed after each level).
        self._windows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._chosen: tuple | None = None

    def _index(self) -> None:
        """Each held element's column and output, and where each column's elements start."""
        self.columns, self.rows = np.divmod(self.keys, self.m)
        self.starts = np.searchsorted(self.keys, np.arange(self.n + 1, dtype=np.int64) * self.m)

    def _hold(self, keys: np.ndarray) -> None:
        """Add elements (keys column·m + output) to the tables: 0 at the levels their column has computed (f_i
        did not change there), NaN elsewhere."""
        # By sorting and searchsorted: numpy's setdiff1d and union1d hash, and hashing these keys is slow.
        new = np.sort(keys)
        new = new[np.concatenate([[True], new[1:] != new[:-1]])] if new.size else new
        held = np.searchsorted(self.keys, new)
        new = new[(held == self.keys.size) | (self.keys[np.minimum(held, self.keys.size - 1)] != new)] \
            if self.keys.size else new
        if not new.size:
            return
        merged = np.sort(np.concatenate([self.keys, new]))
        old, added = np.searchsorted(merged, self.keys), np.searchsorted(merged, new)
        computed = np.where(np.isfinite(self.h[:, new // self.m]), 0.0, np.nan)
        for name in ("differences", "gaps"):
            table = np.full((self.h.shape[0], merged.size), np.nan)
            table[:, old] = getattr(self, name)
            table[:, added] = computed
            setattr(self, name, table)
        self.keys = merged
        self._index()
        self._chosen, self._windows = None, None

    def run(self) -> None:
        # One batch: the steps a smooth f needs (two windows, each judged against the other) and the noise
        # probe; then the columns not yet settled, LATER_LEVELS steps per batch (a call of f costs more
        # than its points).
        probe = self._probe_points()
        samples = self._levels(tuple(range(FIRST_LEVELS)), np.flatnonzero(self.active), probe)
        self._measure_noise(samples)
        self._stop_judged_columns(FIRST_LEVELS - 1)
        for first in range(FIRST_LEVELS, self.max_levels, LATER_LEVELS):
            columns = np.flatnonzero(self.active)
            if columns.size == 0:
                break
            levels = tuple(range(first, min(first + LATER_LEVELS, self.max_levels)))
            self._levels(levels, columns)
            self._stop_judged_columns(levels[-1])

    def _levels(self, levels: tuple[int, ...], columns: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
        """Central differences at the given levels for the given columns, evaluated as one batch (with the
        extra points, whose values are returned)."""
        return self._pairs(np.repeat(np.asarray(levels, dtype=np.int64), columns.size), np.tile(columns, len(levels)),
                           extra)

    def _probe_points(self) -> np.ndarray:
        """Points x + t·δ·p, t = ±1, ..., ±NOISE_REACH, on each of NOISE_LINES fixed random lines p (|p_j| in
        [1/2, 1], random signs), δ = ε^(2/3)·max(|x_j|, 1): far below the scale of the steps, yet many units
        in the last place of x, so that each point rounds differently. Seeded: a check is deterministic."""
        generator = np.random.default_rng(0)
        n = self.x.size
        offsets = np.concatenate([np.arange(-NOISE_REACH, 0), np.arange(1, NOISE_REACH + 1)])
        lines = []
        for _ in range(NOISE_LINES):
            direction = generator.choice((-1.0, 1.0), n) * generator.uniform(0.5, 1.0, n)
            step = self.eps ** (2 / 3) * self.size * direction
            lines.append(self.x.astype(np.float64)[None, :] + offsets[:, None] * step[None, :])
        return np.concatenate(lines).astype(self.x.dtype)

    def _measure_noise(self, samples: np.ndarray) -> None:
        """f's rounding noise per output (ECnoise on each line, the larger of the lines), as a bound:
        NOISE_BOUND standard deviations; and the outputs that are staircases at the probe's scale."""
        lines = samples.reshape(NOISE_LINES, 2 * NOISE_REACH, -1)
        centre = np.broadcast_to(self.value, (NOISE_LINES, 1, self.value.size))
        # t = -NOISE_REACH, ..., NOISE_REACH in order, f(x) itself in the middle.
        ordered = np.concatenate([lines[:, :NOISE_REACH], centre, lines[:, NOISE_REACH:]], axis=1)
        sigma = np.fmax.reduce(noise_level(ordered), axis=0)
        # Not finite: f left its domain on the probe; the a-priori rounding model stands alone.
        self.measured = NOISE_BOUND * np.where(np.isfinite(sigma), sigma, 0.0)
        # A staircase (round) is flat between jumps: most of its values at distinct points are equal, and the
        # rest jump, all one way. Its "noise" is structure: autograd's 0 holds on each stair, the differences'
        # slope across them. (Rounding noise that large intermediates quantize jumps both ways.)
        steps = np.diff(ordered, axis=1)
        flat = (steps == 0).sum(1) * 2 >= steps.shape[1]  # per line and output
        one_way = (steps > 0).any(1) != (steps < 0).any(1)
        self.staircase = (flat & one_way).any(0)

    def amplification(self) -> float:
        """The largest ratio, over the outputs, of the measured noise bound to ε·scale_i (0 where none)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.measured / (self.eps * self.scale())
        ratio = ratio[np.isfinite(ratio)]
        return float(ratio.max()) if ratio.size else 0.0

    def noise(self, scale: np.ndarray | None = None) -> np.ndarray:
        """Per output, a bound on the rounding error of one evaluation of f_i, shape (m,): the larger of
        ε·scale_i (an accurately computed f_i) and the measured noise (rounding amplified inside f)."""
        return np.maximum(self.eps * (self.scale() if scale is None else scale), self.measured)

    def _pairs(self, level_of: np.ndarray, column_of: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
        """Central differences at level_of[k] for column column_of[k], evaluated with the extra points (rows
        of flat inputs), whose values are returned (outputs in float64). The points go to f in chunks of at
        most CHUNK_BYTES (of points or of values), so that memory stays bounded whatever n."""
        # The points are built in numpy, in x's dtype: IEEE addition rounds alike there and on any device.
        x = self.x
        extra = np.empty((0, x.size), dtype=x.dtype) if extra is None else extra
        wanted = (self.h0 * 2.0 ** -level_of * self.size[column_of]).astype(x.dtype)
        h = ((x[column_of] + wanted) - x[column_of]).astype(np.float64)  # the steps x really receives
        usable = h != 0
        self.active[column_of[~usable]] = False  # the step rounded to zero: no smaller step exists
        used, level_of, h = column_of[usable], level_of[usable], h[usable]
        if used.size:
            self._grow(int(level_of.max()) + 1)
            self.h[level_of, used] = h
        # Rows of (level, column) per chunk: two points each, of n inputs and m outputs.
        per_row = 2 * max(x.size * x.itemsize, self.m * 8)
        chunk = max(1, CHUNK_BYTES // per_row)
        extra_values = np.empty((0, self.m))
        for begin in range(0, max(used.size, 1), chunk):
            rows = slice(begin, begin + chunk)
            mine = extra if begin == 0 else extra[:0]
            if not used[rows].size and not len(mine):
                break
            found = self._chunk(level_of[rows], used[rows], h[rows], mine)
            extra_values = found if begin == 0 else extra_values
        if used.size:
            np.maximum.at(self.levels, used, level_of + 1)
            np.add.at(self.tried, used, 1)
            self.depth = max(self.depth, int(level_of.max()) + 1)
        self._chosen, self._windows = None, None
        return extra_values

    def _chunk(self, level_of: np.ndarray, used: np.ndarray, h: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """One evaluation of f: the pairs of points x ± h e_j of these rows and the extra points. Holds every
        element that changed; returns the extra points' values."""
        x, rows, first = self.x, used.size, len(extra)
        # One block of points, built in place (each copy of it costs what f's evaluation costs): the extra
        # points, x ± h e_j, and x itself where the evaluator compares its batched f(x) with the plain one.
        with_x = self.evaluate.wants_x
        points = np.empty((first + 2 * rows + with_x, x.size), dtype=x.dtype)
        points[:first] = extra
        points[first:] = x
        points[np.arange(first, first + rows), used] += h.astype(x.dtype)
        points[np.arange(first + rows, first + 2 * rows), used] -= h.astype(x.dtype)
        values = self.evaluate(torch.from_numpy(points).to(self.device), includes_x=with_x).cpu().numpy()
        extra, values = values[:first], values[first:]
        if not rows:
            return extra
        plus, minus = values[:rows], values[rows:]
        # An output is unchanged where it equals f(x) as the batched call computes it (a batched f can round
        # otherwise than a plain call: a batched matrix product sums in another order). NaN compares unequal
        # too: an element whose stencil leaves f's domain is held.
        unchanged = self.value if self.evaluate.at_x is None else self.evaluate.at_x
        changed = plus != unchanged
        changed |= minus != unchanged
        row, output = np.nonzero(changed)
        self._hold(used[row] * self.m + output)
        # Every held element of these columns, beside the row that evaluated its column.
        counts = self.starts[used + 1] - self.starts[used]
        row = np.repeat(np.arange(rows), counts)
        element = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + self.starts[used][row]
        output = self.rows[element]
        step = h[row]
        self.differences[level_of[row], element] = (plus[row, output] - minus[row, output]) / (2 * step)
        self.gaps[level_of[row], element] = np.abs(plus[row, output] + minus[row, output]
                                                   - 2 * self.value[output]) / step
        return extra

    def _grow(self, depth: int) -> None:
        """Room for `depth` levels in the per-level tables (NaN where a level is not computed)."""
        missing = depth - self.h.shape[0]
        if missing > 0:
            def more(table: np.ndarray) -> np.ndarray:
                return np.concatenate([table, np.full((missing, *table.shape[1:]), np.nan)])

            self.differences, self.gaps, self.h = more(self.differences), more(self.gaps), more(self.h)

    def windows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per window k (steps k, k+1, k+2) and held element: Neville's T22 (k, elements), its error and the
        finest step (k, elements)."""
        d, h = self.differences[:self.depth], self.h[:self.depth, self.columns] ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            first = (h[:-1] * d[1:] - h[1:] * d[:-1]) / (h[:-1] - h[1:])
            best = (h[:-2] * first[1:] - h[2:] * first[:-1]) / (h[:-2] - h[2:])
        # Ridders' error, the change the last extrapolation made, is the error of the once-extrapolated
        # value (order h⁴), far above that of T22 (order h⁶) where truncation dominates. The change to the
        # neighbouring windows' T22, one step coarser and one finer, measures T22's own error (as
        # numdifftools does). Taking the larger change, on either side, spans five steps: noisy windows
        # rarely agree with both neighbours by chance. A window with no finite neighbour keeps Ridders'.
        ridders = np.maximum(np.abs(best - first[1:]), np.abs(best - first[:-1]))
        change = np.abs(best[1:] - best[:-1])
        missing = np.full((1, *best.shape[1:]), np.nan)
        # fmax ignores a NaN side: a window beside a missing one is judged by the other.
        error = np.fmax(np.concatenate([missing, change]), np.concatenate([change, missing]))
        error = np.where(np.isnan(error), ridders, error)
        return best, error, self.h[2:self.depth, self.columns]

    def scale(self) -> np.ndarray:
        """Per output, |f_i(x)| + Σ_k |J_ik|·|x_k|: the size of what f_i is computed from, shape (m,)."""
        value, _, uncertainty, _, _ = self._choose()
        numerical = np.where(np.isfinite(uncertainty) & np.isfinite(value), value, 0.0)
        return self.base + self._row_sums(self.magnitude[self.columns] * np.abs(numerical))

    def _row_sums(self, weights: np.ndarray) -> np.ndarray:
        return np.bincount(self.rows, weights, minlength=self.m)

    def _choose(self):
        if self._chosen is None:
            self._chosen = self._least_uncertain()
        return self._chosen

    def _least_uncertain(self, rough: np.ndarray | None = None):
        """Per held element, the window of least uncertainty: (value, error, uncertainty, finest step, window).

        The rounding term needs the Jacobian's size; a first choice with |f| alone supplies it (a garbage
        coarse window must not inflate the scale of every other).
        """
        if self._windows is None:
            self._windows = self.windows()
        best, error, finest = self._windows
        size = 0.0 if rough is None else \
            self._row_sums(self.magnitude[self.columns] * np.abs(np.where(np.isfinite(rough), rough, 0.0)))
        self._noise = noise = self.noise(self.base + size)  # (m,)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rounding = noise[self.rows] / np.abs(finest)
            uncertainty = error + rounding + self.tiny
            uncertainty = np.where(np.isfinite(uncertainty) & np.isfinite(best), uncertainty, np.inf)
            # Relative, not absolute: at coarse steps a fast-varying f can look flat, and a small garbage
            # value has a small absolute error estimate. Relative to the entry's scale (√ε of its row's and
            # column's largest |J|) where its own value is smaller: an entry that is 0 (f_i does not depend
            # on x_j) would otherwise be judged by its rounding noise, and the noisiest window would win.
            floor = self.tiny if rough is None else np.sqrt(self.eps) * self._reference(rough)
            relative = uncertainty / np.fmax(np.abs(best), np.fmax(floor, self.tiny))
        # An element at which f did not change at any step (f does not depend on that input, or is constant
        # there) is settled. A flat window among sloped ones is not: at small steps a staircase (round, or
        # a forward whose rounding is coarse, ndtr far in its tail) looks flat between its jumps.
        flat = ((best == 0) & (error == 0)) | ~np.isfinite(best)
        settled = flat.all(0) & np.isfinite(best).any(0)
        relative = np.where(settled & (best == 0), 0.0, relative)
        window = relative.argmin(0) if relative.shape[0] else np.zeros(self.keys.size, dtype=np.int64)
        self._all = (best, uncertainty, relative)
        chosen = [_at(table, window) for table in (best, error, uncertainty, finest)]
        if rough is None:
            return self._least_uncertain(np.where(np.isfinite(chosen[2]), chosen[0], 0.0))
        return (*chosen, window)

    def _maxima(self, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The largest finite |J| of each column (n,) and each row (m,) among the held elements (0 for the flat)."""
        size = np.abs(np.where(np.isfinite(value), value, 0.0))
        columns, rows = np.zeros(self.n), np.zeros(self.m)
        np.maximum.at(columns, self.columns, size)
        np.maximum.at(rows, self.rows, size)
        return columns, rows

    def _reference(self, value: np.ndarray) -> np.ndarray:
        """Per held element, its scale: the largest |J| in its row and column."""
        columns, rows = self._maxima(value)
        return np.maximum(columns[self.columns], rows[self.rows])

    def _judged(self, value: np.ndarray, uncertainty: np.ndarray, resolution: float | None = None) -> np.ndarray:
        """Per held element: allowed small enough against the entry's scale (its row's and column's largest |J|)."""
        resolution = self.resolution if resolution is None else resolution
        exact_zero = (value == 0) & (uncertainty <= self.tiny * 2)
        return (self.safety * uncertainty <= resolution * self._reference(value)) | exact_zero

    def _changed(self) -> np.ndarray:
        """Per held element: f_i changed at some step of its column (not flat: a mismatch can hold a flat one)."""
        computed = np.isfinite(self.h[:, self.columns])
        return (((self.differences != 0) | (self.gaps != 0)) & computed).any(0)

    def _stop_judged_columns(self, level: int) -> None:
        """Stop a column once every element that changed is judged and either precise (uncertainty at most
        ε^(2/3) of its scale: as good as a smooth f gives) or no longer improving (its best window is two or
        more steps behind the latest); or once rounding at its latest step alone exceeds the best
        uncertainty found for each of them (a smaller step can only be worse)."""
        value, _, uncertainty, _, window = self._choose()
        judged = self._judged(value, uncertainty)
        precise = self._judged(value, uncertainty, self.precision / self.safety)
        stalled = (level - 2 - window) >= 2
        with np.errstate(divide="ignore", invalid="ignore"):
            rounding = self.noise()[self.rows] / np.abs(self.h[level, self.columns])
        changed = self._changed()
        undone = np.bincount(self.columns[changed & ~(judged & (precise | stalled))], minlength=self.n)
        hopeful = np.bincount(self.columns[changed & ~(rounding > uncertainty)], minlength=self.n)
        self.active &= (undone > 0) & (hopeful > 0)

    def _dense(self, held: np.ndarray, flat: np.ndarray | float, fresh: bool = False) -> torch.Tensor:
        """(m, n) torch: the held elements' values, and `flat` ((m, n), broadcast) everywhere else; fresh: flat
        is an (m, n) table of its own, filled in place."""
        if fresh:
            table = flat
        else:
            table = np.empty((self.m, self.n), dtype=np.result_type(held, flat))
            table[...] = flat
        table[self.rows, self.columns] = held
        return torch.from_numpy(table)

    def _flat(self, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A flat element's estimate and uncertainty at each column's window (n,): 0 and its rounding,
        (1, n) and (m, n); NaN and inf where the window's steps were not all computed."""
        steps = self.h[np.stack([window, window + 1, window + 2]), np.arange(self.n)]  # (3, n)
        computed = np.isfinite(steps).all(0)
        inverse = 1 / np.abs(np.where(computed, steps[2], 1.0))
        uncertainty = np.multiply(self._noise[:, None], inverse[None, :])
        uncertainty += self.tiny
        uncertainty[:, ~computed] = np.inf
        return np.where(computed, 0.0, np.nan)[None, :], uncertainty

    def _first_windows(self) -> np.ndarray:
        """Per column, its first window whose three steps were computed (a flat element's choice: every
        window has relative uncertainty 0, and argmin takes the first)."""
        computed = np.isfinite(self.h)
        whole = computed[:-2] & computed[1:-1] & computed[2:]
        return whole.argmax(0) if whole.shape[0] else np.zeros(self.n, dtype=np.int64)

    def result(self) -> tuple[torch.Tensor, ...]:
        """(numerical, allowed before autograd's floor, judged), each (m, n), torch (see details)."""
        value, _, uncertainty, _, _ = self._choose()
        judged = self._judged(value, uncertainty) & np.isfinite(uncertainty)
        columns, rows = self._maxima(value)
        value = np.where(np.isfinite(uncertainty), value, np.nan)
        first = self._first_windows()
        # A flat element's estimate is 0 (NaN where its column's first window was not computed, and then
        # its uncertainty is inf), its error 0, its allowance safety × its rounding.
        flat_value, flat_allowed = self._flat(first)
        flat_allowed *= self.safety
        reference = np.maximum(columns[None, :], rows[:, None])
        reference *= self.resolution
        flat_judged = flat_allowed <= reference  # False where not computed: the allowance is inf there
        # An exact zero (uncertainty at most 2·tiny): an output without rounding noise, in practice.
        computed = flat_value[0] == 0
        if computed.any():
            candidates = np.flatnonzero(self._noise * (1 / np.abs(self.h[first + 2, np.arange(self.n)][computed])).min()
                                        <= self.tiny)
            block = flat_allowed[np.ix_(candidates, computed)] <= self.safety * self.tiny * 2
            flat_judged[np.ix_(candidates, computed)] |= block
        return (self._dense(value, flat_value), self._dense(self.safety * uncertainty, flat_allowed, fresh=True),
                self._dense(judged, flat_judged, fresh=True))

    def details(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(error, finest step) of each element's chosen window, each (m, n), torch: the report's per-element
        account, built when it is read (for a large Jacobian each table is the cost of an evaluation)."""
        _, error, _, finest, _ = self._choose()
        first = self._first_windows()
        flat_value, _ = self._flat(first)
        return self._dense(error, flat_value), self._dense(finest, self.h[first + 2, np.arange(self.n)][None, :])

    def confirm(self, mismatch: torch.Tensor) -> None:
        """Smaller steps for the columns with a mismatch (m, n), in one batch: the next window, and the
        finest whose rounding could still resolve the mismatch (safety × rounding a quarter of it, at most
        the floor ε^(3/4)). A staircase whose stair fits the coarse steps exactly (round, at steps 2^-k
        apart) looks smooth there and flat below the stair: the finest window must see the same slope.
        The mismatched elements are held from here on, flat or not: their windows are compared below."""
        mismatch = mismatch.numpy().T  # (n, m)
        column, output = np.nonzero(mismatch > 0)
        self._hold(column * self.m + output)
        columns = np.unique(column)
        # The smallest step at which the rounding allowance stays a quarter of the mismatch, per column: a
        # window there can still contradict the chosen one by the mismatch.
        finest_step = np.full(self.n, np.inf)
        np.minimum.at(finest_step, column, 4 * self.safety * self.noise()[output]
                      / np.maximum(mismatch[column, output], self.tiny))
        depth = self.levels[columns]
        deepest = np.floor(np.log2(self.h0 * self.size[columns] / np.maximum(finest_step[columns], self.tiny)))
        last = np.clip(deepest.astype(np.int64), np.minimum(depth + 2, self.max_levels - 1), self.max_levels - 1)
        pairs = [(level, column) for column, first, finest in zip(columns.tolist(), depth.tolist(), last.tolist())
                 # The next window and the witness window; steps in between add nothing the witness does
                 # not show, and steps already evaluated (a column that went deep) are not evaluated again.
                 for level in sorted({first, first + 1, first + 2, finest - 2, finest - 1, finest})
                 if first <= level < self.max_levels]
        if pairs:
            self._pairs(*map(np.asarray, zip(*pairs)))
        self.witness[columns] = np.maximum(last - 2, 0)

    def finest(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per element, the value and allowance (safety × uncertainty) of its column's witness window (the
        finest window of a column without a mismatch), (m, n)."""
        self._choose()
        best, uncertainty, _ = self._all
        last = self.finest_window()
        value, spread = _at(best, last[self.columns]), _at(uncertainty, last[self.columns])
        flat_value, flat_uncertainty = self._flat(last)
        flat_uncertainty *= self.safety
        return self._dense(value, flat_value), self._dense(self.safety * spread, flat_uncertainty, fresh=True)

    def independent(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per held element, the value and uncertainty of the window that shares no step with the chosen one
        and is least uncertain relative to its value, as the chosen one is (NaN and inf where there is none,
        and for the flat elements: a mismatch holds its elements before this is asked), (m, n)."""
        window = self._choose()[-1]
        best, uncertainty, relative = self._all
        disjoint = np.abs(np.arange(best.shape[0])[:, None] - window[None]) >= 3
        pick = np.where(disjoint & np.isfinite(uncertainty), relative, np.inf).argmin(0)
        found = _at(disjoint, pick) & np.isfinite(_at(uncertainty, pick))
        value = np.where(found, _at(best, pick), np.nan)
        spread = np.where(found, _at(uncertainty, pick), np.inf)
        return self._dense(value, np.nan), self._dense(spread, np.inf)

    def finest_window(self) -> np.ndarray:
        """Per column, the index (its first step) of the window confirm() chose as witness, else the finest."""
        return np.where(self.witness >= 0, self.witness, np.maximum(self.levels - 3, 0))

    def chosen_window(self) -> np.ndarray:
        """Per column, the window chosen for its finest-resolved element."""
        window = self._first_windows()
        np.maximum.at(window, self.columns, self._choose()[-1])
        return window

    def kinks(self, window: np.ndarray) -> torch.Tensor:
        """(m, n): at each column's window k, one-sided differences whose gap does not halve from step k to
        step k + 1 (a smooth f: h·f'' halves; a kink: the jump in slope stays), above rounding noise. A
        flat element has no gap, and no kink."""
        mine = window[self.columns]
        elements = np.arange(self.keys.size)
        coarse, fine = self.gaps[mine, elements], self.gaps[mine + 1, elements]
        noise = 2 * self.noise()[self.rows] / np.abs(self.h[mine + 1, self.columns])
        with np.errstate(invalid="ignore"):
            found = (fine > KINK_RATIO * coarse) & (fine > KINK_NOISE * noise)  # False where a level is missing
        return self._dense(found, False)


def _at(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """table[index[k], k] for each element k of a (levels or windows, elements) table."""
    return table[index, np.arange(table.shape[1])] if table.shape[1] else table[0]


def _add_autograd_floor(allowed: torch.Tensor, jacobian: torch.Tensor, numerical: torch.Tensor, relative: float,
                        safety: float) -> None:
    """Adds autograd's own rounding to the allowance, in place: f's relative noise (ε, or more where f amplifies
    it) times the scale of the entry's row and column, of either Jacobian's finite entries (a NaN or inf must
    not widen, or poison, the allowance of its row and column; nan_to_num would turn inf into the largest
    float). In numpy, a block of rows at a time: no table of the floor itself (see _finite)."""
    def maxima(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:  # per row (m, 1) and column (1, n)
        size = np.nan_to_num(np.abs(t.numpy()), copy=False, nan=0.0, posinf=0.0)
        return size.max(1, keepdims=True), size.max(0, keepdims=True)

    (rows, columns), (numerical_rows, numerical_columns) = maxima(jacobian), maxima(numerical)
    rows = np.maximum(rows, numerical_rows) * (safety * relative)
    columns = np.maximum(columns, numerical_columns) * (safety * relative)
    table = allowed.numpy()
    for begin in range(0, table.shape[0], FLOOR_ROWS):
        table[begin:begin + FLOOR_ROWS] += np.maximum(rows[begin:begin + FLOOR_ROWS], columns)


# The report's tables are float64 on the CPU, and for a large Jacobian a fresh torch tensor costs its pages one
# fault at a time (torch.isfinite builds several): the element-wise masks are computed in numpy, on the same
# memory.
def _finite(t: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.isfinite(t.numpy()))


def _difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in torch, without a warning
        difference = np.subtract(a.numpy(), b.numpy())
    return torch.from_numpy(np.abs(difference, out=difference))


def _autograd_jacobian(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, mode: Mode, outputs: int,
                       order: int = 1) -> tuple[torch.Tensor, Mode, str, str]:
    """Autograd's Jacobian as (outputs, inputs) float64 on the CPU, the mode and the function that made it,
    and why a fallback happened ("" when none).

    Reverse mode is plain autograd, what loss.backward() runs: one forward, then the rows of the Jacobian
    from torch.autograd.grad, batched over the outputs (is_grads_batched) where there are more than a few,
    one backward per output otherwise or where the backward cannot be batched. (torch.func.jacrev would
    give the same rows, but imports torch._dynamo on first use, about a second in every fresh process.)
    Forward mode is checks.core.forward's (jacfwd, or dual numbers); for order 2, f is a vector–Jacobian
    product that calls autograd inside, which only dual numbers can differentiate (forward-over-reverse).
    """
    note = ""
    if mode == "forward":
        try:
            jacobian, method, note = forward_jacobian(f, x, outputs, transforms=order == 1,
                                                      differentiable=order == 2)
            return jacobian, mode, method, note
        # A custom Function without jvp has no forward-mode derivative; plain autograd can still do
        # reverse mode.
        except NoForwardMode as error:
            note = f"f has no forward-mode derivative: {error}; reverse mode by torch.autograd.grad instead"
    leaf = x.clone().requires_grad_(True)
    with in_place_named():
        value = f(leaf)
        if not value.requires_grad:  # no output depends on x: a zero Jacobian, as autograd defines it
            return torch.zeros(outputs, x.numel(), dtype=torch.float64), "reverse", "torch.autograd.grad", note
        if outputs > FEW_OUTPUTS:
            try:
                # The identity it is seeded with, BATCHED_ROWS_LIMIT elements of it at a time, into one float64
                # table (numpy's: see _finite).
                block, jacobian = max(1, BATCHED_ROWS_LIMIT // outputs), np.zeros((outputs, x.numel()))
                for begin in range(0, outputs, block):
                    count = min(block, outputs - begin)
                    seeds = torch.zeros(count, outputs, dtype=value.dtype, device=value.device)
                    seeds[torch.arange(count), torch.arange(begin, begin + count)] = 1
                    (rows,) = torch.autograd.grad(value, leaf, seeds, retain_graph=True, is_grads_batched=True,
                                                  allow_unused=True)
                    if rows is not None:
                        jacobian[begin:begin + count] = flat_jacobian(rows, x).numpy()
                return (torch.from_numpy(jacobian), "reverse", "torch.autograd.grad with is_grads_batched=True",
                        note)
            except (RuntimeError, NotImplementedError) as error:  # a backward vmap cannot batch
                note = "; ".join(filter(None, [note, f"torch.autograd.grad could not batch f's backward "
                                                     f"({first_line(error)}); one backward per output instead"]))
        rows = [torch.autograd.grad(value[i], leaf, retain_graph=i + 1 < outputs, allow_unused=True)[0]
                for i in range(outputs)]
    rows = [torch.zeros_like(x) if row is None else row for row in rows]
    return flat_jacobian(torch.stack(rows), x), "reverse", "torch.autograd.grad", note


class GradientMismatchError(AssertionError):
    """assert_gradients found elements of autograd's Jacobian outside their allowance."""


class InconclusiveGradientError(AssertionError):
    """assert_gradients could not judge some elements (a kink, f not finite near the inputs, or an estimate
    too uncertain), and none failed: the gradient is neither vouched for nor refuted. The message says why,
    per element, and what would settle it."""


def assert_gradients(f: Function, *inputs: object, **options) -> CheckReport:
    """Raise unless autograd's Jacobian of f at the inputs agrees with the numerical one: for test suites.

    GradientMismatchError (an AssertionError) names the gradient that is wrong ("the gradient with respect
    to input `b`") and each mismatched element by input and index, with both values, the difference and the
    allowance; InconclusiveGradientError (also an AssertionError) says which elements could not be judged
    and why. Options as for check_jacobian (atol=, rtol=, mode=, order=, sample=, ...). Returns the report
    on a pass.
    """
    __tracebackhide__ = True  # pytest shows the message, not this frame
    return _raise_unless_passed(check_jacobian(f, *inputs, **options))


def check_module(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: object,
                 inputs: bool = True, **options) -> CheckReport:
    """check_jacobian of loss(module(*args)) with respect to the module's trainable parameters, each named
    as in module.named_parameters() ("0.weight"), and to its floating-point inputs, each named as in the
    module's forward ("x"); integer inputs (token indices) and non-tensors are held fixed and named.

    inputs  -- False: check the parameters alone, every arg held fixed
    options -- as for check_jacobian
    """
    if not isinstance(module, torch.nn.Module):
        raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not callable(loss):
        raise CheckInputError(f"loss must be a function of the module's output, got {type(loss).__name__}")
    flag(inputs, "inputs (check the gradient with respect to the module's inputs too)")
    named = [(name, parameter) for name, parameter in module.named_parameters() if parameter.requires_grad]
    checked_args = args if inputs else ()
    if not named and not any(isinstance(a, torch.Tensor) and a.dtype.is_floating_point for a in checked_args):
        raise CheckInputError(f"{type(module).__name__} has no parameters that require grad"
                              + (" and no floating-point input" if inputs else " (and inputs=False)")
                              + ": nothing to check")
    names = [name for name, _ in named]
    arg_names = parameter_names(module.forward, len(checked_args)) if checked_args else []
    if set(arg_names) & set(names) or len(set(arg_names)) != len(arg_names):
        arg_names = [f"input {k}" for k in range(len(checked_args))]

    def f(*values: object) -> torch.Tensor:
        parameters, given = values[:len(names)], values[len(names):]
        return loss(torch.func.functional_call(module, dict(zip(names, parameters)), tuple(given) or args))

    return check_jacobian(f, *[parameter.detach() for _, parameter in named], *checked_args,
                          names=[*names, *arg_names], **options)


def assert_module_gradients(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                            *args: object, **options) -> CheckReport:
    """assert_gradients for a module's parameters and inputs: check_module, raising as assert_gradients does."""
    __tracebackhide__ = True
    return _raise_unless_passed(check_module(module, loss, *args, **options))


def _raise_unless_passed(report: CheckReport) -> CheckReport:
    __tracebackhide__ = True
    if report.outcome == "fail":
        raise GradientMismatchError(report.message())
    if report.outcome == "inconclusive":
        raise InconclusiveGradientError(report.message())
    return report
