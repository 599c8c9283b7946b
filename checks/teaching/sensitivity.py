"""How good is a gradient check: checkers run on the mutant suite, tallied and plotted.

The checkers, each asked "is this backward wrong?" for every case of checks.teaching.mutants in a dtype:

- gradcheck (slow): torch.autograd.gradcheck with its defaults, the full numerical Jacobian.
- gradcheck (fast): the same with fast_mode=True, one random projection of the Jacobian.
- gradcheck (slow, tuned) and gradcheck (fast, tuned): the same two at the one setting (eps, atol, rtol)
  per dtype that does best on the suite itself (tune_gradcheck): chosen with hindsight, after seeing every
  verdict, which no user of gradcheck can do for their own functions.
- naive central: the textbook recipe, a fixed step NAIVE_STEP and a fixed tolerance (NAIVE_RTOL,
  NAIVE_ATOL) whatever the dtype, dividing by the step asked for.
- this checker: checks.core.checker.check_jacobian (Richardson estimate, per-element allowance).
- this checker (fast): the same with fast=True, random projections (not among the book's default
  CHECKERS: benchmarks/checker.py runs it beside them).

A flag (a failed check, outcome "fail") on a correct op is a false alarm; on a mutant, a detection. This
checker has a third outcome, inconclusive (an element it cannot judge: a kink, f not finite near x, an
estimate too uncertain): neither a flag nor a pass, counted on its own. Costs are counted evaluations of f
(each point at which f was evaluated, batched or not) and wall time.

Every run of evaluate() is also a record (checks.teaching.records), collected for the ledger: a measurement,
whose outcome is a finding whichever it is (a checker that misses a mutant is what the study measures, not
a fault of the book).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from ..core.checker import check_jacobian
from ..core.dtypes import dtype_name
from ..core.errors import CheckInputError
from ..core.outcome import Outcome
from .environment import device_name, environment
from .mutants import Case, Function, suite
from .precision import run_gradcheck
from .records import Provenance, Record, collect

CHECKERS: tuple[str, ...] = ("gradcheck (slow)", "gradcheck (fast)", "gradcheck (slow, tuned)",
                             "gradcheck (fast, tuned)", "naive central", "this checker")
# The two that need a setting per dtype from tune_gradcheck.
TUNED: tuple[str, ...] = ("gradcheck (slow, tuned)", "gradcheck (fast, tuned)")
# The textbook finite-difference check: one step and one tolerance for every dtype and every f.
NAIVE_STEP = 1e-5
NAIVE_RTOL = 1e-4
NAIVE_ATOL = 1e-6


# Why a run of the suite is a measurement (records.Record.measurement): its outcome is the finding.
MEASUREMENT = ("a run of the mutant suite: how a checker judges a correct op or a known wrong backward is what "
               "the study measures, whichever way it goes")


@dataclass(frozen=True)
class Run:
    """One checker on one case in one dtype: its outcome (fail: it flagged the backward), and at what cost."""

    checker: str
    case: str
    kind: str
    wrong: bool
    delta: float | None
    dtype: str
    outcome: Outcome
    evaluations: int
    seconds: float

    @property
    def flagged(self) -> bool:
        return self.outcome == "fail"

    @property
    def inconclusive(self) -> bool:
        return self.outcome == "inconclusive"

    def row(self) -> dict[str, object]:
        """The run's fields with flagged and inconclusive, as the tables group them."""
        return {**vars(self), "flagged": self.flagged, "inconclusive": self.inconclusive}


class _Counted:
    """f, counting the points it is evaluated at (a batch of k points under vmap counts k)."""

    def __init__(self, f: Function, shape: torch.Size) -> None:
        self.f, self.shape, self.count = f, shape, 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.count += x.numel() // max(1, self.shape.numel())
        return self.f(x)


Said = tuple[Outcome, int]  # (the checker's outcome, evaluations of f)


@dataclass(frozen=True)
class Setting:
    """gradcheck's step and tolerances: an element passes when |analytical - numerical| <= atol + rtol·|numerical|."""

    eps: float
    atol: float
    rtol: float

    def words(self) -> str:
        return f"eps={self.eps:g}, atol={self.atol:g}, rtol={self.rtol:g}"


def _gradcheck(f: Function, x: torch.Tensor, fast: bool, setting: Setting | None = None) -> Said:
    counted = _Counted(f, x.shape)
    options = {} if setting is None else vars(setting)
    with warnings.catch_warnings():
        # gradcheck warns for every input that is not float64; that is the point of the float32 rows.
        warnings.simplefilter("ignore")
        try:
            passed = torch.autograd.gradcheck(counted, (x.detach().clone().requires_grad_(True),), fast_mode=fast,
                                              **options)
        except GradcheckError:
            passed = False
    return "pass" if passed else "fail", counted.count


def _naive(f: Function, x: torch.Tensor) -> Said:
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
    return "pass" if close else "fail", 2 * flat.numel() + 1


def _ours(f: Function, x: torch.Tensor, fast: bool = False) -> Said:
    report = check_jacobian(f, x, fast=fast)
    return report.outcome, report.evaluations


RUNNERS: dict[str, Callable[[Function, torch.Tensor], Said]] = {
    "gradcheck (slow)": lambda f, x: _gradcheck(f, x, fast=False),
    "gradcheck (fast)": lambda f, x: _gradcheck(f, x, fast=True),
    "naive central": _naive,
    "this checker": _ours,
    "this checker (fast)": lambda f, x: _ours(f, x, fast=True),
}


def runner(checker: str, dtype: torch.dtype, tuned: Mapping[str, Setting] | None = None
           ) -> Callable[[Function, torch.Tensor], Said]:
    """The checker, as a function (f, x) -> (its outcome, evaluations of f) for inputs of dtype;
    a tuned gradcheck at its setting for dtype in tuned."""
    if checker not in CHECKERS and checker not in RUNNERS:
        raise CheckInputError(f"checker {checker!r} is not one of {(*CHECKERS, *RUNNERS.keys() - set(CHECKERS))}")
    if checker not in TUNED:
        return RUNNERS[checker]
    setting = (tuned or {}).get(dtype_name(dtype))
    if setting is None:
        raise CheckInputError(f"{checker!r} needs gradcheck's setting for {dtype_name(dtype)}: pass "
                              f"tuned={{dtype name: tune_gradcheck(cases, dtype).setting}}")
    fast = checker == "gradcheck (fast, tuned)"
    return lambda f, x: _gradcheck(f, x, fast, setting)


def evaluate(cases: Sequence[Case], dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32),
             checkers: Sequence[str] | None = None, device: str = "cpu",
             tuned: Mapping[str, Setting] | None = None) -> list[Run]:
    """Run every checker on every case in every dtype; gradcheck's seed is fixed for its fast mode. Each run
    is collected as a record (run_record).

    checkers -- None: every checker of CHECKERS, the tuned ones only where tuned gives their settings.
    tuned    -- gradcheck's setting per dtype name, for the tuned checkers (tune_gradcheck).
    """
    if checkers is None:
        checkers = [c for c in CHECKERS if c not in TUNED or tuned]
    runners = {checker: runner(checker, dtypes[0], tuned) for checker in checkers}  # refuses unknown ones
    # Each checker's one-time costs (lazy imports, vmap's set-up) are paid before timing, on the first case.
    if cases:
        for checker in checkers:
            torch.manual_seed(0)
            runners[checker](cases[0].f, cases[0].input(dtypes[0], device))
    runs = []
    for dtype in dtypes:
        runners = {checker: runner(checker, dtype, tuned) for checker in checkers}
        for case in cases:
            x = case.input(dtype, device)
            for checker in checkers:
                torch.manual_seed(0)
                start = time.perf_counter()
                outcome, evaluations = runners[checker](case.f, x)
                runs.append(Run(checker, case.name, case.kind, case.wrong, case.delta, dtype_name(dtype),
                                outcome, evaluations, time.perf_counter() - start))
                collect(run_record(runs[-1], case, device))
    return runs


# How each checker observes the backward it judges.
_HOW: dict[str, Provenance] = {"naive central": "numerical", "this checker": "returned", "this checker (fast)": "vjp"}


def _finding(run: Run) -> str:
    """What a run says about its checker: a detection, a false alarm, a miss, a right pass, or neither."""
    if run.inconclusive:
        return "neither flagged nor passed"
    if run.flagged:
        return "a detection" if run.wrong else "a false alarm"
    return "a miss" if run.wrong else "a correct op passed"


def run_record(run: Run, case: Case, device: str = "cpu") -> Record:
    """A run of the suite as a record for the ledger: a measurement (MEASUREMENT), its outcome the checker's."""
    backward = (f"a mutant's backward, wrong: {case.kind}" + (f" (δ = {case.delta:g})" if case.delta else "")
                if case.wrong else "torch's own backward (correct)")
    return Record(
        check=f"{run.checker} on {case.name}",
        function=case.name,
        x=list(case.x),
        input_shape=[len(case.x)],
        dtype=run.dtype,
        device=device,
        how=_HOW.get(run.checker, "gradcheck"),
        gradient_formula=backward,
        derivative_source="the mutant suite (checks.teaching.mutants)",
        analytical_gradient=None,
        executed=True,
        verdict=run.outcome,
        message=f"{run.checker} {verdict_word(run)} it: {_finding(run)}; {run.evaluations} evaluations of f",
        device_name=device_name(device),
        environment=environment(0),
        measurement=MEASUREMENT,
        checker=run.checker,
    )


# The grid tune_gradcheck searches: gradcheck's step one per decade around its default 1e-6 and the optimal
# central steps (ε^(1/3): 6e-6 in float64, 5e-3 in float32); each tolerance 0 and one per decade.
GRID_EPS: tuple[float, ...] = tuple(10.0 ** k for k in range(-8, -1))
GRID_ATOL: tuple[float, ...] = (0.0, *(10.0 ** k for k in range(-12, -1)))
GRID_RTOL: tuple[float, ...] = (0.0, *(10.0 ** k for k in range(-10, 0)))


@dataclass(frozen=True)
class Tuning:
    """gradcheck's best setting on a suite in one dtype, chosen with hindsight (tune_gradcheck).

    margin -- how far the nearest verdict is from flipping at that setting: the smallest factor by which a
              detected mutant's worst |analytical - numerical| exceeds its allowance, or a passed correct
              op's allowance exceeds its worst difference (inf when no verdict depends on the tolerance).
    evaluations, seconds -- the search's cost: gradcheck run on every case at every eps of the grid.
    """

    dtype: str
    setting: Setting
    false_alarms: int
    detections: int
    correct: int
    mutants: int
    margin: float
    settings_tried: int
    evaluations: int
    seconds: float


def tuned_gradcheck(dtype: torch.dtype | str) -> Tuning:
    """gradcheck's (eps, atol, rtol) for dtype, tuned with hindsight on the book's suite of correct ops and
    mutants (mutants.suite()): tune_gradcheck(suite, dtype). Its .setting.words() says the setting, and
    vars(.setting) gives gradcheck's keyword arguments."""
    return tune_gradcheck(suite(), getattr(torch, dtype) if isinstance(dtype, str) else dtype)


@dataclass(frozen=True)
class _Jacobians:
    """What gradcheck computed for one case at one eps: passed even at atol = rtol = 0, or its Jacobians."""

    wrong: bool
    exact: bool
    analytical: torch.Tensor | None
    numerical: torch.Tensor | None

    def judged(self, atol: torch.Tensor, rtol: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For every (atol, rtol) of the grid: flagged, by gradcheck's own comparison (torch.allclose in the
        input's dtype: equal, or finite and |a - n| <= atol + |rtol·n|), and the largest ratio
        |a - n| / allowance (0: no difference; inf: flagged whatever the tolerance)."""
        shape = (len(atol), len(rtol))
        if self.exact:
            return torch.zeros(shape, dtype=torch.bool), torch.zeros(shape, dtype=torch.float64)
        if self.analytical is None:
            return torch.ones(shape, dtype=torch.bool), torch.full(shape, math.inf, dtype=torch.float64)
        a, n = self.analytical.reshape(-1), self.numerical.reshape(-1)
        actual = (a - n).abs()
        allowed = atol.to(a.dtype)[:, None, None] + (rtol.to(a.dtype)[None, :, None] * n).abs()
        close = (a == n) | (torch.isfinite(actual) & (actual <= allowed))
        ratio = torch.where(actual == 0, 0.0, actual.double() / allowed.double())
        return ~close.all(-1), ratio.amax(-1)


def tune_gradcheck(cases: Sequence[Case], dtype: torch.dtype, eps: Sequence[float] = GRID_EPS,
                   atol: Sequence[float] = GRID_ATOL, rtol: Sequence[float] = GRID_RTOL,
                   device: str = "cpu") -> Tuning:
    """The setting of gradcheck (slow mode) with the fewest false alarms on the suite and, among those, the
    most detections; of settings equal in both, the one whose nearest verdict is furthest from flipping.

    gradcheck runs once per case and eps, at atol = rtol = 0, and its failure message gives both Jacobians
    as it computed them (checks.teaching.precision.run_gradcheck); every (atol, rtol) is then judged with
    gradcheck's own comparison without running it again. A case that passes at atol = rtol = 0 passes at
    every setting; one that fails without printing Jacobians fails at every setting. evaluate() runs
    gradcheck itself at the setting found.
    """
    start = time.perf_counter()
    evaluations = 0
    atols, rtols = torch.tensor(atol, dtype=torch.float64), torch.tensor(rtol, dtype=torch.float64)
    wrong = torch.tensor([case.wrong for case in cases])
    ranked = []
    for step in eps:
        flags, ratios = [], []
        for case in cases:
            x = case.input(dtype, device)
            counted = _Counted(case.f, x.shape)
            outcome = run_gradcheck(counted, x, eps=step, atol=0.0, rtol=0.0)
            evaluations += counted.count
            printed = bool(outcome.analytical) and len(outcome.analytical) == len(outcome.numerical)
            flag, ratio = _Jacobians(case.wrong, outcome.passed,
                                     torch.tensor(outcome.analytical, dtype=dtype) if printed else None,
                                     torch.tensor(outcome.numerical, dtype=dtype) if printed else None
                                     ).judged(atols, rtols)
            flags.append(flag)
            ratios.append(ratio)
        flag, ratio = torch.stack(flags), torch.stack(ratios)  # (cases, atol, rtol)
        false_alarms = (flag & ~wrong[:, None, None]).sum(0)
        detections = (flag & wrong[:, None, None]).sum(0)
        # How far each verdict that depends on the tolerance is from flipping: a flag by its ratio, a pass by
        # the inverse; verdicts that hold at every tolerance (ratio 0 or inf) do not count.
        distance = torch.where(flag, ratio, 1 / ratio)
        distance = torch.where((ratio > 0) & (ratio < math.inf), distance, math.inf)
        margin = distance.amin(0)
        for i, a in enumerate(atol):
            for j, r in enumerate(rtol):
                key = (int(false_alarms[i, j]), -int(detections[i, j]), -float(margin[i, j]), step, a, r)
                ranked.append((key, Setting(step, a, r)))
    (false_alarms, detections, margin, *_), best = min(ranked, key=lambda item: item[0])
    count = int(wrong.sum())
    return Tuning(dtype_name(dtype), best, false_alarms, -detections, len(cases) - count, count, -margin,
                  len(ranked), evaluations, time.perf_counter() - start)


def tuning_frame(tunings: Sequence[Tuning]):
    """The tunings as a table (pandas), one row per dtype: the setting, its counts, its margin, the search's cost."""
    import pandas as pd

    return pd.DataFrame([{"dtype": t.dtype, "setting": t.setting.words(),
                          "false alarms": f"{t.false_alarms} of {t.correct}",
                          "detections": f"{t.detections} of {t.mutants}", "margin": f"{t.margin:.3g}",
                          "evaluations of f": t.evaluations, "seconds": f"{t.seconds:.1f}"} for t in tunings])


def detection_by_delta(outcomes: Sequence[Run]):
    """Fraction of scaled mutants flagged, per δ (rows) and (checker, dtype) (columns)."""
    import pandas as pd

    scaled = pd.DataFrame([o.row() for o in outcomes if o.kind == "scaled"])
    table = scaled.pivot_table(index="delta", columns=["dtype", "checker"], values="flagged", aggfunc="mean")
    return table.sort_index(ascending=False)


def summary(outcomes: Sequence[Run]):
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


def verdict_word(outcome: Run) -> str:
    """What a checker said about a case, in the words the chapter's tables use (never True/False)."""
    return "flagged" if outcome.flagged else "inconclusive" if outcome.inconclusive else "passed"


def structural(outcomes: Sequence[Run]):
    """What each checker said about each structural mutant (not scaled): rows (dtype, kind), one column
    per checker, cells "flagged", "passed" or "inconclusive" (verdict_word)."""
    import pandas as pd

    rows = pd.DataFrame([{**o.row(), "said": verdict_word(o)} for o in outcomes if o.wrong and o.kind != "scaled"])
    checkers = [c for c in CHECKERS if c in set(rows["checker"])]
    table = rows.pivot(index=["dtype", "kind"], columns="checker", values="said")[checkers]
    dtypes = list(dict.fromkeys(rows["dtype"]))
    kinds = list(dict.fromkeys(rows["kind"]))
    return table.reindex(pd.MultiIndex.from_product([dtypes, kinds], names=["dtype", "kind"]))


def detection_plot(outcomes: Sequence[Run]):
    """Detection rate against δ on a log axis, one panel per dtype (one above the other, for a phone), one
    line per checker, each with its own marker and a small horizontal offset so that equal rates do not hide
    each other (gradcheck fast under slow); the legend, with each checker's false-alarm rate per dtype, sits
    below the panels, off the data."""
    import matplotlib.pyplot as plt

    from .figures import STYLE, log_ticks

    table = detection_by_delta(outcomes)
    totals = summary(outcomes).set_index(["dtype", "checker"])
    dtypes = [d for d in dict.fromkeys(o.dtype for o in outcomes) if d in table.columns.get_level_values(0)]
    styles = dict(zip(CHECKERS, (("o", "-", 8), ("s", "--", 5), ("v", "-", 7), ("P", "--", 6), ("D", ":", 5),
                                 ("^", "-", 6))))
    # Factors on the log axis, an eighth of a decade apart: the checkers' markers at one δ sit side by side.
    middle = (len(CHECKERS) - 1) / 2
    offsets = {checker: 10 ** (0.125 * (i - middle)) for i, checker in enumerate(CHECKERS)}
    width, height = STYLE["figure.figsize"]
    legend = 0.45 * (len(set(table.columns.get_level_values(1))) + 1)  # the legend's lines and its title
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(dtypes), 1, figsize=(width, height * len(dtypes) + legend), sharex=True,
                                 squeeze=False)
        for axis, dtype in zip(axes.flat, dtypes):
            for checker in [c for c in CHECKERS if c in table[dtype].columns]:
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
