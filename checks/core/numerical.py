"""Numerical derivatives: forward, central, complex-step and Richardson-extrapolated central differences.

Every estimate says how it was made: the method, the step actually used per input element, the number of
function evaluations and, for Richardson, an error estimate per element.

Rules every estimator here follows, and why:

- f is evaluated in x's dtype: that is the precision being checked. The arithmetic after the
  evaluations (differences, division, extrapolation) is done in float64, so the estimate's error comes
  from f's rounding and from the step, not from the estimator's own bookkeeping (in float16, h² of a
  Richardson extrapolation would underflow). Values are returned in x's dtype.
- The step is scaled with |x| (h = h0 · max(|x|, 1)), so it is a relative perturbation for large x and an
  absolute one near 0, and it is made representable: h = (x + h) - x in x's dtype. The quotient then
  divides by the perturbation x really received, not by the one asked for.
- A step that rounds to zero (x + h == x) is refused with StepError instead of dividing by zero.
- Perturbed evaluations are batched with torch.func.vmap where f allows it, and run in a loop otherwise
  (vmap cannot batch .item(), data-dependent Python branches or random ops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from .dtypes import dtype_name
from .errors import CheckInputError, DtypeError, NaNInputError, StepError
from .evaluate import Evaluator, Function
from .validate import memory

Method = Literal["forward", "central", "complex", "richardson"]
METHODS: tuple[Method, ...] = ("forward", "central", "complex", "richardson")
# Richardson's extrapolation halves the step per level: beyond this its finest steps round to nothing useful.
MAX_LEVELS = 10

# The complex dtype in which a complex-step estimate evaluates f for each real dtype. There is no complex
# bfloat16; torch.complex32 (chalf) pairs with float16 but few ops support it (on the CPU not even sin or
# exp), so float16 is left out too.
COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def machine_epsilon(dtype: torch.dtype) -> float:
    """The gap between 1 and the next representable number: torch.finfo(dtype).eps."""
    return float(torch.finfo(dtype).eps)


@dataclass(frozen=True)
class StepRule:
    """A default relative step h0 for a method and dtype, with the reasoning it comes from."""

    method: Method
    dtype: str
    h0: float
    formula: str
    reason: str


def default_step(method: Method, dtype: torch.dtype, levels: int = 3) -> StepRule:
    """The relative step each method uses unless told otherwise, derived from machine epsilon ε.

    forward:    error ≈ ε|f|/h + h|f''|/2, smallest at h ≈ √ε for f, f'' of order 1.
    central:    error ≈ ε|f|/h + h²|f'''|/6, smallest at h ≈ ε^(1/3).
    complex:    no subtraction, so no cancellation: error ≈ ε|f'| + h²|f'''|/6; h = √ε keeps it ≈ ε.
    richardson: `levels` central differences at h, h/2, ... removes the error terms h², h⁴,
                ..., h^(2·levels - 2), leaving ≈ ε|f|/h + h^(2·levels)·|f^(2·levels + 1)|, smallest at
                h ≈ ε^(1/(2·levels + 1)): ε^(1/7) for the default three levels, ε^(1/5) for two.
    """
    _require_method(method)
    eps = machine_epsilon(dtype)
    name = dtype_name(dtype)
    if method == "richardson":
        _require_levels(levels)
        order = 2 * levels
        removed = ", ".join(f"h^{2 * k}" for k in range(1, levels))
        exponent, formula, why = (1 / (order + 1), f"ε^(1/{order + 1})",
                                  f"{levels} levels remove {removed}; balances rounding ε|f|/h against the "
                                  f"remaining truncation h^{order}")
    else:
        exponent, formula, why = {
            "forward": (1 / 2, "√ε", "balances rounding ε|f|/h against truncation h|f''|/2"),
            "central": (1 / 3, "ε^(1/3)", "balances rounding ε|f|/h against truncation h²|f'''|/6"),
            "complex": (1 / 2, "√ε", "no cancellation; truncation h²|f'''|/6 ≈ ε at this step"),
        }[method]
    return StepRule(method, name, eps**exponent, formula, f"{formula} with ε = {eps:.3g} ({name}): {why}")


def step_floor(eps: float) -> float:
    """The finest relative step the checker's search takes a column to, ε^(3/4) (where f's rounding over the
    step, ε/h, is ε^(1/4): below it a step resolves nothing a coarser one did not)."""
    return eps ** 0.75


@dataclass(frozen=True, eq=False)
class Estimate:
    """A numerical derivative and how it was made.

    values      -- gradient (x's shape) from estimate_gradient; Jacobian (outputs, inputs) from
                   estimate_jacobian, one column per input element, both in x's dtype
    method      -- "forward", "central", "complex" or "richardson"
    steps       -- the representable steps used, shape (levels, *x.shape), float64 (levels = 1 except
                   for Richardson, whose rows are its successively halved steps)
    evaluations -- how many times f was evaluated (each point of a vmap batch counts once)
    error       -- Richardson only: an estimate of |values - exact| per element (float64), else None
    dtype       -- the dtype f was evaluated in
    batched     -- True when the perturbed points went through torch.func.vmap, False for the loop
    h0          -- the relative step asked for (before scaling with |x| and rounding)
    """

    values: torch.Tensor
    method: Method
    steps: torch.Tensor
    evaluations: int
    error: torch.Tensor | None
    dtype: str
    batched: bool
    h0: float

    @property
    def step(self) -> torch.Tensor:
        """The (first) representable step per input element."""
        return self.steps[0]

    def summary(self) -> dict[str, Any]:
        """How the estimate was made, as plain Python for a record or a table: method, steps, evaluations, error estimate."""
        return {
            "method": self.method,
            "step": self.steps.tolist() if self.steps.shape[0] > 1 else self.steps[0].tolist(),
            "evaluations": self.evaluations,
            "error_estimate": None if self.error is None else self.error.tolist(),
        }


def estimate_gradient(
    f: Function,
    x: torch.Tensor,
    method: Method = "central",
    step: float | None = None,
    *,
    levels: int = 3,
    vectorize: bool | None = None,
) -> Estimate:
    """Estimate the gradient of a scalar-valued f at x; values have x's shape.

    step      -- relative step h0 (default: default_step(method, x.dtype, levels).h0); the step used per element
                 is (x + h0·max(|x|, 1)) - x in x's dtype
    levels    -- Richardson only: how many halved steps the extrapolation uses (at least 2)
    vectorize -- None: try torch.func.vmap, fall back to a loop; True: vmap only; False: loop only
    """
    estimate = estimate_jacobian(f, x, method, step, levels=levels, vectorize=vectorize, _scalar=True)
    shape = estimate.steps.shape[1:]
    error = None if estimate.error is None else estimate.error.reshape(shape)
    return Estimate(estimate.values.reshape(shape), estimate.method, estimate.steps, estimate.evaluations,
                    error, estimate.dtype, estimate.batched, estimate.h0)


def estimate_jacobian(
    f: Function,
    x: torch.Tensor,
    method: Method = "central",
    step: float | None = None,
    *,
    levels: int = 3,
    vectorize: bool | None = None,
    _scalar: bool = False,
) -> Estimate:
    """Estimate the Jacobian of f at x: shape (f(x).numel(), x.numel()), column j from perturbing x[j].

    Arguments as for estimate_gradient.
    """
    _require_method(method)
    x = _input(x)
    if method == "richardson":
        _require_levels(levels)
    if vectorize is not None and not isinstance(vectorize, bool):
        raise CheckInputError(f"vectorize must be None, True or False, got {vectorize!r}")
    h0 = default_step(method, x.dtype, levels).h0 if step is None else _relative_step(step)
    require_memory(x, method)
    evaluate = Evaluator(f, x, vectorize, scalar=_scalar)
    error = None
    if method == "forward":
        values, used = _forward(evaluate, x, h0)
    elif method == "central":
        values, used = _central(evaluate, x, h0)
    elif method == "complex":
        values, used = _complex(evaluate, x, h0)
    else:
        values, used, error = _richardson(evaluate, x, h0, levels)
    return Estimate(
        values=values.to(x.dtype),
        method=method,
        steps=used.reshape(-1, *x.shape),
        evaluations=evaluate.count,
        error=error,
        dtype=dtype_name(x.dtype),
        batched=evaluate.batched,
        h0=h0,
    )


def require_memory(x: torch.Tensor, method: Method) -> None:
    """Refuse an estimate whose perturbed copies of x (one row per evaluation, made at once) do not fit."""
    n = x.numel()
    rows = n if method in ("forward", "complex") else 2 * n
    itemsize = 2 * x.element_size() if method == "complex" else x.element_size()
    memory(rows * n * itemsize, f"a {method} estimate for x of {n} elements ({dtype_name(x.dtype)})",
           f"it evaluates f at {rows} perturbed copies of x, each of {n} elements, made at once; estimate "
           f"a few elements at a time (a smaller x) instead")


def representable_step(x: torch.Tensor, h0: float) -> torch.Tensor:
    """The step x really receives: (x + h0·max(|x|, 1)) - x, computed in x's dtype; refuses zero steps."""
    wanted = (h0 * torch.clamp(x.detach().abs().to(torch.float64), min=1.0)).to(x.dtype)
    used = (x + wanted) - x
    if (used == 0).any():
        index = int((used == 0).reshape(-1).nonzero()[0])
        value = float(x.reshape(-1)[index])
        raise StepError(
            f"step h0={h0:.3g} rounds to zero in {dtype_name(x.dtype)} at x[{index}]={value:g}: x + h == x, "
            f"so a difference quotient would divide 0 by 0 (use a larger step; "
            f"ε of {dtype_name(x.dtype)} is {machine_epsilon(x.dtype):.3g})"
        )
    return used


def _forward(evaluate: Evaluator, x: torch.Tensor, h0: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(f(x + h e_j) - f(x)) / h: n + 1 evaluations, error O(h)."""
    h = representable_step(x, h0).reshape(-1)
    flat = x.reshape(-1)
    centre = evaluate(flat.unsqueeze(0))
    shifted = evaluate(flat + torch.diag(h))
    columns = (shifted - centre) / h.to(torch.float64).unsqueeze(1)
    return columns.T, h.to(torch.float64)


def _central_columns(evaluate: Evaluator, x: torch.Tensor, h0: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(f(x + h e_j) - f(x - h e_j)) / 2h as columns (inputs, outputs): 2n evaluations, error O(h²)."""
    h = representable_step(x, h0).reshape(-1)
    flat = x.reshape(-1)
    both = evaluate(torch.cat([flat + torch.diag(h), flat - torch.diag(h)]))
    plus, minus = both[: flat.numel()], both[flat.numel():]
    return (plus - minus) / (2 * h.to(torch.float64)).unsqueeze(1), h.to(torch.float64)


def _central(evaluate: Evaluator, x: torch.Tensor, h0: float) -> tuple[torch.Tensor, torch.Tensor]:
    columns, h = _central_columns(evaluate, x, h0)
    return columns.T, h


def _complex(evaluate: Evaluator, x: torch.Tensor, h0: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Im f(x + i h e_j) / h: n evaluations, no subtraction and so no cancellation; f must be analytic."""
    complex_dtype = COMPLEX_OF.get(x.dtype)
    if complex_dtype is None:
        raise DtypeError(
            f"the complex step needs a complex dtype for {dtype_name(x.dtype)}: complex64 and complex128 serve "
            f"float32 and float64; torch.complex32 (for float16) exists but few ops support it (not even sin "
            f"or exp on the CPU), and there is no complex bfloat16"
        )
    # The perturbation is purely imaginary, so it is representable whenever h itself is: no rounding
    # against x happens. h is still scaled with |x| for the same reason as the other methods.
    h = (h0 * torch.clamp(x.detach().abs().to(torch.float64), min=1.0)).to(x.dtype).reshape(-1)
    flat = x.reshape(-1).to(complex_dtype)
    outputs = evaluate(flat + 1j * torch.diag(h).to(complex_dtype), complex_step=True)
    return (outputs / h.to(torch.float64).unsqueeze(1)).T, h.to(torch.float64)


def neville(differences: np.ndarray, squared_steps: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Neville's scheme on central differences at successive steps, extrapolated `order` times to h² = 0.

    differences: (levels, ...) the central differences D(h_i); squared_steps: h_i², broadcastable to them,
    the representable steps as they are (their ratio is not exactly 2 after rounding). Tableau:
    T[i][0] = D(h_i), T[i][j] = (h_{i-j}² T[i][j-1] - h_i² T[i-1][j-1]) / (h_{i-j}² - h_i²).

    Returns (value, ridders), each (levels - order, ...): per window of order + 1 consecutive steps, i from
    order on, T[i][order] and Ridders' error estimate, the larger of |T[i][order] - T[i][order-1]| and
    |T[i][order] - T[i-1][order-1]|: the change the last extrapolation made. That is the error of the value
    extrapolated once less, an overestimate where truncation dominates; where there are several windows
    the checker's search (estimate.py) compares each with its neighbours instead.
    """
    value = previous = np.asarray(differences)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(1, order + 1):
            coarse, fine = squared_steps[:-j], squared_steps[j:]
            previous = value
            value = (coarse * previous[1:] - fine * previous[:-1]) / (coarse - fine)
        ridders = np.maximum(np.abs(value - previous[1:]), np.abs(value - previous[:-1]))
    return value, ridders


def _richardson(
    evaluate: Evaluator, x: torch.Tensor, h0: float, levels: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Central differences at h0, h0/2, ..., h0/2^(levels-1), extrapolated by Neville's scheme (neville)
    over all of them: the error terms h², h⁴, ... up to h^(2 levels - 2) cancel. Its error is Ridders'.
    """
    columns, steps = [], []
    for level in range(levels):
        differences, h = _central_columns(evaluate, x, h0 / 2**level)
        columns.append(differences.cpu().numpy())
        steps.append(h)
    used = torch.stack(steps)
    squared = (used.cpu().numpy() ** 2)[:, :, None]
    value, error = neville(np.stack(columns), squared, levels - 1)
    device = used.device
    return torch.from_numpy(value[-1].T.copy()).to(device), used, torch.from_numpy(error[-1].T.copy()).to(device)


def noise_level(values: np.ndarray) -> np.ndarray:
    """The rounding noise of f's outputs, measured from f at equally spaced points on a line (Moré & Wild's
    ECnoise, "Estimating computational noise", SIAM J. Sci. Comput. 33(3), 2011).

    values: (..., points, outputs), f at x + t·δ·p for t = 0, 1, ..., with δ far below the scale on which f
    varies (leading dimensions: several lines at once). Returns (..., outputs): per output, the standard
    deviation σ of the noise, in float64 (NaN where a sample is not finite).

    For a smooth f the k-th differences of the samples shrink like δ^k; for noise of standard deviation σ,
    γ_k·mean((Δ^k f)²) with γ_k = (k!)²/(2k)! stays σ² at every k. The estimate is the first σ_k from
    which three consecutive levels agree within a factor 4 while the k-th differences change sign (noise,
    not a smooth trend). Where no level qualifies (the smooth part dominates every order, or the samples
    are too few), the smallest level of at least three differences is returned: an upper estimate, as a
    smooth part only adds to it. Outputs that do not change at all have σ = 0. (numpy, not torch: a
    dozen operations on a few numbers each, where torch's dispatch would cost more than the arithmetic.)
    """
    differences = np.asarray(values, dtype=np.float64)
    points = differences.shape[-2]
    if points < 4:
        raise CheckInputError(f"a noise level needs at least 4 points on the line, got {points}")
    gamma = 1.0
    levels, both_signs = [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(1, points):
            differences = np.diff(differences, axis=-2)
            gamma *= 0.5 * k / (2 * k - 1)
            levels.append(np.sqrt(gamma * (differences**2).mean(-2)))
            both_signs.append((differences.min(-2) < 0) & (differences.max(-2) > 0))
        # Levels from at least three differences; three consecutive of them agreeing, with a sign change.
        usable = points - 3
        noise = np.min(levels[:usable], axis=0)
        found = np.zeros(noise.shape, dtype=bool)
        for k in range(usable):
            window = np.stack(levels[k:k + 3])
            agree = (window.max(0) <= 4 * window.min(0)) & both_signs[k] & ~found
            noise = np.where(agree, levels[k], noise)
            found |= agree
    return noise


def _input(x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise CheckInputError(f"x must be a tensor (torch.tensor(...)), got {type(x).__name__}")
    if not x.dtype.is_floating_point or x.element_size() == 1:
        raise DtypeError(
            f"x has dtype {dtype_name(x.dtype)}; finite differences need a real floating-point x with "
            f"arithmetic (float16, bfloat16, float32 or float64)"
        )
    if x.numel() == 0:
        raise CheckInputError(f"x is empty (shape {tuple(x.shape)}): there is nothing to differentiate")
    if not torch.isfinite(x).all():
        raise NaNInputError(f"x contains NaN or infinity: {x.tolist()}")
    return x.detach()


def _relative_step(step: object) -> float:
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step) or step <= 0:
        raise CheckInputError(f"step must be a positive finite number (a relative step h0), got {step!r}")
    return float(step)


def _require_levels(levels: object) -> None:
    if isinstance(levels, bool) or not isinstance(levels, int) or not 2 <= levels <= MAX_LEVELS:
        raise CheckInputError(f"Richardson extrapolation needs levels from 2 to {MAX_LEVELS} (got {levels!r}): it "
                              f"combines steps h0, h0/2, ..., and finer ones round away")


def _require_method(method: object) -> None:
    if method not in METHODS:
        raise CheckInputError(f"method={method!r} is not a finite-difference method; use one of {METHODS}")
