"""A gradient checker: autograd's Jacobian against a Richardson estimate, element by element.

Why not a fixed tolerance (gradcheck's atol 1e-5, rtol 1e-3): a fixed allowance is far looser than a good
estimate in float64 (so a backward wrong by 0.1 % passes) and far tighter than any estimate in float32 (so
correct gradients fail). Here each element (i, j) of the Jacobian gets its own allowance, taken from what
the numerical estimate itself can support:

    allowed[i, j] = safety · error[i, j]  +  safety · ε · (|f_i(x)| / h_j + |J_num[i, j]|)

- error[i, j] is the Richardson tableau's own error estimate (checks.numerical): it follows truncation, and
  rounding noise that varies between the tableau's steps.
- The second term is a floor for rounding that the error estimate can miss by chance (two noisy levels
  that happen to agree): each evaluation of f_i is off by about ε times the size of what it is computed
  from, |f_i| here standing for |f_i(x)| + Σ_k |J_ik|·|x_k| (see _rounding_scale); the quotient divides
  that by the finest step h_j; ε|J| covers rounding of the derivative itself, in autograd and the estimate.

A stencil that crosses a non-differentiable point (relu or abs at 0, a clamp's bound, a tie in max)
makes both numbers meaningless, not wrong: one-sided differences D+ and D- then disagree by the jump in
slope whatever the step, whereas for a smooth f their gap D+ - D- = h·f'' + O(h³) halves with the step.
Elements whose gap does not shrink (ratio > KINK_RATIO when h is halved) and stands above rounding are
flagged "kink" instead of being called a bug. A kink within about h/5 of x is caught this way; one farther
inside the stencil inflates the Richardson error estimate instead, which loosens that element's allowance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from .dtypes import dtype_name
from .errors import CheckInputError, DtypeError, NaNInputError
from .numerical import Estimate, default_step, estimate_jacobian, machine_epsilon, require_memory
from .validate import flag, memory, number

Function = Callable[[torch.Tensor], torch.Tensor]
Mode = Literal["reverse", "forward"]
MODES: tuple[Mode, ...] = ("reverse", "forward")
ElementVerdict = Literal["pass", "fail", "kink"]

# Allowance factor over the error estimate and the rounding floor; the same 10 as the tolerances module
# (checks.tolerances.NUMERICAL_SAFETY): an estimate rarely misses by ten times its own error estimate.
SAFETY = 10.0
# For a smooth f the one-sided gap halves with the step (ratio 0.5, or 0.125 where f'' = 0); a kink keeps
# it near 1. 0.75 sits between the two.
KINK_RATIO = 0.75
# A gap must exceed this many times the rounding noise of a one-sided difference (2ε|f|/h) to count.
KINK_NOISE = 100.0


@dataclass(frozen=True)
class Element:
    """One Jacobian entry: d f_output / d x_input by autograd and numerically, and what was allowed."""

    output: int
    input: int
    autograd: float
    numerical: float
    error_estimate: float
    allowed: float
    verdict: ElementVerdict

    @property
    def difference(self) -> float:
        return abs(self.autograd - self.numerical)


@dataclass(frozen=True, eq=False)
class CheckReport:
    """The outcome of check_jacobian: both Jacobians (outputs, inputs) in float64, allowances and verdicts.

    mode         -- the autograd mode that produced `autograd` ("reverse" or "forward")
    requested    -- the mode asked for; differs from mode when forward mode was not supported
    note         -- why a fallback happened ("" when none)
    estimate     -- the Richardson estimate, with its steps and evaluation count
    kink         -- per element, True where the stencil crosses a non-differentiable point
    evaluations  -- every evaluation of f: the estimate's, the kink test's, f(x) and autograd's forward
    seconds      -- wall time of the whole check
    """

    autograd: torch.Tensor
    numerical: torch.Tensor
    error: torch.Tensor
    allowed: torch.Tensor
    kink: torch.Tensor
    mode: Mode
    requested: Mode
    note: str
    estimate: Estimate
    dtype: str
    device: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    evaluations: int
    seconds: float

    @property
    def mismatch(self) -> torch.Tensor:
        """Elements outside their allowance that are not at a kink: the evidence of a wrong gradient."""
        return ((self.autograd - self.numerical).abs() > self.allowed) & ~self.kink

    @property
    def passed(self) -> bool:
        """No mismatch. Kinks are not failures; they are reported (kinks > 0) for a reader to judge."""
        return not bool(self.mismatch.any())

    @property
    def kinks(self) -> int:
        return int(self.kink.sum())

    def verdicts(self) -> list[list[ElementVerdict]]:
        mismatch = self.mismatch
        return [["kink" if self.kink[i, j] else "fail" if mismatch[i, j] else "pass"
                 for j in range(self.autograd.shape[1])] for i in range(self.autograd.shape[0])]

    def elements(self) -> list[Element]:
        """The per-element report, row by row (output index, then input index into the flattened x)."""
        verdicts = self.verdicts()
        return [
            Element(i, j, float(self.autograd[i, j]), float(self.numerical[i, j]), float(self.error[i, j]),
                    float(self.allowed[i, j]), verdicts[i][j])
            for i in range(self.autograd.shape[0]) for j in range(self.autograd.shape[1])
        ]

    def frame(self):
        """The per-element report as a table (pandas), with the dtype and device of the check beside."""
        import pandas as pd

        return pd.DataFrame([
            {"output": e.output, "input": e.input, "autograd": e.autograd, "numerical": e.numerical,
             "error estimate": e.error_estimate, "allowed": e.allowed, "verdict": e.verdict,
             "dtype": self.dtype, "device": self.device, "mode": self.mode}
            for e in self.elements()
        ])

    def summary(self) -> str:
        failed = int(self.mismatch.sum())
        total = self.autograd.numel()
        state = "passed" if self.passed else f"failed: {failed} of {total} elements outside their allowance"
        kinks = f", {self.kinks} at a kink" if self.kinks else ""
        return (f"{state}{kinks} ({self.mode} mode, {self.dtype}, {self.device}, "
                f"{self.evaluations} evaluations of f)")


def check_jacobian(
    f: Function,
    x: torch.Tensor,
    *,
    mode: Mode = "reverse",
    levels: int = 3,
    step: float | None = None,
    safety: float = SAFETY,
    kinks: bool = True,
) -> CheckReport:
    """Compare autograd's Jacobian of f at x with a Richardson estimate; a mismatch is a report, not a raise.

    mode   -- "reverse" (torch.func.jacrev) or "forward" (torch.func.jacfwd); where torch.func cannot
              transform f (an autograd.Function without setup_context/vmap support, or without jvp for
              forward mode) the check falls back to torch.autograd.functional.jacobian in reverse mode,
              and the report's note says why
    levels -- Richardson levels (steps h, h/2, ...); step -- its relative step h0 (default ε^(1/5))
    safety -- the allowance factor over the error estimate and the rounding floor
    kinks  -- run the one-sided kink test (4n + 4 more evaluations of f)
    """
    if mode not in MODES:
        raise CheckInputError(f"mode={mode!r} is not an autograd mode; use one of {MODES}")
    if not callable(f):
        raise CheckInputError(f"f must be a function of a tensor, got {type(f).__name__}")
    _require_input(x)
    number(safety, "safety (a factor over the error estimate)", minimum=1)
    flag(kinks, "kinks")
    start = time.perf_counter()
    x = x.detach()
    with torch.no_grad():
        value = _tensor(f(x.clone()))
    if not torch.isfinite(value).all():
        raise NaNInputError(f"f(x) is not finite at x={x.tolist()}: the Jacobian there is undefined")
    memory(value.numel() * x.numel() * 8, f"autograd's Jacobian of {value.numel()} outputs by {x.numel()} inputs",
           "it is held whole in float64 beside a numerical one of the same size; check a smaller x")
    require_memory(x, "richardson")
    jacobian, used, note = _autograd_jacobian(f, x, mode)
    estimate = estimate_jacobian(f, x, "richardson", step, levels=levels)
    numerical = estimate.values.to(torch.float64).cpu()
    error = estimate.error.to(torch.float64).cpu()
    eps = machine_epsilon(x.dtype)
    finest = estimate.steps[-1].reshape(1, -1).abs().cpu()
    scale = _rounding_scale(value, numerical, x)
    allowed = safety * error + safety * eps * (scale / finest + numerical.abs())
    kink = torch.zeros_like(numerical, dtype=torch.bool)
    evaluations = estimate.evaluations + 2  # f(x) above and autograd's own forward
    if kinks:
        h0 = default_step("richardson", x.dtype).h0 if step is None else estimate.h0
        kink, extra = _kinks(f, x, h0, scale, eps)
        evaluations += extra
    return CheckReport(
        autograd=jacobian,
        numerical=numerical,
        error=error,
        allowed=allowed,
        kink=kink,
        mode=used,
        requested=mode,
        note=note,
        estimate=estimate,
        dtype=dtype_name(x.dtype),
        device=x.device.type,
        input_shape=tuple(x.shape),
        output_shape=tuple(value.shape),
        evaluations=evaluations,
        seconds=time.perf_counter() - start,
    )


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
    jacobian = torch.autograd.functional.jacobian(f, leaf)
    return _flat(jacobian, x), "reverse", f"torch.func.{transform.__name__} could not transform f ({reason}); " \
        "reverse mode by torch.autograd.functional.jacobian instead"


def _flat(jacobian: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # torch.func gives shape (*f(x).shape, *x.shape); the estimators use (outputs, inputs).
    return jacobian.detach().reshape(-1, x.numel()).to(torch.float64).cpu()


def _rounding_scale(value: torch.Tensor, jacobian: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Per output i, the size of the numbers f_i is computed from: |f_i(x)| + Σ_k |J_ik|·|x_k|, shape (m, 1).

    Rounding an evaluation of f_i costs about ε times this, not ε|f_i(x)|: where f_i(x) is small by
    cancellation (layer_norm of an element equal to the mean) its intermediates are still of size |J||x|.
    """
    magnitude = x.detach().reshape(-1, 1).abs().to(torch.float64).cpu()
    return value.detach().to(torch.float64).abs().reshape(-1, 1).cpu() + jacobian.abs() @ magnitude


def _kinks(f: Function, x: torch.Tensor, h0: float, scale: torch.Tensor, eps: float) -> tuple[torch.Tensor, int]:
    """Per element, whether one-sided differences disagree by more than smoothness allows, and the cost.

    D+ comes from a forward difference of f at x; D- from a forward difference of t -> f(-t) at -x (which
    evaluates f at x - h), negated. Both at the Richardson start step h and at h/2.
    """
    def mirrored(t: torch.Tensor) -> torch.Tensor:
        return f(-t)

    gaps, noise, evaluations = [], [], 0
    for h in (h0, h0 / 2):
        plus = estimate_jacobian(f, x, "forward", h)
        minus = estimate_jacobian(mirrored, -x, "forward", h)
        evaluations += plus.evaluations + minus.evaluations
        gaps.append((plus.values.to(torch.float64) + minus.values.to(torch.float64)).abs().cpu())
        steps = torch.minimum(plus.step.abs(), minus.step.abs()).reshape(1, -1).cpu()
        noise.append(2 * eps * scale / steps)
    coarse, fine = gaps
    kink = (fine > KINK_RATIO * coarse) & (fine > KINK_NOISE * noise[1])
    return kink, evaluations


def _require_input(x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise CheckInputError(f"x must be a tensor (torch.tensor(...)), got {type(x).__name__}")
    if not x.dtype.is_floating_point or x.element_size() == 1:
        raise DtypeError(
            f"x has dtype {dtype_name(x.dtype)}; a gradient check needs a real floating-point x "
            f"(float32 or float64; float16 and bfloat16 are too coarse for a numerical Jacobian)"
        )
    if x.dtype in (torch.float16, torch.bfloat16):
        raise DtypeError(
            f"x has dtype {dtype_name(x.dtype)}: its ε = {machine_epsilon(x.dtype):.3g} leaves a Richardson "
            f"estimate only two or three digits, too few to judge a gradient; check in float32 or float64"
        )
    if x.numel() == 0:
        raise CheckInputError("x is empty: there is no Jacobian to check")
    if not torch.isfinite(x).all():
        raise NaNInputError(f"x contains NaN or infinity: {x.tolist()}")


def _tensor(value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise CheckInputError(f"f(x) returned {type(value).__name__}, not a tensor; build it from x with torch ops")
    if not value.dtype.is_floating_point:
        raise DtypeError(f"f(x) has dtype {dtype_name(value.dtype)}; only a real floating-point output has a Jacobian")
    return value
