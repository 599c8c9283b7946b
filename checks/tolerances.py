"""Tolerances: each one carries the reason it was chosen, and every change keeps old -> new and why.

Defaults are torch.testing.assert_close's per-dtype defaults, so a check here means what it means there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .dtypes import dtype_name, to_dtype
from .errors import ToleranceChangeError

# torch.testing.assert_close defaults (torch/testing/_comparison.py, _DTYPE_PRECISIONS); float64 is also
# its fallback for dtypes it does not list.
ASSERT_CLOSE_DEFAULTS: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


@dataclass(frozen=True)
class ToleranceChange:
    """One change of a tolerance: what it was, what it became, and the written reason."""

    old_rtol: float
    old_atol: float
    rtol: float
    atol: float
    reason: str


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference |observed - expected| <= atol + rtol * |expected|, elementwise, with its reason."""

    rtol: float
    atol: float
    reason: str
    history: tuple[ToleranceChange, ...] = field(default=())

    def __post_init__(self) -> None:
        _require_reason(self.reason, "a tolerance")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0 and value == value):
                raise ToleranceChangeError(f"{name} must be a non-negative number, got {value!r}")

    def changed(self, *, reason: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
        """A new tolerance with rtol and/or atol changed; refused without a written reason."""
        _require_reason(reason, "changing a tolerance")
        new_rtol = self.rtol if rtol is None else float(rtol)
        new_atol = self.atol if atol is None else float(atol)
        change = ToleranceChange(self.rtol, self.atol, new_rtol, new_atol, reason.strip())
        return replace(self, rtol=new_rtol, atol=new_atol, reason=reason.strip(), history=(*self.history, change))

    def to_dict(self) -> dict:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "reason": self.reason,
            "history": [vars(change).copy() for change in self.history],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Tolerance:
        history = tuple(ToleranceChange(**change) for change in data.get("history", ()))
        return cls(rtol=data["rtol"], atol=data["atol"], reason=data["reason"], history=history)


def default_tolerance(dtype: str | torch.dtype) -> Tolerance:
    """torch.testing.assert_close's default for this dtype, with that provenance as the reason."""
    name = dtype_name(to_dtype(dtype))
    rtol, atol = ASSERT_CLOSE_DEFAULTS.get(name, ASSERT_CLOSE_DEFAULTS["float64"])
    return Tolerance(rtol=rtol, atol=atol, reason=f"torch.testing.assert_close default for {name}")


def _require_reason(reason: object, what: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ToleranceChangeError(f"{what} needs a written reason (reason='...'); none was given")
