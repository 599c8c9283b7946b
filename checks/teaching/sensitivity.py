"""How good is a gradient check: four checkers run on the mutant suite, tallied and plotted.

The checkers, each asked "is this backward wrong?" for every case of checks.teaching.mutants in a dtype:

- gradcheck (slow): torch.autograd.gradcheck with its defaults, the full numerical Jacobian.
- gradcheck (fast): the same with fast_mode=True, one random projection of the Jacobian.
- naive central: the textbook recipe, a fixed step NAIVE_STEP and a fixed tolerance (NAIVE_RTOL,
  NAIVE_ATOL) whatever the dtype, dividing by the step asked for.
- this checker: checks.core.checker.check_jacobian (Richardson estimate, per-element allowance).
- this checker (fast): the same with fast=True, random projections (not among the book's default
  CHECKERS: benchmarks/checker.py runs it beside them).

A flag (a failed check) on a correct op is a false alarm; on a mutant, a detection. This checker has a third
outcome, inconclusive (an element it cannot judge: a kink, f not finite near x, an estimate too uncertain):
neither a flag nor a pass, counted on its own. Costs are counted evaluations of f (each point at which f was
evaluated, batched or not) and wall time.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from ..core.checker import check_jacobian
from ..core.dtypes import dtype_name
from .mutants import Case, Function

CHECKERS: tuple[str, ...] = ("gradcheck (slow)", "gradcheck (fast)", "naive central", "this checker")
# The textbook finite-difference check: one step and one tolerance for every dtype and every f.
NAIVE_STEP = 1e-5
NAIVE_RTOL = 1e-4
NAIVE_ATOL = 1e-6


@dataclass(frozen=True)
class Outcome:
    """One checker on one case in one dtype: did it flag the backward, and at what cost."""

    checker: str
    case: str
    kind: str
    wrong: bool
    delta: float | None
    dtype: str
    flagged: bool
    inconclusive: bool
    evaluations: int
    seconds: float


class _Counted:
    """f, counting the points it is evaluated at (a batch of k points under vmap counts k)."""

    def __init__(self, f: Function, shape: torch.Size) -> None:
        self.f, self.shape, self.count = f, shape, 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.count += x.numel() // max(1, self.shape.numel())
        return self.f(x)


Verdict = tuple[bool, bool, int]  # (flagged, inconclusive, evaluations of f)


def _gradcheck(f: Function, x: torch.Tensor, fast: bool) -> Verdict:
    counted = _Counted(f, x.shape)
    with warnings.catch_warnings():
        # gradcheck warns for every input that is not float64; that is the point of the float32 rows.
        warnings.simplefilter("ignore")
        try:
            passed = torch.autograd.gradcheck(counted, (x.detach().clone().requires_grad_(True),), fast_mode=fast)
        except GradcheckError:
            passed = False
    return not passed, False, counted.count


def _naive(f: Function, x: torch.Tensor) -> Verdict:
    autograd = torch.autograd.functional.jacobian(f, x.detach().clone().requires_grad_(True))
    autograd = autograd.reshape(-1, x.numel()).to(torch.float64)
    flat = x.detach().reshape(-1)
    columns = []
    with torch.no_grad():
        for j in range(flat.numel()):
            bump = torch.zeros_like(flat)
            bump[j] = NAIVE_STEP
            plus, minus = f((flat + bump).reshape(x.shape)), f((flat - bump).reshape(x.shape))
            columns.append(((plus - minus).to(torch.float64) / (2 * NAIVE_STEP)).reshape(-1))
    numerical = torch.stack(columns, 1)
    close = torch.allclose(autograd, numerical, rtol=NAIVE_RTOL, atol=NAIVE_ATOL)
    return not close, False, 2 * flat.numel() + 1


def _ours(f: Function, x: torch.Tensor, fast: bool = False) -> Verdict:
    report = check_jacobian(f, x, fast=fast)
    return report.failed, report.outcome == "inconclusive", report.evaluations


RUNNERS: dict[str, Callable[[Function, torch.Tensor], Verdict]] = {
    "gradcheck (slow)": lambda f, x: _gradcheck(f, x, fast=False),
    "gradcheck (fast)": lambda f, x: _gradcheck(f, x, fast=True),
    "naive central": _naive,
    "this checker": _ours,
    "this checker (fast)": lambda f, x: _ours(f, x, fast=True),
}


def evaluate(cases: Sequence[Case], dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32),
             checkers: Sequence[str] = CHECKERS, device: str = "cpu") -> list[Outcome]:
    """Run every checker on every case in every dtype; gradcheck's seed is fixed for its fast mode."""
    # Each checker's one-time costs (lazy imports, vmap's set-up) are paid before timing, on the first case.
    if cases:
        for checker in checkers:
            torch.manual_seed(0)
            RUNNERS[checker](cases[0].f, cases[0].input(dtypes[0], device))
    outcomes = []
    for dtype in dtypes:
        for case in cases:
            x = case.input(dtype, device)
            for checker in checkers:
                torch.manual_seed(0)
                start = time.perf_counter()
                flagged, inconclusive, evaluations = RUNNERS[checker](case.f, x)
                outcomes.append(Outcome(checker, case.name, case.kind, case.wrong, case.delta, dtype_name(dtype),
                                        flagged, inconclusive, evaluations, time.perf_counter() - start))
    return outcomes


def detection_by_delta(outcomes: Sequence[Outcome]):
    """Fraction of scaled mutants flagged, per δ (rows) and (checker, dtype) (columns)."""
    import pandas as pd

    scaled = pd.DataFrame([vars(o) for o in outcomes if o.kind == "scaled"])
    table = scaled.pivot_table(index="delta", columns=["dtype", "checker"], values="flagged", aggfunc="mean")
    return table.sort_index(ascending=False)


def summary(outcomes: Sequence[Outcome]):
    """Per checker and dtype: false alarms on correct ops, detections of every mutant, inconclusive checks
    (correct ops and mutants), smallest δ caught by all scaled mutants of that δ, evaluations and seconds
    for the whole suite. The smallest δ is left empty (NaN) for a checker that flags every correct op:
    flagging everything "catches" every δ, which says nothing."""
    import pandas as pd

    rows = []
    for dtype in dict.fromkeys(o.dtype for o in outcomes):
        for checker in dict.fromkeys(o.checker for o in outcomes):
            mine = [o for o in outcomes if o.dtype == dtype and o.checker == checker]
            correct = [o for o in mine if not o.wrong]
            wrong = [o for o in mine if o.wrong]
            deltas = sorted({o.delta for o in mine if o.delta is not None})
            caught = [d for d in deltas if all(o.flagged for o in mine if o.delta == d)]
            flags_everything = bool(correct) and all(o.flagged for o in correct)
            rows.append({
                "dtype": dtype,
                "checker": checker,
                "false alarms": sum(o.flagged for o in correct),
                "correct ops": len(correct),
                "false-alarm rate": sum(o.flagged for o in correct) / len(correct) if correct else float("nan"),
                "detections": sum(o.flagged for o in wrong),
                "mutants": len(wrong),
                "inconclusive (correct ops)": sum(o.inconclusive for o in correct),
                "inconclusive (mutants)": sum(o.inconclusive for o in wrong),
                "smallest δ always caught": min(caught) if caught and not flags_everything else float("nan"),
                "evaluations of f": sum(o.evaluations for o in mine),
                "seconds": sum(o.seconds for o in mine),
            })
    return pd.DataFrame(rows)


def structural(outcomes: Sequence[Outcome]):
    """Which checker flagged which structural mutant (not scaled), per dtype."""
    import pandas as pd

    rows = pd.DataFrame([vars(o) for o in outcomes if o.wrong and o.kind != "scaled"])
    return rows.pivot_table(index=["kind", "case"], columns=["dtype", "checker"], values="flagged", aggfunc="max")


def detection_plot(outcomes: Sequence[Outcome]):
    """Detection rate against δ on a log axis, one panel per dtype (one above the other, for a phone), one
    line per checker, each with its own marker and a small horizontal offset so that equal rates do not hide
    each other (gradcheck fast under slow); the legend, with each checker's false-alarm rate per dtype, sits
    below the panels, off the data."""
    import matplotlib.pyplot as plt

    from .figures import STYLE, log_ticks

    table = detection_by_delta(outcomes)
    totals = summary(outcomes).set_index(["dtype", "checker"])
    dtypes = [d for d in dict.fromkeys(o.dtype for o in outcomes) if d in table.columns.get_level_values(0)]
    styles = dict(zip(CHECKERS, (("o", "-", 8), ("s", "--", 5), ("D", ":", 5), ("^", "-", 6))))
    # Factors on the log axis, a fifth of a decade apart: the checkers' markers at one δ sit side by side.
    offsets = {checker: 10 ** (0.2 * (i - 1.5)) for i, checker in enumerate(CHECKERS)}
    width, height = STYLE["figure.figsize"]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(dtypes), 1, figsize=(width, height * len(dtypes) + 2.2), sharex=True,
                                 squeeze=False)
        for axis, dtype in zip(axes.flat, dtypes):
            for checker in table[dtype].columns:
                rates = ", ".join(f"{100 * totals.loc[(d, checker), 'false-alarm rate']:.0f} %" for d in dtypes)
                marker, line, size = styles.get(checker, ("o", "-", 5))
                axis.semilogx(table.index * offsets.get(checker, 1.0), table[dtype][checker], marker=marker,
                              linestyle=line, ms=size, mfc="none" if marker in "oD" else None,
                              label=f"{checker}: {rates}")
            axis.set_title(dtype)
            axis.set_ylabel("fraction detected")
            axis.set_ylim(-0.05, 1.05)
            log_ticks(axis, "x")
            axis.grid(True, which="major", alpha=0.3)
        axes.flat[-1].set_xlabel("relative error δ of the backward")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower left", frameon=False, handletextpad=0.4, alignment="left",
                   title=f"false alarms on correct ops\n({', '.join(dtypes)}):")
    return fig
