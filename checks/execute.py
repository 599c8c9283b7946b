"""Executing a plan: one fresh leaf and forward per check, observed on its device, compared, recorded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch

from .compare import compare
from .devices import device_name
from .dtypes import to_dtype
from .environment import environment
from .errors import CheckInputError
from .numerical import estimate_gradient
from .observe import observe
from .plan import Plan, PlannedCheck
from .records import Record
from .tolerances import Tolerance, estimate_tolerance


def execute(check: PlannedCheck) -> Record:
    """Run one planned check and return its executed record (a failed check is a record, not an error)."""
    torch.manual_seed(check.seed)
    x = check.x.to(device=check.device, dtype=to_dtype(check.dtype))
    if check.how == "numerical":
        return _execute_numerical(check, x)
    observed = observe(check.expectation.f, x, check.how)
    return _executed(check, check.record(), observed, check.tolerance)


def _execute_numerical(check: PlannedCheck, x: torch.Tensor) -> Record:
    """A finite-difference estimate in place of autograd, with its method, steps and evaluations."""
    method = check.method or "central"
    estimate = estimate_gradient(check.expectation.f, x, method, check.step, levels=check.levels)
    tolerance = estimate_tolerance(estimate) if check.adaptive else check.tolerance
    summary = estimate.summary()
    record = replace(check.record(), step=summary["step"], evaluations=summary["evaluations"],
                     error_estimate=summary["error_estimate"], tolerance=tolerance.to_dict())
    return _executed(check, record, estimate.values, tolerance)


def _executed(check: PlannedCheck, record: Record, observed: torch.Tensor, tolerance: Tolerance) -> Record:
    comparison = compare(observed, check.expected, tolerance)
    return replace(
        record,
        observed_gradient=observed.cpu().to(torch.float64).tolist(),
        executed=True,
        abs_error=comparison.abs_error,
        rel_error=comparison.rel_error,
        worst_index=list(comparison.worst_index),
        mismatched=comparison.mismatched,
        verdict="pass" if comparison.passed else "fail",
        message=comparison.message,
        device_name=device_name(check.device),
        environment=environment(check.seed),
    )


# What checks can observe by itself; other ways (jacrev, jacfwd, ...) are observed by the reader's code.
OWN_HOWS = ("stored", "returned", "numerical")


def run_plan(plan: Plan) -> Results:
    for check in plan:
        if check.how not in OWN_HOWS:
            raise CheckInputError(
                f"how={check.how!r} is observed by your code, not by checks: pass it, plan.run(code)")
    return Results([execute(check) for check in plan])


class Results(Sequence[Record]):
    """Executed records; displays as a table and embeds the records for the book's ledger.

    columns, headings -- the record fields shown and any heading that differs from the shared one
    (a script's table says its expected values are worked out from the analytical derivative).
    """

    def __init__(self, records: Sequence[Record], *, columns: Sequence[str] | None = None,
                 headings: dict[str, str] | None = None) -> None:
        self._records = tuple(records)
        self._columns = tuple(columns) if columns else None
        self._headings = dict(headings or {})

    def __getitem__(self, index):  # type: ignore[override]
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __add__(self, other: Results) -> Results:
        return Results((*self._records, *other), columns=self._columns, headings=self._headings)

    @property
    def passed(self) -> bool:
        return all(record.passed for record in self._records)

    def failures(self) -> Results:
        return Results([record for record in self._records if not record.passed], columns=self._columns,
                       headings=self._headings)

    def one(self, **where: object) -> Record:
        """The single record whose fields equal where, e.g. one(device="cpu", how="stored")."""
        found = [r for r in self._records if all(getattr(r, key) == value for key, value in where.items())]
        if len(found) != 1:
            raise CheckInputError(f"{len(found)} records match {where}; expected exactly one")
        return found[0]

    def frame(self):
        from .display import records_frame

        return records_frame(list(self._records), self._columns, self._headings)

    def _repr_html_(self) -> str:
        from .display import records_html

        return records_html(list(self._records), self._columns, self._headings)
