"""Check records: one per check, device, dtype and way of observing, serialisable to JSON.

A record is a superset of {"function", "x", "analytical_gradient", "observed_gradient", "executed"}.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

Number = float | int
Value = Number | list[Any]
Verdict = Literal["planned", "pass", "fail"]
# How an observed value was produced: backward() into .grad ("stored"), torch.autograd.grad ("returned";
# "create_graph" when it kept a graph to differentiate again), torch.func's reverse and forward mode
# ("jacrev", "jacfwd") and "hessian", a finite-difference estimate ("numerical"), or gradcheck's own.
Provenance = Literal["stored", "returned", "create_graph", "jacrev", "jacfwd", "hessian", "numerical", "gradcheck"]
PROVENANCES: tuple[Provenance, ...] = get_args(Provenance)
# The keys every record has, and the seed of the book shows literally (Record.summary()).
SUMMARY_KEYS = ("function", "x", "analytical_gradient", "observed_gradient", "executed")
# A verdict read together with the expected-failure flag. The last two are problems: the book still shows
# them, and the tests (python -m checks on the built ledger) fail on them.
Outcome = Literal["planned", "pass", "expected failure", "unexpected failure", "unexpected pass"]
PROBLEMS: tuple[Outcome, ...] = ("unexpected failure", "unexpected pass")


@dataclass(frozen=True)
class Record:
    """Everything a reader (or the ledger) needs to judge one check."""

    check: str
    function: str
    x: Value
    input_shape: list[int]
    dtype: str
    device: str
    how: Provenance
    gradient_formula: str
    derivative_source: str
    analytical_gradient: Value
    observed_gradient: Value | None = None
    executed: bool = False
    abs_error: float | None = None
    rel_error: float | None = None
    worst_index: list[int] | None = None
    mismatched: int | None = None
    tolerance: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = "planned"
    expected_failure: bool = False
    message: str = ""
    device_name: str = ""
    code: dict[str, str] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    # Numerical estimates only (how="numerical"): the method, the representable step(s) per input element,
    # how many times f was evaluated, and (Richardson) the estimate's own error estimate per element.
    method: str = ""
    step: Value | None = None
    evaluations: int | None = None
    error_estimate: Value | None = None

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", record_id(self))

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def outcome(self) -> Outcome:
        """The verdict against what was declared: a demonstration failure is expected, a pass of one is not."""
        if self.verdict == "planned":
            return "planned"
        if self.expected_failure:
            return "unexpected pass" if self.passed else "expected failure"
        return "pass" if self.passed else "unexpected failure"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> Summary:
        """The documented keys only, shown as JSON: {"function": "x*x", "x": 3, ..., "executed": false}."""
        return Summary({key: _json_number(getattr(self, key)) for key in SUMMARY_KEYS})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    @classmethod
    def from_json(cls, text: str) -> Record:
        return cls.from_dict(json.loads(text))


class Summary(dict):
    """A record's documented keys; its repr is the JSON a reader would write down (null, false, 3)."""

    def __repr__(self) -> str:
        return json.dumps(self)

    def _repr_html_(self) -> str:
        # Wrapped at its spaces, so the whole record is in view on a phone; the text is unchanged.
        text = json.dumps(self).replace("&", "&amp;").replace("<", "&lt;")
        return f'<pre class="checks-summary" style="white-space: pre-wrap; overflow-wrap: anywhere;">{text}</pre>'


def _json_number(value: Any) -> Any:
    """Whole floats as integers (3.0 -> 3): in JSON they are the same number, and 3 is what was written."""
    if isinstance(value, list):
        return [_json_number(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def record_id(record: Record) -> str:
    """A stable anchor: the same check on the same device and dtype gets the same id in every build."""
    # The expected formula is part of the check: a second expectation of the same function is another check.
    parts = [record.check, record.function, record.gradient_formula, record.x, record.how, record.dtype,
             record.device]
    # Two numerical methods on the same check are two checks; other records keep their ids unchanged.
    key = json.dumps(parts + [record.method] if record.method else parts)
    slug = re.sub(r"[^a-z0-9]+", "-", record.check.lower()).strip("-")[:40] or "check"
    how = f"{record.how}-{record.method}" if record.method else record.how
    return f"check-{slug}-{how}-{record.dtype}-{record.device}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def dump_records(records: list[Record]) -> str:
    return json.dumps([record.to_dict() for record in records], sort_keys=True, indent=1)


def load_records(text: str) -> list[Record]:
    return [Record.from_dict(item) for item in json.loads(text)]
