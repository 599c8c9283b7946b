"""Plans: a check written down (expectation, input, devices, dtypes, tolerance) before anything runs.

A plan shows the analytical gradient with observed = none and executed = false; run() executes it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch

from .devices import resolve_devices
from .dtypes import dtype_name, to_dtype
from .errors import CheckInputError, ToleranceChangeError
from .expectations import Expectation, reference_input
from .observe import HOWS, How
from .records import Record
from .tolerances import Tolerance, default_tolerance


@dataclass(frozen=True)
class PlannedCheck:
    """One check on one device, dtype and way of observing, not yet executed."""

    label: str
    expectation: Expectation
    x: torch.Tensor
    expected: torch.Tensor
    how: How
    dtype: str
    device: str
    tolerance: Tolerance
    expected_failure: bool
    seed: int

    def record(self) -> Record:
        return Record(
            check=self.label,
            function=self.expectation.function,
            x=self.x.tolist(),
            input_shape=list(self.x.shape),
            dtype=self.dtype,
            device=self.device,
            how=self.how,
            gradient_formula=self.expectation.gradient,
            derivative_source=self.expectation.source,
            analytical_gradient=self.expected.tolist(),
            tolerance=self.tolerance.to_dict(),
            expected_failure=self.expected_failure,
            code=source_code(self.expectation),
        )


class Plan(Sequence[PlannedCheck]):
    """The checks as planned; displays as a table whose observed column is still empty."""

    def __init__(self, checks: Sequence[PlannedCheck]) -> None:
        self._checks = tuple(checks)

    def __getitem__(self, index):  # type: ignore[override]
        return self._checks[index]

    def __len__(self) -> int:
        return len(self._checks)

    def __iter__(self) -> Iterator[PlannedCheck]:
        return iter(self._checks)

    def records(self) -> list[Record]:
        return [check.record() for check in self._checks]

    def run(self):
        from .execute import run_plan

        return run_plan(self)

    def _repr_html_(self) -> str:
        from .display import records_html

        return records_html(self.records())


def plan(
    expectation: Expectation,
    x: object,
    *,
    how: How | Sequence[How] = "stored",
    dtypes: str | Sequence[str] = ("float64",),
    devices: str | Sequence[str] | None = None,
    tolerance: Tolerance | Mapping[str, Tolerance] | None = None,
    label: str | None = None,
    expected_failure: bool = False,
    seed: int = 0,
) -> Plan:
    """Plan a check of expectation at x on each device (all available by default) and dtype.

    tolerance -- None for torch.testing's per-dtype default, a Tolerance for every dtype, or one per dtype
    name; any other tolerance must carry its written reason (see Tolerance.changed).
    """
    if not isinstance(expectation, Expectation):
        raise CheckInputError("plan() needs an Expectation written first (checks.Expectation(...))")
    hows = (how,) if isinstance(how, str) else tuple(how)
    for item in hows:
        if item not in HOWS:
            raise CheckInputError(f"how={item!r} is not a way of observing autograd; use one of {HOWS}")
    names = [dtype_name(to_dtype(d)) for d in ((dtypes,) if isinstance(dtypes, str) else dtypes)]
    reference = reference_input(x)
    expected = expectation.analytical(reference)
    label = label or f"{expectation.function} at x={_short(reference)}"
    checks = [
        PlannedCheck(label, expectation, reference, expected, item, name, device,
                     _tolerance_for(tolerance, name), expected_failure, seed)
        for device in resolve_devices(devices if devices is None or not isinstance(devices, str) else [devices])
        for name in names
        for item in hows
    ]
    return Plan(checks)


def _tolerance_for(tolerance: Tolerance | Mapping[str, Tolerance] | None, dtype: str) -> Tolerance:
    if tolerance is None:
        return default_tolerance(dtype)
    if isinstance(tolerance, Mapping):
        chosen = tolerance.get(dtype)
        return default_tolerance(dtype) if chosen is None else _tolerance_for(chosen, dtype)
    if not isinstance(tolerance, Tolerance):
        raise ToleranceChangeError(
            f"tolerance={tolerance!r} has no written reason; pass a Tolerance, e.g. "
            f"default_tolerance({dtype!r}).changed(rtol=..., reason='why this is right')"
        )
    return tolerance


def _short(x: torch.Tensor) -> str:
    values = x.tolist()
    text = f"{values:g}" if isinstance(values, float) else str(values)
    return text if len(text) <= 30 else f"tensor of shape {tuple(x.shape)}"


def source_code(expectation: Expectation) -> dict[str, str]:
    """The code of f and df as written, so a failed check can be read and reproduced."""
    code = {}
    for name in ("f", "df"):
        try:
            code[name] = inspect.getsource(getattr(expectation, name)).strip()
        except (OSError, TypeError):
            code[name] = repr(getattr(expectation, name))
    return code
