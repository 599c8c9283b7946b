"""Allowance: how far autograd may be from the estimate, per element, and the caller's tolerance.

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
- ρ_i·max(|J| in row, column): autograd's own rounding, and the estimate's share of f's relative noise.
  ρ_i = ε·max(1, A_i), A_i the ratio of f_i's measured noise to ε·scale_i (the report's amplification is
  the largest). An entry computed as 1e-17 where f does not depend on x_j at all is rounding, not a bug;
  where f amplifies its rounding, its backward runs through the same operations, and f's noise at x ± h
  grows with |f(x ± h)|, an error of relative size ρ_i in the estimate that no step reduces. Per output: one
  ill-conditioned row (a normalisation of inputs near its eps) must not widen every other row's allowance.
  Where safety·ρ_i exceeds RESOLUTION, autograd's own rounding could be that much of every entry of row i,
  and none of them is judged (checks.core.confirm).
- tiny: the smallest normal number of the dtype, a floor for subnormal results.
"""

from __future__ import annotations

import numpy as np
import torch

from .errors import CheckInputError
from .tolerances import NUMERICAL_SAFETY, Tolerance
from .validate import number

# Allowance factor over the uncertainty: the one of checks.core.tolerances (an estimate rarely misses by ten
# times its own error estimate).
SAFETY = NUMERICAL_SAFETY
# An element is judged only when its allowance is at most this fraction of the entry's scale: a pass with
# an allowance of 50 % would vouch for nothing.
RESOLUTION = 1e-2
# Rows of the allowance the autograd floor is added to at once.
FLOOR_ROWS = 256


def given_tolerance(atol: object, rtol: object) -> Tolerance | None:
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


def add_autograd_floor(allowed: torch.Tensor, jacobian: torch.Tensor, numerical: torch.Tensor, relative: np.ndarray,
                        safety: float) -> None:
    """Adds autograd's own rounding to the allowance, in place: f_i's relative noise (relative, per output: ε,
    or more where f amplifies it) times the scale of the entry's row and column, of either Jacobian's finite
    entries (a NaN or inf must not widen, or poison, the allowance of its row and column; nan_to_num would turn
    inf into the largest float). In numpy, a block of rows at a time: no table of the floor itself (see _finite)."""
    def maxima(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:  # per row (m, 1) and column (1, n)
        # A block of rows at a time: |t| with its non-finite entries 0 stays in cache, not a table of its own.
        table = t.numpy()
        rows, columns = np.empty((table.shape[0], 1)), np.zeros((1, table.shape[1]))
        for begin in range(0, table.shape[0], FLOOR_ROWS):
            size = np.abs(table[begin:begin + FLOOR_ROWS])
            size[~np.isfinite(size)] = 0.0
            size.max(1, keepdims=True, out=rows[begin:begin + FLOOR_ROWS])
            np.maximum(columns, size.max(0, keepdims=True), out=columns)
        return rows, columns

    (rows, columns), (numerical_rows, numerical_columns) = maxima(jacobian), maxima(numerical)
    rows = np.maximum(rows, numerical_rows)
    columns = np.maximum(columns, numerical_columns)
    factor = (safety * relative)[:, None]
    table = allowed.numpy()
    for begin in range(0, table.shape[0], FLOOR_ROWS):
        block = slice(begin, begin + FLOOR_ROWS)
        table[block] += np.maximum(rows[block], columns) * factor[block]


# The report's tables are float64 on the CPU, and for a large Jacobian a fresh torch tensor costs its pages one
# fault at a time (torch.isfinite builds several): the element-wise masks are computed in numpy, on the same
# memory.
def _finite(t: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.isfinite(t.numpy()))


def _difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in torch, without a warning
        difference = np.subtract(a.numpy(), b.numpy())
    return torch.from_numpy(np.abs(difference, out=difference))
