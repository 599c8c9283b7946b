"""The plan a chapter shows and runs: checks written down first (observed: none), then executed.

plan(expectation, x, ...) lays the checks out, one row per device, dtype and way of observing; Plan.run(code)
runs the reader's own PyTorch on each row (checks.teaching.witness), Plan.run() alone observes f with
checks' own backward() / autograd.grad / finite differences (checks.teaching.execute). witness() is
plan(...).run(code) in one call.

Each dtype's row holds the input rounded to that dtype, and its expected gradient is the analytical
derivative at that rounded input: a float32 row then measures autograd's error, not the input's rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

import torch

from ..core.dtypes import to_dtype
from ..core.errors import CheckInputError
from ..core.numerical import Method
from ..core.tolerances import Tolerance, numerical_tolerance
from ..core.validate import number
from .display import records_html
from .execute import execute
from .expectations import Blanks, Expectation, reference_input
from .planning import OWN_HOWS, PlannedCheck, planned_checks, planned_dtypes
from .records import Provenance, Record, collect
from .results import Results
from .witness import Code, function_and_how, run_code


class Plan(Sequence[PlannedCheck]):
    """The checks as planned; displays as a table whose observed column is still empty."""

    def __init__(self, checks: Sequence[PlannedCheck]) -> None:
        self._checks = tuple(checks)
        if not self._checks:
            raise CheckInputError("a plan with no checks is refused: running it would report nothing as passed")
        if not all(isinstance(check, PlannedCheck) for check in self._checks):
            raise CheckInputError("a Plan holds PlannedChecks (from checks.plan(...)); got "
                                  + ", ".join(sorted({type(check).__name__ for check in self._checks})))

    def __getitem__(self, index):  # type: ignore[override]
        return self._checks[index]

    def __len__(self) -> int:
        return len(self._checks)

    def __iter__(self) -> Iterator[PlannedCheck]:
        return iter(self._checks)

    def records(self) -> list[Record]:
        return [check.record() for check in self._checks]

    def one(self, **where: object) -> PlannedCheck:
        """The single planned check whose fields equal where, e.g. one(dtype="float64", device="cpu")."""
        found = [check for check in self._checks if all(getattr(check, key) == value for key, value in where.items())]
        if len(found) != 1:
            raise CheckInputError(f"{len(found)} planned checks match {where}; expected exactly one")
        return found[0]

    def run(self, *code: Callable[..., object] | tuple[Callable[..., object], Provenance], how: Provenance | None = None):
        """Execute the plan. With code functions, run each of them per device and dtype (checks.witness).

        code -- the reader's functions, each taking a fresh leaf x and returning the gradient it
                observed (x.grad after backward(), what torch.autograd.grad returned, ...); a pair
                (function, how) names how, where it cannot be inferred; how= names it for all of them.
        Without code, each planned row is observed by checks itself, in the way its how names: stored,
        returned or numerical (other ways are observed by code only).
        """
        if code:
            return run_code(self, code, how=how)
        if how is not None:
            raise CheckInputError("how= names how your code observed the gradient; pass the code too: run(code, how=...)")
        for check in self._checks:
            if check.how not in OWN_HOWS:
                raise CheckInputError(f"how={check.how!r} is observed by your code, not by checks: pass it, plan.run(code)")
        return Results([execute(check) for check in self._checks])

    def _repr_html_(self) -> str:
        return records_html(self.records())


def plan(
    expectation: Expectation,
    x: object,
    *,
    how: Provenance | Sequence[Provenance] = "stored",
    dtypes: str | Sequence[str] = ("float64",),
    devices: str | Sequence[str] | None = None,
    tolerance: Tolerance | float | Mapping[str, Tolerance | float] | str | None = None,
    label: str | None = None,
    expected_failure: bool = False,
    seed: int = 0,
    method: Method | Sequence[Method] = "central",
    step: float | None = None,
    levels: int = 3,
    weak: str | Mapping[str, str] | None = None,
) -> Plan:
    """Plan a check of expectation at x on each device (all available by default) and dtype.

    tolerance -- None for the default (torch.testing's per-dtype default for autograd; for a numerical
    estimate, one derived for each element from ε, its step and |f|: element_numerical_tolerance), a Tolerance for
    every dtype, or one per dtype name; any other tolerance must carry its written reason (see
    Tolerance.changed), except a plain number t, where tolerances are not the lesson (an exercise): atol =
    rtol = t, recorded as "a plain number given by the reader" (Tolerance.plain_number). "estimate" takes a numerical check's tolerance from its own error estimate
    (Richardson only), so it is known only once the check has run.
    how="numerical" plans one finite-difference estimate per method (forward, central, complex,
    richardson), with relative step step (None: numerical.default_step) and Richardson's levels.
    weak -- a check shown weak on purpose (it passes, but its allowance would also pass a gradient more
    than 1 % wrong) says why that is acceptable here: weak="why", or one reason per dtype name. Undeclared,
    a weak check is a problem python -m checks reports.
    """
    return Plan(planned_checks(expectation, x, how=how, dtypes=dtypes, devices=devices, tolerance=tolerance,
                               label=label, expected_failure=expected_failure, seed=seed, method=method, step=step,
                               levels=levels, weak=weak))


def witness(
    expectation: Expectation,
    x: object,
    *code: Code | tuple[Code, Provenance],
    how: Provenance | None = None,
    dtypes: str | Sequence[str] = ("float64",),
    devices: str | Sequence[str] | None = None,
    tolerance: Tolerance | float | Mapping[str, Tolerance | float] | None = None,
    label: str | None = None,
    expected_failure: bool = False,
    seed: int = 0,
    weak: str | Mapping[str, str] | None = None,
    step: float | Callable[[torch.Tensor], float] | None = None,
    method: Method = "central",
) -> Results | Blanks:
    """Run each code function on a fresh leaf per device and dtype, and compare with the expectation.

    An expectation with blanks left (`...`: an exercise not filled in yet) runs nothing: the Blanks returned
    says what to fill in, so that a notebook run top to bottom goes past the exercise.

    Equivalent to checks.plan(expectation, x, how=<the ways named>, dtypes=..., ...).run(*code, how=how).
    weak= as for plan().

    step, method -- for code named how="numerical", its own difference quotient: the step h it used and
    the method ("forward" or "central"). checks cannot read them off the code, so numerical code needs
    step or tolerance= (with its reason): with step, the records keep that step and method, and the default
    tolerance is derived at that step (checks.core.tolerances.numerical_tolerance), not at checks' own.
    A step that depends on the dtype is given as the rule the code uses: step=rule, rule(x) -> h for the
    input x in each dtype.
    """
    if not code:
        raise CheckInputError("witness() needs at least one code function, e.g. def stored(x): ... return x.grad")
    if isinstance(expectation, Expectation) and (blanks := expectation.blanks_at(x)):
        return Blanks(expectation, blanks)
    if callable(step):
        # Each dtype at the step the reader's rule gives for it.
        options = {"how": how, "devices": devices, "tolerance": tolerance, "label": label,
                   "expected_failure": expected_failure, "seed": seed, "weak": weak, "method": method}
        return sum((witness(expectation, x, *code, dtypes=name, step=_step_of(step, x, name), **options)
                    for name in planned_dtypes(dtypes, None)), Results([]))
    functions = [function_and_how(item, how) for item in code]
    numerical = [item for item, (_, named) in zip(code, functions) if named == "numerical"]
    if step is not None:
        number(step, "step (the step your numerical code used)", above=0)
        if method not in ("forward", "central"):
            raise CheckInputError(f"method={method!r}: your own difference quotient is 'forward' or 'central'")
        if not numerical:
            raise CheckInputError("step= is the step of your own numerical code; no code here is named "
                                  "how='numerical'")
    if numerical and tolerance is None:
        if step is None:
            raise CheckInputError(
                "checks cannot see the step your numerical code used: pass step=h (and method='forward' or "
                "'central'), and the default tolerance is derived at it, or pass tolerance= with its reason")
        tolerance = {name: _tolerance_at(expectation, x, name, method, step) for name in planned_dtypes(dtypes, None)}
        others = [item for item, (_, named) in zip(code, functions) if named != "numerical"]
        options = {"dtypes": dtypes, "devices": devices, "label": label, "expected_failure": expected_failure,
                   "seed": seed, "weak": weak}
        # The derived tolerance is for the numerical rows only: any other code is witnessed on its own.
        results = witness(expectation, x, *others, how=how, **options) if others else Results([])
        return results + witness(expectation, x, *numerical, how=how, tolerance=tolerance, step=step,
                                 method=method, **options)
    # A row per way named (a numerical one gets a numerical default tolerance); inferred ways share "stored"'s.
    named = tuple(dict.fromkeys(explicit or "stored" for _, explicit in functions))
    planned = plan(expectation, x, how=named, dtypes=dtypes, devices=devices, tolerance=tolerance, label=label,
                   expected_failure=expected_failure, seed=seed, weak=weak)
    results = run_code(planned, code, how=how)
    if step is None:
        return results
    # The step and method the reader's numerical code used, kept on its records.
    return Results([collect(replace(record, step=step, method=method)) if record.how == "numerical" else record
                    for record in results])


def _step_of(rule: Callable[[torch.Tensor], float], x: object, dtype: str) -> float:
    """The step the reader's rule gives for x in dtype, as a number."""
    try:
        step = float(rule(reference_input(x).to(to_dtype(dtype))))
    except (TypeError, ValueError, RuntimeError) as error:
        raise CheckInputError(f"step= is a rule of x, so it was called with x in {dtype}, and it raised "
                              f"{type(error).__name__}: {error}; give the step as a number, or a rule that "
                              f"returns one") from None
    return number(step, f"step (what your step rule returned for x in {dtype})", above=0)


def _tolerance_at(expectation: Expectation, x: object, dtype: str, method: Method, step: float) -> Tolerance:
    """numerical_tolerance at the reader's own step, with |f| and |f'| at x (in float64)."""
    reference = reference_input(x).to(to_dtype(dtype)).to(torch.float64)
    with torch.no_grad():
        f_scale = float(torch.as_tensor(expectation.f(reference.clone())).abs().max())
    expected = expectation.analytical(reference)
    gradient_scale = float(expected.abs().max()) if expected.numel() else 0.0
    derived = numerical_tolerance(dtype, method, step=step, f_scale=f_scale, gradient_scale=gradient_scale,
                                  derivative_scale=max(1.0, gradient_scale))
    return replace(derived, reason=f"{derived.reason}; h is the step your code used, as you stated it")
