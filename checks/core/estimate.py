"""Estimate: the adaptive Richardson search for the Jacobian, element by element (the checker's numerical side).

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

The noise probe: f's rounding is measured at x (Moré & Wild's ECnoise, numerical.noise_level) on NOISE_LINES
random lines, beside the a-priori bound ε·(|f_i| + Σ_k |J_ik|·|x_k|) (see checks.core.allowance).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .evaluate import Evaluator
from .indices import nonzero
from .numerical import neville, noise_level, step_floor

FIRST_LEVELS = 4
# Steps per later batch, for the columns not settled by the first: a window's worth.
LATER_LEVELS = 3
# The points of one evaluation of f (and its values) stay under this many bytes: a large x is evaluated
# in chunks of columns, one batch each.
CHUNK_BYTES = 64 * 2**20
# The noise probe: f at x + t·δ·p for t = ±1, ..., ±NOISE_REACH on NOISE_LINES random lines p (16 points,
# in the first batch). Two lines of nine points: for white noise, an estimate from one line falls below a
# quarter of the true noise about once in a thousand checks (measured), the larger of two independent ones
# about once in a million.
NOISE_REACH = 4
NOISE_LINES = 2
# Measured noise σ counts as a bound of NOISE_BOUND·σ on one evaluation's rounding (uniform noise of
# amplitude A has σ = A/√3).
NOISE_BOUND = 3.0


class Search:
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

    def __init__(self, evaluate: Evaluator, x: torch.Tensor, value: torch.Tensor, h0: float, eps: float,
                 tiny: float, safety: float, resolution: float, base: np.ndarray | None = None,
                 precision: float | None = None, reuse_points: bool = True) -> None:
        """base: per output, the size of what it is computed from besides the Jacobian's share Σ_k |J_ik|·|x_k|
        (default |f_i(x)|; a sum of many terms, as a projection is, passes the sum of their sizes).
        precision: the relative uncertainty at which a column stops improving (default ε^(2/3), as good as a
        smooth f gives). reuse_points: False for an f that changes its input in place (each block of points
        is then written whole for its evaluation: what f changed must not reach the next one)."""
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
        self.max_levels = max(FIRST_LEVELS, math.ceil(math.log2(h0 / step_floor(eps))) + 1)
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
        self._points = np.empty((0, n), dtype=self.x.dtype)  # the block of points (_block)
        self.reuse_points = reuse_points

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
        offsets = np.concatenate([np.arange(-NOISE_REACH, 0), np.arange(1, NOISE_REACH + 1)], dtype=np.float64)
        steps = self.eps ** (2 / 3) * self.size * _probe_directions(self.x.size)  # (lines, n)
        points = self.x.astype(np.float64) + offsets[None, :, None] * steps[:, None, :]
        return points.reshape(-1, self.x.size).astype(self.x.dtype)

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

    def amplification(self) -> np.ndarray:
        """Per output, the ratio of the measured noise bound to ε·scale_i (0 where it is not finite), (m,)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.measured / (self.eps * self.scale())
        return np.where(np.isfinite(ratio), ratio, 0.0)

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
        # One block of points: the extra points, x ± h e_j, and x itself where the evaluator compares its
        # batched f(x) with the plain one. Its rows are copies of x kept from chunk to chunk: only the entries
        # a chunk perturbs are written, and put back after it (writing every point whole costs as much as
        # evaluating a cheap f at it). f's values stay in its dtype: only those read below become float64.
        with_x = self.evaluate.wants_x
        points = self._block(first + 2 * rows + with_x)
        points[:first] = extra
        up, down = np.arange(first, first + rows), np.arange(first + rows, first + 2 * rows)
        points[up, used] += h.astype(x.dtype)
        points[down, used] -= h.astype(x.dtype)
        try:
            values = self.evaluate(torch.from_numpy(points).to(self.device), includes_x=with_x,
                                   native=True).cpu().numpy()
            if np.may_share_memory(values, points):  # f returned (a view of) its input
                values = values.copy()
        finally:
            points[:first] = x
            points[up, used] = x[used]
            points[down, used] = x[used]
        extra, values = values[:first].astype(np.float64), values[first:]
        if not rows:
            return extra
        plus, minus = values[:rows], values[rows:]
        # An output is unchanged where it equals f(x) as the batched call computes it (a batched f can round
        # otherwise than a plain call: a batched matrix product sums in another order). NaN compares unequal
        # too: an element whose stencil leaves f's domain is held.
        unchanged = self.value if self.evaluate.at_x is None else self.evaluate.at_x
        changed = plus != unchanged
        changed |= minus != unchanged
        row, output = nonzero(changed)
        self._hold(used[row] * self.m + output)
        # Every held element of these columns, beside the row that evaluated its column.
        counts = self.starts[used + 1] - self.starts[used]
        row = np.repeat(np.arange(rows), counts)
        element = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + self.starts[used][row]
        output = self.rows[element]
        step = h[row]
        above, below = plus[row, output].astype(np.float64), minus[row, output].astype(np.float64)
        self.differences[level_of[row], element] = (above - below) / (2 * step)
        self.gaps[level_of[row], element] = np.abs(above + below - 2 * self.value[output]) / step
        return extra

    def _block(self, rows: int) -> np.ndarray:
        """rows copies of x (a view of the block kept between evaluations, grown where it is too small)."""
        if self._points.shape[0] < rows or not self.reuse_points:
            self._points = np.empty((rows, self.x.size), dtype=self.x.dtype)
            self._points[...] = self.x
        return self._points[:rows]

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
        best, ridders = neville(d, h, 2)
        # Ridders' error, the change the last extrapolation made, is the error of the once-extrapolated
        # value (order h⁴), far above that of T22 (order h⁶) where truncation dominates. The change to the
        # neighbouring windows' T22, one step coarser and one finer, measures T22's own error (as
        # numdifftools does). Taking the larger change, on either side, spans five steps: noisy windows
        # rarely agree with both neighbours by chance. A window with no finite neighbour keeps Ridders'.
        change = np.abs(best[1:] - best[:-1])
        missing = np.full((1, *best.shape[1:]), np.nan)
        # fmax ignores a NaN side: a window beside a missing one is judged by the other.
        error = np.fmax(np.concatenate([missing, change]), np.concatenate([change, missing]))
        error = np.where(np.isnan(error), ridders, error)
        # A window at whose three steps f_i did not change at all resolved no change of f: its 0 ± 0 is not
        # evidence (f's change is below its resolution there: cancellation near a removable singularity,
        # a derivative that rounds to 0 at tiny steps), so it is never chosen, witness or independent.
        self.unresolved = (d[:-2] == 0) & (d[1:-1] == 0) & (d[2:] == 0)
        # Where, besides, f is exactly 0 at every point of the window (its gaps 0 and f(x) = 0), rounding has
        # wiped out a small result (x - sin x near 0): not even a staircase's flat, which sits at its value.
        g = self.gaps[:self.depth]
        self.zeros = self.unresolved & (g[:-2] == 0) & (g[1:-1] == 0) & (g[2:] == 0) & (self.value[self.rows] == 0)
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
        # A window that resolved no change is never the estimate; it can still witness a staircase's flat,
        # unless f is exactly 0 all over it.
        zeros = self.zeros & ~settled
        self._all = (best, np.where(zeros, np.inf, uncertainty), np.where(zeros, np.inf, relative))
        unresolved = self.unresolved & ~settled
        uncertainty = np.where(unresolved, np.inf, uncertainty)
        relative = np.where(unresolved, np.inf, relative)
        window = relative.argmin(0) if relative.shape[0] else np.zeros(self.keys.size, dtype=np.int64)
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

    def _unchanged(self) -> np.ndarray:
        """Per level and held element: the level was computed and f_i changed at neither x + h nor x - h (its
        central difference and one-sided gap exactly 0), (levels, elements)."""
        computed = np.isfinite(self.h[:, self.columns])
        return computed & (self.differences == 0) & (self.gaps == 0)

    def _changed(self) -> np.ndarray:
        """Per held element: f_i changed at some step of its column (not flat: a mismatch can hold a flat one)."""
        computed = np.isfinite(self.h[:, self.columns])
        return (computed & ~self._unchanged()).any(0)

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


@functools.lru_cache(maxsize=16)
def _probe_directions(n: int) -> np.ndarray:
    """The noise probe's NOISE_LINES directions p over n inputs, (lines, n): |p_j| in [1/2, 1], random signs,
    the same for every check of n inputs (drawn once per n: a fresh generator costs more than a small check's
    arithmetic). Read-only: every check shares it."""
    generator = np.random.default_rng(0)
    lines = [generator.choice((-1.0, 1.0), n) * generator.uniform(0.5, 1.0, n) for _ in range(NOISE_LINES)]
    directions = np.stack(lines)
    directions.flags.writeable = False
    return directions


def _at(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """table[index[k], k] for each element k of a (levels or windows, elements) table."""
    return table[index, np.arange(table.shape[1])] if table.shape[1] else table[0]
