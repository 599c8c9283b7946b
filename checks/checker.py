"""A gradient checker: autograd's Jacobian against an adaptive Richardson estimate, element by element.

Three outcomes per element, and for the whole check (a fail anywhere fails it; else an inconclusive
element makes it inconclusive):

- pass: autograd is within the element's allowance, and the allowance is small enough to mean something
  (at most RESOLUTION of the entry's scale: the largest |J| in its row and column);
- fail: autograd is outside its allowance (an allowance too wide to vouch for a pass can still be exceeded);
- inconclusive: the evidence cannot settle it. The report says why and what would settle it:
  "kink" (f is not differentiable at x, or a kink lies inside the stencil: check at another point),
  "domain" (f is not finite at x ± h for every step tried: x is on the edge of f's domain),
  "unstable" (a mismatch that a window at steps eight times smaller contradicts: f has structure at the
  scale of the step, a staircase or an oscillation),
  "imprecise" (the estimate's own uncertainty is above RESOLUTION at every step: float64, or another point).

The allowance of element (i, j):

    allowed = safety · (error + ε·scale_i/h + ε·max(|J| in row i and column j) + tiny)

- error: the Richardson tableau's own error estimate (Ridders'): the change the last extrapolation made.
- ε·scale_i/h: rounding of the evaluations of f_i (scale_i = |f_i(x)| + Σ_k |J_ik|·|x_k|, the size of
  what f_i is computed from), divided by the finest step of the tableau.
- ε·max(|J| in row, column): autograd's own rounding; an entry computed as 1e-17 where f does not
  depend on x_j at all is rounding, not a bug.
- tiny: the smallest normal number of the dtype, a floor for subnormal results.

The step adapts to f (as numdifftools does): central differences at h0·max(|x_j|, 1)·2^-k for k = 0, 1, ...,
each window of three consecutive steps extrapolated, and per element the window whose uncertainty
(error + rounding) is smallest relative to its value wins. Columns whose elements are not yet judged (the tableau has not
converged, or a stencil point left f's domain, or the estimate is less precise than ε^(2/3) of the entry's
scale and still improving) get smaller steps, down to ε^(3/4)·max(|x_j|, 1) or until rounding at the step
alone exceeds the best uncertainty found; a smooth f is settled at the first three steps.

A kink (relu or abs at 0, a clamp's bound) makes both numbers meaningless: one-sided differences D+ and D-
disagree by the jump in slope at every step, whereas for a smooth f their gap h·f'' halves with the step.
The gap |f(x + h) + f(x - h) - 2 f(x)| / h comes from the evaluations the estimate made anyway, at the first
two steps of each column's chosen window (and of its finest, for a mismatch).

Several inputs: f(x, weight, bias) is checked as one function of all inputs' elements concatenated;
each element is named by its input and index ("input `weight`, element (2, 1)"). check_module does this
for an nn.Module's parameters, and assert_gradients raises for a test suite.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from .dtypes import dtype_name
from .errors import CheckInputError, DtypeError, NaNInputError
from .indices import unravel
from .numerical import _Evaluator, _relative_step, default_step, machine_epsilon, require_memory
from .observe import in_place_named
from .validate import flag, memory, number

Function = Callable[..., torch.Tensor]
Mode = Literal["reverse", "forward"]
MODES: tuple[Mode, ...] = ("reverse", "forward")
Outcome = Literal["pass", "fail", "inconclusive"]
ElementVerdict = Literal["pass", "fail", "inconclusive"]

# Allowance factor over the uncertainty; the same 10 as checks.tolerances.NUMERICAL_SAFETY: an estimate
# rarely misses by ten times its own error estimate.
SAFETY = 10.0
# An element is judged only when its allowance is at most this fraction of the entry's scale: a pass with
# an allowance of 50 % would vouch for nothing.
RESOLUTION = 1e-2
# For a smooth f the one-sided gap halves with the step (ratio 0.5, or 0.125 where f'' = 0); a kink keeps
# it near 1. 0.75 sits between the two.
KINK_RATIO = 0.75
# A gap must exceed this many times the rounding noise of a one-sided difference (2ε|f|/h) to count.
KINK_NOISE = 100.0

REASONS = {
    "kink": "one-sided differences disagree at every step: f is not differentiable at x, or a kink lies "
            "within h of it; check at another point",
    "domain": "f is not finite at x ± h for every step tried: x is on the edge of f's domain; check at an "
              "interior point",
    "unstable": "estimates at steps eight times apart disagree: f varies on a scale near the step (a "
                "staircase such as round, or a fast oscillation); check at another point",
    "imprecise": "the estimate's uncertainty stays above {resolution:g} of the entry's scale at every step "
                 "tried; {remedy}",
}


@dataclass(frozen=True)
class Argument:
    """One input of f: its name, shape and where its elements sit among the Jacobian's columns."""

    name: str
    shape: tuple[int, ...]
    offset: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def index(self, column: int) -> tuple[int, ...]:
        """The multi-index inside this input of a flattened column."""
        return unravel(column - self.offset, self.shape)


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
    reason: str  # "" for pass and fail; else a key of REASONS

    @property
    def difference(self) -> float:
        return abs(self.autograd - self.numerical)


@dataclass(frozen=True, eq=False)
class CheckReport:
    """The outcome of check_jacobian: both Jacobians (outputs, inputs) in float64, allowances and verdicts.

    mode         -- the autograd mode that produced `autograd` ("reverse" or "forward")
    requested    -- the mode asked for; differs from mode when forward mode was not supported
    note         -- why a fallback happened ("" when none)
    error        -- per element, the Richardson error estimate of the chosen window
    steps        -- per element, the finest step of the chosen window
    levels       -- per column, how many steps were tried (3 for a smooth f)
    kink, domain, unstable, converged -- per element: a kink found; no finite estimate at any step; a
                    mismatch that a window at smaller steps contradicts; allowed small enough to judge
    arguments    -- the inputs, named, with their shapes
    evaluations  -- every evaluation of f: the estimate's, the kink test's, f(x) and autograd's forward
    seconds      -- wall time of the whole check
    """

    autograd: torch.Tensor
    numerical: torch.Tensor
    error: torch.Tensor
    allowed: torch.Tensor
    steps: torch.Tensor
    levels: torch.Tensor
    kink: torch.Tensor
    domain: torch.Tensor
    unstable: torch.Tensor
    converged: torch.Tensor
    mode: Mode
    requested: Mode
    note: str
    dtype: str
    device: str
    arguments: tuple[Argument, ...]
    output_shape: tuple[int, ...]
    evaluations: int
    seconds: float
    resolution: float

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.arguments[0].shape if len(self.arguments) == 1 else (self.autograd.shape[1],)

    @property
    def difference(self) -> torch.Tensor:
        return (self.autograd - self.numerical).abs()

    @property
    def mismatch(self) -> torch.Tensor:
        """Elements outside their allowance, away from kinks: the evidence of a wrong gradient. (An
        allowance too wide to judge a pass can still be exceeded: autograd is then wrong by even more.)"""
        return (self.difference > self.allowed) & ~self.kink & ~self.domain & ~self.unstable

    @property
    def inconclusive(self) -> torch.Tensor:
        """Elements the evidence cannot judge (a kink, f not finite near x, or an unconverged estimate)."""
        exact = self.difference == 0
        return ~self.mismatch & (self.kink | self.domain | self.unstable | (~self.converged & ~exact))

    @property
    def outcome(self) -> Outcome:
        if bool(self.mismatch.any()):
            return "fail"
        return "inconclusive" if bool(self.inconclusive.any()) else "pass"

    @property
    def passed(self) -> bool:
        """Every element judged and within its allowance. Not passed is not failed: see outcome."""
        return self.outcome == "pass"

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    @property
    def kinks(self) -> int:
        return int((self.kink & ~self.mismatch).sum())

    def reason(self, i: int, j: int) -> str:
        if self.mismatch[i, j] or not self.inconclusive[i, j]:
            return ""
        if self.kink[i, j] or self.domain[i, j] or self.unstable[i, j]:
            return "kink" if self.kink[i, j] else "domain" if self.domain[i, j] else "unstable"
        return "imprecise"

    def explain(self, reason: str) -> str:
        remedy = "check in float64" if self.dtype == "float32" else \
            "check at another point, or rescale f so that it does not vary on a scale near ε"
        return REASONS[reason].format(resolution=self.resolution, remedy=remedy)

    def argument_of(self, column: int) -> Argument:
        return next(a for a in reversed(self.arguments) if a.offset <= column)

    def elements(self) -> list[Element]:
        """The per-element report, row by row (output index, then column)."""
        mismatch, inconclusive = self.mismatch, self.inconclusive
        rows = []
        for i in range(self.autograd.shape[0]):
            for j in range(self.autograd.shape[1]):
                verdict = "fail" if mismatch[i, j] else "inconclusive" if inconclusive[i, j] else "pass"
                argument = self.argument_of(j)
                rows.append(Element(i, j, argument.name, argument.index(j), float(self.autograd[i, j]),
                                    float(self.numerical[i, j]), float(self.error[i, j]), float(self.allowed[i, j]),
                                    float(self.steps[i, j]), verdict, self.reason(i, j)))
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
        total = self.autograd.numel()
        failed, unsure = int(self.mismatch.sum()), int(self.inconclusive.sum())
        state = {"pass": "passed",
                 "fail": f"failed: {failed} of {total} elements outside their allowance",
                 "inconclusive": f"inconclusive: {unsure} of {total} elements could not be judged"}[self.outcome]
        if self.outcome == "fail" and unsure:
            state += f", {unsure} could not be judged"
        kinks = f", {self.kinks} at a kink" if self.kinks else ""
        return (f"{state}{kinks} ({self.mode} mode, {self.dtype}, {self.device}, "
                f"{self.evaluations} evaluations of f)")

    def output_index(self, row: int) -> tuple[int, ...]:
        """The multi-index in f's output of a Jacobian row (flat for tuple outputs)."""
        return unravel(row, self.output_shape)

    def where(self, element: Element) -> str:
        return f"input `{element.argument}`, element {element.index}, output {self.output_index(element.output)}"

    def message(self, limit: int = 4) -> str:
        """A torch.testing.assert_close-style account: what differed, where, by how much, what was allowed."""
        total = self.autograd.numel()
        signature = f"f({', '.join(a.name for a in self.arguments)})"
        how = {"reverse": "torch.func.jacrev (reverse mode)", "forward": "torch.func.jacfwd (forward mode)"}[self.mode]
        if self.mode == "reverse" and self.note:
            how = "torch.autograd.functional.jacobian (reverse mode)"
        elements = self.elements()
        wrong = [e for e in elements if e.verdict == "fail"]
        unsure = [e for e in elements if e.verdict == "inconclusive"]
        head = {"fail": "are not close!", "inconclusive": "could not be judged!", "pass": "are close."}
        lines = [f"Gradients of {signature} {head[self.outcome]} ({self.dtype}, {self.device})", ""]
        if wrong:
            def relative(e: Element) -> float:
                return e.difference / abs(e.numerical) if e.numerical else float("inf")

            absolute, worst_relative = max(wrong, key=lambda e: e.difference), max(wrong, key=relative)
            lines += [
                f"Mismatched elements: {len(wrong)} / {total} ({100 * len(wrong) / total:.1f}%)",
                f"Greatest absolute difference: {absolute.difference:.3g} at {self.where(absolute)} "
                f"(up to {absolute.allowed:.3g} allowed)",
                f"Greatest relative difference: {relative(worst_relative):.3g} at {self.where(worst_relative)} "
                f"(up to {worst_relative.allowed / abs(worst_relative.numerical or 1):.3g} allowed)",
                "Worst first (autograd vs numerical):",
            ]
            for e in sorted(wrong, key=lambda e: -e.difference / e.allowed)[:limit]:
                lines.append(f"  {self.where(e)}: {e.autograd:.10g} vs {e.numerical:.10g}, difference "
                             f"{e.difference:.3g} (up to {e.allowed:.3g} allowed)")
            if len(wrong) > limit:
                lines.append(f"  and {len(wrong) - limit} more")
        if unsure:
            lines.append(f"Elements not judged: {len(unsure)} / {total}")
            for reason in dict.fromkeys(e.reason for e in unsure):
                mine = [e for e in unsure if e.reason == reason]
                lines.append(f"  {reason}: {self.explain(reason)}")
                for e in mine[:limit]:
                    lines.append(f"    {self.where(e)}: autograd {e.autograd:.6g}, numerical {e.numerical:.6g} "
                                 f"± {e.allowed:.2g}")
                if len(mine) > limit:
                    lines.append(f"    and {len(mine) - limit} more")
        lines.append(f"Autograd by {how}; numerical by Richardson-extrapolated central differences at steps "
                     f"chosen per element ({int(self.levels.max())} steps tried at most), each element allowed "
                     f"{SAFETY:g} × (its error estimate + rounding); {self.evaluations} evaluations of f.")
        return "\n".join(lines)


def check_jacobian(
    f: Function,
    *inputs: torch.Tensor,
    mode: Mode = "reverse",
    step: float | None = None,
    safety: float = SAFETY,
    resolution: float = RESOLUTION,
    kinks: bool = True,
    names: Sequence[str] | None = None,
) -> CheckReport:
    """Compare autograd's Jacobian of f at the inputs with an adaptive Richardson estimate.

    A mismatch is a report, not a raise (assert_gradients raises). f takes one tensor per input and
    returns a tensor or a tuple of tensors; every input must be a real floating tensor of one dtype.

    mode       -- "reverse" (torch.func.jacrev) or "forward" (torch.func.jacfwd); where torch.func cannot
                  transform f (an autograd.Function without setup_context/vmap support, or without jvp
                  for forward mode) the check falls back to torch.autograd.functional.jacobian in reverse
                  mode, and the report's note says why
    step       -- the relative start step h0 (default ε^(1/5)); smaller steps follow where needed
    safety     -- the allowance factor over the uncertainty
    resolution -- an element is judged only when its allowance is at most this fraction of its scale
    kinks      -- run the one-sided kink test (from the same evaluations: no extra cost)
    names      -- the inputs' names (default: f's parameter names)
    """
    if mode not in MODES:
        raise CheckInputError(f"mode={mode!r} is not an autograd mode; use one of {MODES}")
    if not callable(f):
        raise CheckInputError(f"f must be a function of tensors, got {type(f).__name__}")
    if not inputs:
        raise CheckInputError("no inputs given: call check_jacobian(f, x) or check_jacobian(f, x, weight, ...)")
    for position, x in enumerate(inputs):
        _require_input(x, _label(position, len(inputs)))
    if len({x.dtype for x in inputs}) > 1 or len({x.device for x in inputs}) > 1:
        raise DtypeError("the inputs differ in dtype or device ("
                         + ", ".join(f"{dtype_name(x.dtype)} on {x.device}" for x in inputs)
                         + "); check them in one dtype on one device")
    number(safety, "safety (a factor over the error estimate)", minimum=1)
    flag(kinks, "kinks")
    if not (isinstance(resolution, (int, float)) and 0 < resolution < 1):
        raise CheckInputError(f"resolution must be a fraction between 0 and 1, got {resolution!r}")
    start = time.perf_counter()
    arguments = _arguments(f, inputs, names)
    x = torch.cat([t.detach().reshape(-1) for t in inputs])
    g = _flattened(f, arguments)
    with torch.no_grad():
        raw = f(*[t.detach().clone() for t in inputs])
        value = _output(raw)
    # Rows are named by their index in f's output; a tuple of outputs is numbered flat.
    output_shape = tuple(raw.shape) if isinstance(raw, torch.Tensor) else tuple(value.shape)
    if value.numel() == 0:
        raise CheckInputError("f returned an empty output: there is no Jacobian to check")
    if not torch.isfinite(value).all():
        shown = ", ".join(f"{a.name}={t.tolist()}" for a, t in zip(arguments, inputs))
        raise NaNInputError(f"f({', '.join(a.name for a in arguments)}) is not finite at {shown}: "
                            f"the Jacobian there is undefined")
    memory(value.numel() * x.numel() * 8, f"autograd's Jacobian of {value.numel()} outputs by {x.numel()} inputs",
           "it is held whole in float64 beside a numerical one of the same size; check a smaller x")
    require_memory(x, "richardson")
    jacobian, used, note = _autograd_jacobian(g, x, mode)
    eps, tiny = machine_epsilon(x.dtype), float(torch.finfo(x.dtype).tiny)
    # ε^(1/5), two levels' optimum: the start step the search, its mutant suite and the operator database
    # were measured with; smaller steps follow where an element needs them.
    h0 = default_step("richardson", x.dtype, 2).h0 if step is None else _relative_step(step)
    evaluate = _Evaluator(g, x, None, scalar=False)
    search = _Search(evaluate, x, value, h0, eps, tiny, safety, resolution)
    search.run()
    numerical, error, allowed, steps, converged = search.result()
    allowed = allowed + _autograd_floor(jacobian, numerical, eps, safety)
    # A failure must survive smaller steps: a staircase (round) or a fast oscillation can fool one window
    # into converging to a slope f does not have. Columns with a mismatch get smaller steps (at least one
    # more window, eight times smaller); where the chosen and the finest window disagree, neither is believed.
    suspect = (((jacobian - numerical).abs() > allowed) & torch.isfinite(numerical)).any(0)
    unstable = torch.zeros_like(converged)
    if suspect.any():
        search.confirm(suspect.nonzero().reshape(-1))
        numerical, error, allowed, steps, converged = search.result()
        allowed = allowed + _autograd_floor(jacobian, numerical, eps, safety)
        finest, finest_allowed = search.finest()
        unstable = (numerical - finest).abs() > allowed + finest_allowed
        unstable &= suspect.unsqueeze(0)
    domain = ~torch.isfinite(numerical)
    kink = torch.zeros_like(domain)
    if kinks:
        kink = search.kinks(search.chosen_window())
        if suspect.any():
            # A jump closer to x than the chosen steps (round near its boundary) shows at the finest steps.
            kink |= search.kinks(search.finest_window()) & suspect.unsqueeze(0)
        kink &= ~domain
    evaluations = evaluate.count + 2  # plus f(x) above and autograd's own forward
    return CheckReport(
        autograd=jacobian, numerical=numerical, error=error, allowed=allowed, steps=steps,
        levels=search.levels.clone(), kink=kink, domain=domain, unstable=unstable & ~domain,
        converged=converged & ~domain,
        mode=used, requested=mode, note=note, dtype=dtype_name(x.dtype), device=x.device.type,
        arguments=arguments, output_shape=output_shape, evaluations=evaluations,
        seconds=time.perf_counter() - start, resolution=resolution,
    )


class _Search:
    """The adaptive step search: central differences at h0·max(|x|, 1)·2^-k, column by column."""

    def __init__(self, evaluate: _Evaluator, x: torch.Tensor, value: torch.Tensor, h0: float, eps: float,
                 tiny: float, safety: float, resolution: float) -> None:
        self.evaluate, self.x, self.eps, self.tiny = evaluate, x, eps, tiny
        self.safety, self.resolution = safety, resolution
        self.value = value.detach().to(torch.float64).reshape(-1).cpu()
        n, m = x.numel(), self.value.numel()
        self.size = torch.clamp(x.detach().abs().to(torch.float64).cpu(), min=1.0)
        self.h0 = h0
        floor = eps ** 0.75
        self.max_levels = max(3, math.ceil(math.log2(h0 / floor)) + 1)
        # Rows per level, grown as deeper levels are needed (most columns stop at the third).
        self.differences = torch.full((3, n, m), float("nan"), dtype=torch.float64)
        # |f(x + h) + f(x - h) - 2 f(x)| / h = |D+ - D-|, the gap between one-sided differences, per level:
        # the kink test reads it from the same evaluations.
        self.gaps = torch.full((3, n, m), float("nan"), dtype=torch.float64)
        self.h = torch.full((3, n), float("nan"), dtype=torch.float64)
        self.levels = torch.zeros(n, dtype=torch.int64)
        self.active = torch.ones(n, dtype=torch.bool)
        self.depth = 0  # levels computed for at least one column
        self._chosen: tuple | None = None  # the choice for the current depth (recomputed after each level)

    def run(self) -> None:
        self._levels((0, 1, 2), self.active.nonzero().reshape(-1))  # one batch: the three steps of a smooth f
        self._stop_judged_columns(2)
        for level in range(3, self.max_levels):
            columns = self.active.nonzero().reshape(-1)
            if columns.numel() == 0:
                break
            self._levels((level,), columns)
            self._stop_judged_columns(level)

    def _levels(self, levels: tuple[int, ...], columns: torch.Tensor) -> None:
        """Central differences at the given levels for the given columns, evaluated as one batch."""
        x = self.x.reshape(-1)
        points, done = [], []
        for level in levels:
            wanted = (self.h0 * 2.0 ** -level * self.size[columns]).to(x.dtype).to(x.device)
            h = (x[columns.to(x.device)] + wanted) - x[columns.to(x.device)]
            usable = (h != 0).cpu()
            self.active[columns[~usable]] = False  # the step has rounded to zero: no smaller step exists
            if not usable.any():
                continue
            bump = torch.zeros(int(usable.sum()), x.numel(), dtype=x.dtype, device=x.device)
            bump[torch.arange(bump.shape[0]), columns[usable].to(x.device)] = h[usable.to(h.device)]
            points += [x + bump, x - bump]
            done.append((level, columns[usable], h[usable.to(h.device)].to(torch.float64).cpu()))
        if not points:
            return
        values = self.evaluate(torch.cat(points))
        self._grow(max(level for level, _, _ in done) + 1)
        start = 0
        for level, used, h64 in done:
            count = used.numel()
            plus, minus = values[start:start + count], values[start + count:start + 2 * count]
            start += 2 * count
            self.differences[level, used] = ((plus - minus) / (2 * h64).unsqueeze(1)).cpu()
            self.gaps[level, used] = ((plus + minus - 2 * self.value.to(plus.device)).abs() / h64.unsqueeze(1)).cpu()
            self.h[level, used] = h64
            self.levels[used] = level + 1
            self.depth, self._chosen = max(self.depth, level + 1), None

    def _grow(self, depth: int) -> None:
        """Room for `depth` levels in the per-level tables (NaN where a level is not computed)."""
        missing = depth - self.h.shape[0]
        if missing > 0:
            def more(table: torch.Tensor) -> torch.Tensor:
                return torch.cat([table, torch.full((missing, *table.shape[1:]), float("nan"), dtype=table.dtype)])

            self.differences, self.gaps, self.h = more(self.differences), more(self.gaps), more(self.h)

    def windows(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per window k (steps k, k+1, k+2): Neville's T22 (k, n, m), Ridders' error and the finest step."""
        d, h = self.differences[:self.depth], self.h[:self.depth].unsqueeze(2) ** 2
        first = (h[:-1] * d[1:] - h[1:] * d[:-1]) / (h[:-1] - h[1:])
        best = (h[:-2] * first[1:] - h[2:] * first[:-1]) / (h[:-2] - h[2:])
        error = torch.maximum((best - first[1:]).abs(), (best - first[:-1]).abs())
        # Three noisy levels can agree by chance (f's rounding quantizes differences at tiny steps, and more
        # so where f is ill-conditioned): a window is only as sure as its neighbours, one step either side.
        known = error.nan_to_num(0.0)
        padded = torch.nn.functional.pad(known, (0, 0, 0, 0, 1, 1))
        error = torch.maximum(error, torch.maximum(padded[:-2], padded[2:]))
        return best, error, self.h[2:self.depth].unsqueeze(2)

    def scale(self) -> torch.Tensor:
        """Per output, |f_i(x)| + Σ_k |J_ik|·|x_k|: the size of what f_i is computed from, shape (m, 1)."""
        value, _, uncertainty, _, _ = self._choose()
        numerical = torch.where(torch.isfinite(uncertainty), value, torch.zeros_like(value)).T
        magnitude = self.x.detach().reshape(-1, 1).abs().to(torch.float64).cpu()
        return self.value.abs().reshape(-1, 1) + numerical.nan_to_num(0.0).abs() @ magnitude

    def _choose(self):
        if self._chosen is None:
            self._chosen = self._least_uncertain()
        return self._chosen

    def _least_uncertain(self, rough: torch.Tensor | None = None):
        """Per element, the window of least uncertainty: (value, error, uncertainty, finest step, window).

        The rounding term needs the Jacobian's size; a first choice with |f| alone supplies it (a garbage
        coarse window must not inflate the scale of every other).
        """
        best, error, finest = self.windows()
        magnitude = self.x.detach().reshape(1, -1).abs().to(torch.float64).cpu()
        size = 0.0 if rough is None else magnitude @ rough.nan_to_num(0.0, posinf=0.0, neginf=0.0).abs()
        scale = self.value.abs().reshape(1, -1) + size  # (1, m)
        rounding = self.eps * scale.unsqueeze(0) / finest.abs()
        uncertainty = error + rounding + self.tiny
        uncertainty = torch.where(torch.isfinite(uncertainty) & torch.isfinite(best), uncertainty,
                                  torch.full_like(uncertainty, float("inf")))
        # Relative, not absolute: at coarse steps a fast-varying f can look flat, and a small garbage value
        # has a small absolute error estimate.
        relative = uncertainty / torch.maximum(best.abs().nan_to_num(0.0), torch.full_like(best, self.tiny))
        # An element at which f did not change at any step (f does not depend on that input, or is constant
        # there) is settled. A flat window among sloped ones is not: at small steps a staircase (round, or
        # a forward whose rounding is coarse, ndtr far in its tail) looks flat between its jumps.
        flat = ((best == 0) & (error == 0)) | ~torch.isfinite(best)
        settled = flat.all(0, keepdim=True) & torch.isfinite(best).any(0, keepdim=True)
        relative = torch.where(settled & (best == 0), torch.zeros_like(relative), relative)
        window = relative.argmin(0)  # (n, m)
        self._all = (best, uncertainty)
        chosen = [t.gather(0, window.unsqueeze(0)).squeeze(0) for t in (best, error, uncertainty,
                                                                        finest.expand_as(best))]
        if rough is None:
            return self._least_uncertain(torch.where(torch.isfinite(chosen[2]), chosen[0],
                                                     torch.zeros_like(chosen[0])))
        return (*chosen, window)

    def _judged(self, value: torch.Tensor, uncertainty: torch.Tensor, resolution: float | None = None) -> torch.Tensor:
        """(n, m): allowed small enough against the entry's scale (its row's and column's largest |J|)."""
        resolution = self.resolution if resolution is None else resolution
        size = value.nan_to_num(0.0, posinf=0.0, neginf=0.0).abs()
        reference = torch.maximum(size.amax(0, keepdim=True), size.amax(1, keepdim=True))
        exact_zero = (value == 0) & (uncertainty <= self.tiny * 2)
        return (self.safety * uncertainty <= resolution * reference) | exact_zero

    def _stop_judged_columns(self, level: int) -> None:
        """Stop a column once every element is judged and either precise (uncertainty at most ε^(2/3) of
        its scale: as good as a smooth f gives) or no longer improving (its best window is two or more
        steps behind the latest); or once rounding at its latest step alone exceeds the best uncertainty
        found (a smaller step can only be worse)."""
        value, _, uncertainty, _, window = self._choose()
        judged = self._judged(value, uncertainty)
        precise = self._judged(value, uncertainty, self.eps ** (2 / 3) / self.safety)
        stalled = (level - 2 - window) >= 2
        done = (judged & (precise | stalled)).all(1)
        scale = self.scale().reshape(1, -1)  # (1, m)
        rounding = self.eps * scale / self.h[level].abs().unsqueeze(1)  # (n, m)
        hopeless = (rounding > uncertainty).all(1)
        self.active &= ~(done | hopeless)

    def result(self):
        """(numerical, error, allowed before autograd's floor, finest step, judged), each (m, n)."""
        value, error, uncertainty, finest, _ = self._choose()
        judged = self._judged(value, uncertainty) & torch.isfinite(uncertainty)
        value = torch.where(torch.isfinite(uncertainty), value, torch.full_like(value, float("nan")))
        allowed = self.safety * uncertainty
        return value.T.contiguous(), error.T.contiguous(), allowed.T.contiguous(), finest.T.contiguous(), \
            judged.T.contiguous()

    def confirm(self, columns: torch.Tensor) -> None:
        """Smaller steps for the given columns: at least one more window (steps 8× smaller), then more until
        the finest window is judged or rounding alone exceeds what it could resolve."""
        start = self.levels.clone()
        active = torch.zeros_like(self.active)
        active[columns] = True
        while active.any():
            group = active.nonzero().reshape(-1)
            for depth in self.levels[group].unique().tolist():
                if depth >= self.max_levels:
                    active[group[self.levels[group] == depth]] = False
                    continue
                self._levels((depth,), group[self.levels[group] == depth])
            value, uncertainty = self.finest()
            judged = self._judged(value.T, uncertainty.T / self.safety).all(1)
            scale = self.scale().reshape(1, -1)
            last = (self.levels - 1).clamp_min(0).unsqueeze(0)
            finest_h = self.h[:self.depth].gather(0, last).squeeze(0).abs()  # the finest step of each column
            hopeless = (self.eps * scale / finest_h.unsqueeze(1) > uncertainty.T / self.safety).all(1)
            active &= (self.levels - start < 3) | ~(judged | hopeless)
            active &= self.levels < self.max_levels

    def finest(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per element, the value and allowance (safety × uncertainty) of its column's finest window, (m, n)."""
        self._choose()
        best, uncertainty = self._all
        last = (self.levels - 3).clamp_min(0).reshape(1, -1, 1).expand(1, *best.shape[1:])
        value, spread = best.gather(0, last).squeeze(0), uncertainty.gather(0, last).squeeze(0)
        return value.T.contiguous(), (self.safety * spread).T.contiguous()

    def finest_window(self) -> torch.Tensor:
        """Per column, the index of its finest window (its first step)."""
        return (self.levels - 3).clamp_min(0)

    def chosen_window(self) -> torch.Tensor:
        """Per column, the window chosen for its finest-resolved element."""
        return self._choose()[-1].amax(1)

    def kinks(self, window: torch.Tensor) -> torch.Tensor:
        """(m, n): at each column's window k, one-sided differences whose gap does not halve from step k to
        step k + 1 (a smooth f: h·f'' halves; a kink: the jump in slope stays), above rounding noise."""
        scale = self.scale().reshape(1, -1)  # (1, m)
        index = window.reshape(1, -1, 1).expand(1, *self.gaps.shape[1:])
        coarse = self.gaps.gather(0, index).squeeze(0)
        fine = self.gaps.gather(0, index + 1).squeeze(0)
        step = self.h.gather(0, window.unsqueeze(0) + 1).squeeze(0).abs().unsqueeze(1)
        noise = 2 * self.eps * scale / step
        found = (fine > KINK_RATIO * coarse) & (fine > KINK_NOISE * noise)  # False where a level is missing (NaN)
        return found.T.contiguous()


def _autograd_floor(jacobian: torch.Tensor, numerical: torch.Tensor, eps: float, safety: float) -> torch.Tensor:
    """autograd's own rounding: ε times the scale of the entry's row and column, of either Jacobian."""
    both = torch.maximum(jacobian.abs(), numerical.abs().nan_to_num(0.0))
    return safety * eps * torch.maximum(both.amax(1, keepdim=True), both.amax(0, keepdim=True))


def _autograd_jacobian(f: Function, x: torch.Tensor, mode: Mode) -> tuple[torch.Tensor, Mode, str]:
    """Autograd's Jacobian as (outputs, inputs) float64 on the CPU, the mode that made it, and any fallback."""
    transform = torch.func.jacrev if mode == "reverse" else torch.func.jacfwd
    try:
        jacobian = transform(f)(x.clone())
        return _flat(jacobian, x), mode, ""
    # torch.func refuses autograd.Functions it cannot transform (no setup_context, no vmap rule, no jvp
    # for forward mode) and some ops it has no batching rule for; plain autograd can still do reverse mode.
    except (RuntimeError, NotImplementedError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    leaf = x.clone().requires_grad_(True)
    with in_place_named():
        jacobian = torch.autograd.functional.jacobian(f, leaf)
    return _flat(jacobian, x), "reverse", f"torch.func.{transform.__name__} could not transform f ({reason}); " \
        "reverse mode by torch.autograd.functional.jacobian instead"


def _flat(jacobian: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # torch.func gives shape (*f(x).shape, *x.shape); the estimators use (outputs, inputs).
    return jacobian.detach().reshape(-1, x.numel()).to(torch.float64).cpu()


def _arguments(f: Function, inputs: Sequence[torch.Tensor], names: Sequence[str] | None) -> tuple[Argument, ...]:
    if names is None:
        names = _parameter_names(f, len(inputs))
    names = [str(name) for name in names]
    if len(names) != len(inputs) or len(set(names)) != len(names):
        raise CheckInputError(f"names={names!r}: give one distinct name per input ({len(inputs)} inputs)")
    offsets = [0]
    for x in inputs:
        offsets.append(offsets[-1] + x.numel())
    return tuple(Argument(name, tuple(x.shape), offset) for name, x, offset in zip(names, inputs, offsets))


def _parameter_names(f: Function, count: int) -> list[str]:
    # A custom autograd.Function is called through .apply(*args): its names are those of its forward.
    owner = getattr(f, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function):
        f = owner.forward
    try:
        parameters = [p for p in inspect.signature(f).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "ctx"]
    except (TypeError, ValueError):  # builtins such as torch.sin have no inspectable signature
        parameters = []
    if len(parameters) >= count:
        return [p.name for p in parameters[:count]]
    return ["x"] if count == 1 else [f"input {k}" for k in range(count)]


def _flattened(f: Function, arguments: tuple[Argument, ...]) -> Callable[[torch.Tensor], torch.Tensor]:
    """f as a function of one flat vector (all inputs' elements) returning one flat real vector."""

    def g(flat: torch.Tensor) -> torch.Tensor:
        parts = [flat[a.offset:a.offset + a.numel].reshape(a.shape) for a in arguments]
        return _output(f(*parts))

    return g


def _output(value: object) -> torch.Tensor:
    values = value if isinstance(value, (tuple, list)) else (value,)
    flat = []
    for part in values:
        if not isinstance(part, torch.Tensor):
            raise CheckInputError(f"f returned {type(part).__name__}, not a tensor; build it from the inputs "
                                  f"with torch ops")
        if part.is_complex():
            raise DtypeError("f returned a complex tensor; this checker judges real Jacobians only (a complex "
                             "output would be checked by its real part alone, a false pass). Return "
                             "torch.view_as_real(out) to check real and imaginary parts")
        if not part.dtype.is_floating_point:
            raise DtypeError(f"f returned dtype {dtype_name(part.dtype)}; only a real floating-point output has "
                             f"a Jacobian")
        flat.append(part.reshape(-1))
    if not flat:
        raise CheckInputError("f returned an empty tuple: there is no output to differentiate")
    return flat[0] if len(flat) == 1 else torch.cat(flat)


def _label(position: int, count: int) -> str:
    return "x" if count == 1 else f"input {position}"


def _require_input(x: object, label: str = "x") -> None:
    if not isinstance(x, torch.Tensor):
        raise CheckInputError(f"{label} must be a tensor (torch.tensor(...)), got {type(x).__name__}")
    if x.is_complex():
        raise DtypeError(
            f"{label} has dtype {dtype_name(x.dtype)}: complex inputs are refused rather than checked by their "
            f"real part alone (a false pass); pass torch.view_as_real(x) and rebuild it inside f with "
            f"torch.view_as_complex to check real and imaginary parts as real inputs"
        )
    if not x.dtype.is_floating_point or x.element_size() == 1:
        raise DtypeError(
            f"{label} has dtype {dtype_name(x.dtype)}; a gradient check needs a real floating-point input "
            f"(float32 or float64; float16 and bfloat16 are too coarse for a numerical Jacobian)"
        )
    if x.dtype in (torch.float16, torch.bfloat16):
        raise DtypeError(
            f"{label} has dtype {dtype_name(x.dtype)}: its ε = {machine_epsilon(x.dtype):.3g} leaves a Richardson "
            f"estimate only two or three digits, too few to judge a gradient; check in float32 or float64"
        )
    if x.numel() == 0:
        raise CheckInputError(f"{label} is empty: there is no Jacobian to check")
    if not torch.isfinite(x).all():
        raise NaNInputError(f"{label} contains NaN or infinity: {x.tolist()}")


class GradientMismatchError(AssertionError):
    """assert_gradients found elements of autograd's Jacobian outside their allowance."""


class InconclusiveGradientError(AssertionError):
    """assert_gradients could not judge some elements (a kink, f not finite near the inputs, or an estimate
    too uncertain), and none failed: the gradient is neither vouched for nor refuted. The message says why,
    per element, and what would settle it."""


def assert_gradients(f: Function, *inputs: torch.Tensor, **options) -> CheckReport:
    """Raise unless autograd's Jacobian of f at the inputs agrees with the numerical one: for test suites.

    GradientMismatchError (an AssertionError) names each mismatched element by input and index, with both
    values, the difference and the allowance; InconclusiveGradientError (also an AssertionError) says which
    elements could not be judged and why. Options as for check_jacobian. Returns the report on a pass.
    """
    report = check_jacobian(f, *inputs, **options)
    if report.outcome == "fail":
        raise GradientMismatchError(report.message())
    if report.outcome == "inconclusive":
        raise InconclusiveGradientError(report.message())
    return report


def check_module(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: torch.Tensor,
                 **options) -> CheckReport:
    """check_jacobian of loss(module(*args)) with respect to the module's trainable parameters, each named
    as in module.named_parameters() ("0.weight"); args are held fixed. Options as for check_jacobian."""
    if not isinstance(module, torch.nn.Module):
        raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not callable(loss):
        raise CheckInputError(f"loss must be a function of the module's output, got {type(loss).__name__}")
    named = [(name, parameter) for name, parameter in module.named_parameters() if parameter.requires_grad]
    if not named:
        raise CheckInputError(f"{type(module).__name__} has no parameters that require grad: nothing to check")
    names = [name for name, _ in named]

    def f(*parameters: torch.Tensor) -> torch.Tensor:
        return loss(torch.func.functional_call(module, dict(zip(names, parameters)), args))

    return check_jacobian(f, *[parameter.detach() for _, parameter in named], names=names, **options)


def assert_module_gradients(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                            *args: torch.Tensor, **options) -> CheckReport:
    """assert_gradients for a module's parameters: check_module, raising as assert_gradients does."""
    report = check_module(module, loss, *args, **options)
    if report.outcome == "fail":
        raise GradientMismatchError(report.message())
    if report.outcome == "inconclusive":
        raise InconclusiveGradientError(report.message())
    return report
