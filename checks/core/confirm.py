"""Confirm: what a mismatch must survive before it is a failure, and the kink test.

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
  value sides with the chosen estimate rather than with autograd, and unless the witness does not side
  with autograd by more than its rounding.
What differs between machines is then only how often the estimate is precise enough to pass. Tested by
injecting noise: f's output × (1 + u·k·ε), u uniform in [-1, 1] afresh per evaluation, k from 10 to 10⁶
(tests/test_checker_noise.py; the sweep over the mutant suite, the hard cases and all of op_db:
benchmarks/noise.py).

A kink (relu or abs at 0, a clamp's bound) makes both numbers meaningless: one-sided differences D+ and D-
disagree by the jump in slope at every step, whereas for a smooth f their gap h·f'' halves with the step.
The gap |f(x + h) + f(x - h) - 2 f(x)| / h comes from the evaluations the estimate made anyway, at the three
steps of each column's chosen window (and of its finest, for a mismatch): it must not halve from the first
step to the second, where it exceeds KINK_NOISE times the rounding noise of a one-sided difference,
2·noise_i/h, nor drop from the second to the third beyond the third's rounding (a smooth f far from its
asymptotic h·f'' at coarse steps can fail one halving). Where f changed at coarse steps and not at the
finest, the kink is near x, not at it ("kink nearby"). A kink near x is often settled by the finer steps,
on x's side of it: where they show f linear or smooth, the estimate comes from them (a clamp's bound within
the first steps); where f did not change on either side below some step, its slope there is 0 to f's
rounding over that step, which autograd's value is judged against (relu just left of 0, sort's near-ties).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .allowance import SAFETY, add_autograd_floor
from .estimate import FIRST_LEVELS, Search, _at
from .indices import nonzero
from .numerical import step_floor
from .verdict import difference as _difference, finite as _finite

# For a smooth f the one-sided gap halves with the step (ratio 0.5, or 0.125 where f'' = 0); a kink keeps
# it near 1. 0.75 sits between the two.
KINK_RATIO = 0.75
# A gap must exceed this many times the rounding noise of a one-sided difference (2·noise_i/h) to count.
KINK_NOISE = 100.0


class ConfirmingSearch(Search):
    """The search, with the smaller steps and the other windows a mismatch is confirmed by."""

    # Set once the search has run (begin_confirmation): from then on an element's window is chosen below a
    # breakpoint its finer windows show (see _least_uncertain).
    confirming = False

    def begin_confirmation(self) -> None:
        """The search has run: from here on every choice of window looks past breakpoints."""
        self.confirming = True
        self._chosen = None

    def _least_uncertain(self, rough: np.ndarray | None = None):
        """The search's choice, except for an element whose chosen window shows a kink where finer windows, past
        every kinked one, show f linear or smooth beside x (gaps exactly 0, or halving above rounding): a
        breakpoint lies between (a clamp's bound within float32's first steps), and the estimate from across it
        is not f's slope at x. The least uncertain of those finer windows is chosen instead. A kink at x shows
        at every window whose gap rounding does not hide (no finer window has evidence of smoothness), and
        keeps its window."""
        chosen = super()._least_uncertain(rough)
        if rough is None or not self.confirming or not self.keys.size:
            return chosen
        best, uncertainty, relative = self._all
        windows = best.shape[0]
        if windows < 2:
            return chosen
        window = chosen[-1]
        kinked = self._kink_table(self._noise)
        moved = _at(kinked, window)
        if not moved.any():
            return chosen
        g = self.gaps[:self.depth]
        noise = 2 * self._noise[self.rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            linear = (g[:-2] == 0) & (g[1:-1] == 0) & (g[2:] == 0)
            resolved = g[1:-1] > KINK_NOISE * noise / np.abs(self.h[1:windows + 1, self.columns])
            halving = (g[1:-1] <= KINK_RATIO * g[:-2]) & (g[2:] <= KINK_RATIO * g[1:-1]) & resolved
        last = np.where(kinked.any(0), windows - 1 - kinked[::-1].argmax(0), -1)  # the finest kinked window
        past = np.arange(windows)[:, None] > last[None]
        usable = past & (linear | halving) & ~self.unresolved & np.isfinite(relative)
        moved &= usable.any(0)
        if not moved.any():
            return chosen
        window = np.where(moved, np.where(usable, relative, np.inf).argmin(0), window)
        _, error, finest = self._windows
        return _at(best, window), _at(error, window), _at(uncertainty, window), _at(finest, window), window

    def confirm(self, mismatch: torch.Tensor) -> None:
        """Smaller steps for the columns with a mismatch (m, n), in one batch: the next window, and the
        finest whose rounding could still resolve the mismatch (safety × rounding a quarter of it, at most
        the floor ε^(3/4)). A staircase whose stair fits the coarse steps exactly (round, at steps 2^-k
        apart) looks smooth there and flat below the stair: the finest window must see the same slope.
        The mismatched elements are held from here on, flat or not: their windows are compared below."""
        mismatch = mismatch.numpy().T  # (n, m)
        column, output = nonzero(mismatch > 0)
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

    def witness_rounding(self) -> torch.Tensor:
        """Per held element, f_i's rounding over the finest step of its column's witness window, noise_i/h,
        (m, n) (0 elsewhere): how far rounding alone can move the witness's value, whatever its error estimate
        says (in a noisy f the windows beside it, at smaller steps, make that estimate large); inf where the
        witness resolved no change of f (f unchanged at its three steps: its 0 can be anything below f's
        resolution)."""
        self._choose()
        window = self.finest_window()[self.columns]
        steps = np.abs(self.h[window + 2, self.columns])
        with np.errstate(divide="ignore", invalid="ignore"):
            rounding = self.noise()[self.rows] / steps
        blind = ~np.isfinite(rounding) | _at(self.unresolved, window)
        return self._dense(np.where(blind, np.inf, rounding), 0.0)

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

    def unresolved_flat(self, jacobian: torch.Tensor) -> torch.Tensor:
        """(m, n): the flat elements (f_i unchanged at every step of column j) where autograd's value J_ij claims
        a change |J_ij|·h, at the column's coarsest step, that f's rounding could hide: their estimate 0
        resolved nothing, neither a pass nor a fail. f's rounding is bounded below by safety × the larger of
        its noise bound (with autograd's values in its scale) and ε·max(|x_j|, 1): x_j enters f's computation,
        whose intermediates then round at least at its scale (a float32 tail computed as a difference near 1
        is exactly 0 around x). A claim f would have shown (a gradient for an input f does not depend on)
        stays a fail."""
        # Only autograd's non-zero elements can claim a change: the table is computed at those alone (a
        # diagonal Jacobian's n of its n², as the search holds only the elements that changed).
        autograd = jacobian.numpy()
        rows, columns = nonzero(autograd != 0)
        values = np.abs(autograd[rows, columns])
        finite = np.isfinite(values)
        size = np.bincount(rows[finite], values[finite] * self.magnitude[columns[finite]], minlength=self.m)
        claimed = values * np.nan_to_num(np.abs(self.h[0]), nan=0.0)[columns]
        visible = self.safety * np.maximum(self.noise(self.scale() + size)[rows], self.eps * self.size[columns])
        keep = (claimed > 0) & np.isfinite(claimed) & (claimed <= visible)
        table = np.zeros((self.m, self.n), dtype=bool)
        table[rows[keep], columns[keep]] = True
        changed = self._changed()  # held and changed at some step (a mismatch holds flat elements too)
        table[self.rows[changed], self.columns[changed]] = False
        return torch.from_numpy(table)

    def finest_window(self) -> np.ndarray:
        """Per column, the index (its first step) of the window confirm() chose as witness, else the finest."""
        return np.where(self.witness >= 0, self.witness, np.maximum(self.levels - 3, 0))

    def chosen_window(self) -> np.ndarray:
        """Per column, the window chosen for its finest-resolved element."""
        window = self._first_windows()
        np.maximum.at(window, self.columns, self._choose()[-1])
        return window

    def unchanged_at_finest(self) -> torch.Tensor:
        """(m, n): the held elements that f changed at some step, but at no step of their column's finest window
        (flat beside x below some step: a kink or breakpoint between, or a change below f's rounding)."""
        finest = np.maximum(self.levels - 3, 0)[self.columns]
        elements = np.arange(self.keys.size)
        unchanged = self._unchanged()
        found = self._changed()
        for level in range(3):  # found only where all three levels were computed
            found &= unchanged[finest + level, elements]
        return self._dense(found, False)

    def flat_beside(self, candidates: torch.Tensor, jacobian: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Of the elements f changed at coarse steps and not at the finest (candidates, (m, n): whatever their
        coarse estimate says, which comes from across a breakpoint), those at which f_i changed on neither side
        of x at any step from some step h down (relu just left of 0, two of sort's inputs closer than the coarse
        steps, a max-pool window's runner-up): below the breakpoint f_i's slope is at most its rounding over h,
        the larger of 2·noise_i/h (f_i unchanged: its true change is within twice an evaluation's rounding) and
        ε·max(|x_j|, 1)/h (x_j's scale enters f's intermediates, where f_i is exactly 0 and noise_i with it).
        Only where, at every step, f_i changed on one side of x alone: a change on both sides that vanishes
        at the fine steps is f rounding it away (a cancellation), not a flat side. Returns those elements (a
        breakpoint beside x: the coarse steps' estimate is not f's slope at x), those of them whose autograd
        value is within safety × that bound, and the allowance, each (m, n): the second pass. Any other value
        stays unjudged (the bound is f's rounding, which its measured noise estimates).
        Judged as any element: the allowance small against the entry's scale, its row's and column's largest
        |J| (or, where autograd is exactly 0, |f_i(x)|/max(|x_j|, 1)); at least 1 where f_i is exactly 0 at x
        (relu left of 0, whose row and column hold nothing else: x's scale sets the allowance's there)."""
        unchanged = self._unchanged()
        computed = np.isfinite(self.h[:, self.columns])
        first, largest = self._first_unchanged(unchanged)
        below = np.arange(unchanged.shape[0])[:, None] >= first[None]
        held = candidates.numpy()[self.rows, self.columns] & unchanged.any(0)
        held &= (unchanged | ~computed | ~below).all(0)
        rounding = np.maximum(2 * self.noise()[self.rows], self.eps * self.size[self.columns])
        allowance = self.safety * (rounding / largest + self.tiny)
        autograd = jacobian.numpy()[self.rows, self.columns]
        # At every step f_i changed on one side of x alone (then gap = 2·|central difference|, up to the
        # arithmetic's rounding): the other side is flat out to a breakpoint. Where it changed on both sides
        # at the coarse steps and on neither at the fine ones, f rounds a change below its resolution to
        # nothing (a cancellation near a special-cased point: (x - sin x)/x² at 0), and its measured noise,
        # 0 where f is constant, bounds nothing.
        with np.errstate(invalid="ignore"):
            one_side = np.abs(self.gaps - 2 * np.abs(self.differences)) <= 1e-9 * self.gaps
        held &= (one_side | unchanged | ~computed).all(0)
        beside = held.copy()
        held &= np.abs(autograd) <= allowance
        zero_side = (self.value[self.rows] == 0) & (self.measured[self.rows] == 0)
        value = self._choose()[0]
        reference = self._reference(np.where(np.isfinite(value), value, 0))
        # The estimates of a row and column near a breakpoint come from across it; where autograd claims an exact
        # 0, f_i's own size over x_j's is a slope's scale too (an elementwise f's row and column hold this
        # element alone). A non-zero claim is judged at its own scale: a saturated f (erfc far left in float32)
        # is flat to its rounding where its true slope is far below that.
        own = np.abs(self.value[self.rows]) / self.size[self.columns]
        reference = np.maximum(reference, np.where(autograd == 0, own, 0))
        held &= allowance <= self.resolution * np.where(zero_side, np.maximum(reference, 1), reference)
        return self._dense(beside, False), self._dense(held, False), self._dense(np.where(held, allowance, 0.0), 0.0)

    def steps_below(self, nearby: torch.Tensor) -> float:
        """Over the elements near a kink (nearby, (m, n)), the smallest of the largest steps, relative to
        max(|x_j|, 1), at which f_i changed on neither side of x: a max_step at most that keeps every step on
        x's side of each breakpoint (NaN where there is none, or it is below the least max_step allowed)."""
        held = nearby.numpy()[self.rows, self.columns]
        unchanged = self._unchanged()
        held &= unchanged.any(0)
        if not held.any():
            return math.nan
        smallest = float((self._first_unchanged(unchanged)[1] / self.size[self.columns])[held].min())
        # Below the least max_step the first batch of steps has room for, there is none to give.
        return smallest if smallest >= 2 ** (FIRST_LEVELS - 1) * step_floor(self.eps) else math.nan

    def kinks(self, window: np.ndarray) -> torch.Tensor:
        """(m, n): at each column's window k, one-sided differences whose gap does not halve over the window's
        steps (a smooth f: h·f'' halves; a kink: the jump in slope stays), above rounding noise (_kinked). A
        flat element has no gap, and no kink."""
        return self._dense(self._kinked(window[self.columns]), False)

    def _first_unchanged(self, unchanged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per held element, the first level (the largest step) at which f_i changed on neither side of x, and
        that step (unchanged: Search._unchanged's table; level 0 where there is none)."""
        first = unchanged.argmax(0)
        return first, np.abs(self.h[first, self.columns])

    def kinks_below(self, window: np.ndarray) -> torch.Tensor:
        """(m, n): the kink test at any window from each column's window k down to its finest tried."""
        kinked = self._kink_table()
        below = np.arange(kinked.shape[0])[:, None] >= window[self.columns][None]
        return self._dense((kinked & below).any(0), False)

    def _kink_table(self, noise: np.ndarray | None = None) -> np.ndarray:
        """The kink test at every window, for every held element, (windows, elements)."""
        tables = [self._kinked(np.full(self.keys.size, w), noise) for w in range(self.depth - 2)]
        return np.stack(tables) if tables else np.zeros((0, self.keys.size), dtype=bool)

    def own_kinks(self) -> torch.Tensor:
        """(m, n): the kink test at each held element's own chosen window, which gave its estimate (its column's
        window is that of its finest-resolved element, and can lie below a breakpoint this one's crosses)."""
        return self._dense(self._kinked(self._choose()[-1]), False)

    def _kinked(self, mine: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """Per held element, the kink test at its window (mine: per element, the window's first step k): the gap
        does not halve from step k to k + 1, above rounding, and does not drop from k + 1 to k + 2 by more than
        the rounding of the finest gap (4·noise_i/h: f at three points). At coarse steps a smooth f can be far
        from its asymptotic h·f'' (a batch-normalised loss at float32's first step of 10%: gaps 3.0e-3,
        2.3e-3, 1.3e-3), and one pair can fail to halve; a kink within the window's steps keeps the gap at
        each of them. noise: per output, the rounding bound (default the search's; the choice of windows passes
        its own, being what the default is computed from)."""
        elements = np.arange(self.keys.size)
        noise = 2 * (self.noise() if noise is None else noise)[self.rows]
        coarse, middle, fine = (self.gaps[mine + level, elements] for level in range(3))
        with np.errstate(invalid="ignore"):
            resolved = middle > KINK_NOISE * noise / np.abs(self.h[mine + 1, self.columns])
            kept = (middle > KINK_RATIO * coarse) & resolved
            dropped = fine + 2 * noise / np.abs(self.h[mine + 2, self.columns]) < KINK_RATIO * middle
        return kept & ~dropped  # False where a level is missing

    def uneven_gaps(self, window: np.ndarray, mismatch: torch.Tensor) -> torch.Tensor:
        """(m, n): mismatched elements whose one-sided gap, somewhere from the column's window k down to its
        finest step tried and at least half the mismatch there, grows from one step to the next smaller one by
        more than its rounding (4·noise_i/h: f at three points), or keeps within a factor 1/KINK_RATIO over
        three halvings in a row. A smooth f's gap h·f'' halves with the step, and rounding's grows like 1/h;
        kinks crossed at several steps (a batch's relus through one weight, each at its own distance) make it
        fall and rise, or stay, below the kink test's noise margin, and the mismatch can be their sum."""
        held = mismatch.numpy()[self.rows, self.columns]
        start = window[self.columns]
        noise = 4 * self.noise()[self.rows]
        g = self.gaps
        found = np.zeros(self.keys.size, dtype=bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            large = g >= held / 2
            ratio = g[1:] / g[:-1]
            rising = (g[1:] > g[:-1] + noise / np.abs(self.h[1:, self.columns])) & large[1:]
            level = ((ratio >= KINK_RATIO) & (ratio <= 1 / KINK_RATIO) & large[1:] & large[:-1])
            for k in range(g.shape[0] - 1):
                found |= (k >= start) & rising[k]
                if k + 2 < level.shape[0]:
                    found |= (k >= start) & level[k] & level[k + 1] & level[k + 2]
        return self._dense(found & (held > 0), False)

    def one_sided(self, window: np.ndarray, jacobian: torch.Tensor, mismatch: torch.Tensor) -> torch.Tensor:
        """(m, n): mismatched elements where one one-sided difference, the same side at two consecutive steps
        from the column's window k down to its finest tried, equals autograd's value within a quarter of the
        mismatch, resolved above rounding: autograd took the slope on one side of a kink within the step,
        which the central difference averages with the other (a relu whose input sits closer to 0 than the
        step, its gap hidden below the kink test's noise margin). For a smooth f with a wrong autograd
        J = f' + δ no side can: D± = f' ± h·f''/2 would have to be within δ/4 of f' + δ at h and at h/2 alike."""
        start = window[self.columns]
        wanted = jacobian.numpy()[self.rows, self.columns]
        tolerance = mismatch.numpy()[self.rows, self.columns] / 4
        noise = self.noise()[self.rows]
        agreed = np.zeros(self.keys.size, dtype=bool)
        # A level at which f_i changed on neither side shows no slope: its D± = 0 is no side's (a cancellation
        # rounds f to a constant at fine steps, a staircase is flat between stairs).
        changed = ~self._unchanged()
        with np.errstate(invalid="ignore"):
            close = []  # per level and side: D± within the tolerance of autograd, resolved above rounding
            for level in range(self.gaps.shape[0]):
                rounding = 2 * noise / np.abs(self.h[level, self.columns])
                # The gaps are |D+ - D-|: D± is the central difference ± half of it.
                close.append([(np.abs(self.differences[level] + side * self.gaps[level] / 2 - wanted) <= tolerance)
                              & (rounding <= tolerance) & changed[level] for side in (1.0, -1.0)])
            for level in range(len(close) - 1):
                for side in range(2):
                    agreed |= (level >= start) & close[level][side] & close[level + 1][side]
        return self._dense(agreed & (tolerance > 0), False)



@dataclass(frozen=True)
class Evidence:
    """What the estimate says of each element (m, n), once mismatches were confirmed or not: the estimate
    and its allowance, whether it converged, and why a mismatch is not believed (kink, domain, unstable,
    unconfirmed, unresolved); suspect (n,): the columns that had a mismatch; max_step: a first step that keeps
    every step from crossing the kinks nearby (NaN where there are none)."""

    numerical: torch.Tensor
    allowed: torch.Tensor
    converged: torch.Tensor
    kink: torch.Tensor
    domain: torch.Tensor
    unstable: torch.Tensor
    unconfirmed: torch.Tensor
    unresolved: torch.Tensor
    suspect: torch.Tensor
    max_step: float


def confirm(search: ConfirmingSearch, jacobian: torch.Tensor, relative_noise: np.ndarray, nondet_tol: float = 0.0
            ) -> Evidence:
    """The estimate against autograd's Jacobian, each mismatch confirmed (or not) at smaller steps and by an
    independent window, the kink test at the chosen (and witness) windows. relative_noise: per output, f_i's
    relative noise, for autograd's own rounding in the allowance (checks.core.allowance); nondet_tol: how far
    the caller lets two backward passes differ, added to every element's allowance (autograd's value is known
    to no better)."""
    search.begin_confirmation()
    numerical, allowed, converged = search.result()
    add_autograd_floor(allowed, jacobian, numerical, relative_noise, SAFETY)
    allowed += nondet_tol
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
    # From here on, difference is autograd's distance from the estimate as it stands (after confirmation).
    if suspect.any():
        search.confirm(torch.where(suspect_elements, difference, torch.zeros_like(difference)))
        numerical, allowed, converged = search.result()
        add_autograd_floor(allowed, jacobian, numerical, relative_noise, SAFETY)
        allowed += nondet_tol
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
        # The witness, the finest window that can resolve the mismatch, must not side with autograd by more than
        # its rounding: where the finer steps move toward autograd, the coarser ones crossed what they do not
        # (a batch's relus, each kink at its own distance), however well they agree among themselves.
        toward = (jacobian - finest).abs() + search.witness_rounding() / 2 <= (numerical - finest).abs()
        unconfirmed = suspect.unsqueeze(0) & (mismatch > allowed) & (~(sides & (spread <= mismatch)) | toward)
    domain = ~_finite(numerical)
    # Only where it decides: autograd's rounding near an exact 0 is within its allowance, and passes.
    unresolved = search.unresolved_flat(jacobian) & (difference > allowed)
    chosen = search.chosen_window()
    kink = search.kinks(chosen)
    if suspect.any():
        # A jump closer to x than the chosen steps (round near its boundary) shows at the witness steps.
        kink |= search.kinks(search.finest_window()) & suspect.unsqueeze(0)
        # A mismatch whose estimate came from a window across a breakpoint (two of sort's inputs closer than
        # its steps) while its column's finest-resolved element's window lies below it.
        kink |= search.own_kinks() & (difference > allowed)
        # A kink whose gap the noise margin hides shows as autograd equal to one side's slope, or as a gap that
        # rises or stays where a smooth f's halves. Each test runs from the chosen window down to the finest
        # step tried: kinks crossed at several steps (a batch's relus through one weight, each at its own
        # distance) can pass any of them at the chosen window alone.
        outside = torch.where(difference > allowed, difference, torch.zeros_like(difference))
        kink |= search.kinks_below(chosen) & (outside > 0)
        kink |= search.one_sided(chosen, jacobian, outside)
        kink |= search.uneven_gaps(chosen, outside)
    kink &= ~domain
    # f changed at coarse steps and not at the finest: a kink lies near x, not at it (relu left of 0, clamp's
    # bound, a step's width away), and f is flat beside x to its rounding, which resolves no slope there (a
    # kink at x changes f at every step). Both marks, on a kink and on an element the coarse steps left
    # unjudged (never on a mismatch: that is judged as it stands): verdict.reason calls it "kink nearby".
    flat_at_finest = search.unchanged_at_finest()
    nearby = flat_at_finest & (kink | (~converged & ~(difference > allowed)))
    # Where f did not change on either side of x from some step down, having changed on one side alone at
    # each coarser step, and autograd is within its rounding over that step (relu just left of 0, sort's
    # inputs closer than the coarse steps), the finest steps do resolve a slope of 0: judged there, whatever
    # the coarse steps, across the breakpoint, made of it (a mismatch too).
    beside, flat, flat_allowed = search.flat_beside(flat_at_finest, jacobian)
    nearby |= beside
    if bool(flat.any()):
        numerical = torch.where(flat, torch.zeros_like(numerical), numerical)
        allowed = torch.where(flat, flat_allowed, allowed)
        converged = converged | flat
        # The coarse steps, across the breakpoint, disagree with the fine ones: that is the breakpoint.
        nearby &= ~flat
        kink &= ~flat
        unresolved &= ~flat
        unstable = unstable & ~flat
        unconfirmed = unconfirmed & ~flat
    kink |= nearby
    unresolved |= nearby
    max_step = search.steps_below(nearby)
    # Where autograd's own rounding could be the resolution's share of every entry of a row (f_i amplifies its
    # rounding that much), no entry of the row is judged: its floor would pass anything.
    drowned = torch.from_numpy(SAFETY * relative_noise > search.resolution).unsqueeze(1)
    converged = converged & ~drowned
    return Evidence(numerical, allowed, converged & ~domain, kink, domain, unstable & ~domain, unconfirmed & ~domain,
                    unresolved, suspect, max_step)
