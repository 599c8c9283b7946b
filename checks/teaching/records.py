"""Check records: one per check, device, dtype and way of observing, serialisable to JSON.

A record is a superset of {"function", "x", "analytical_gradient", "observed_gradient", "executed"}.

Collection at execution: whoever executes a check hands its Record to collect() explicitly, at once
(checks.teaching.execute, checks.teaching.higher, checks.witness, the library's reports through
checks.teaching.library, the mutant suite, ...), whether or not it is ever displayed; constructing a Record
does nothing else (no I/O in a constructor). A check that is printed, assigned, shown with .frame() or hidden
in a remove-output cell is still a check. The book's ledger is built from what was collected, never from what
was shown:

- In any process, collected() returns the records collected so far, in the order first seen; the same id
  collected again (a re-run cell) keeps the last one.
- When the environment variable CHECKS_RECORDS (RECORDS_VARIABLE) names a file, each collected record is
  also appended to it as one JSON line, with a single O_APPEND write; so is each display of records in a
  page's cell (displayed(): {"shown": [ids], "cell": the cell's execution count}), which tells the build
  which records a page shows, and where, without reading the page back. checks.sphinx.sphinxext sets it to a
  per-chapter file (records_path(doctreedir, docname)) before the chapter is executed; the kernel
  inherits it, and the extension reads the file back when the chapter has been read.
  Anyone executing a chapter another way (a pool of kernels, say) gives that kernel
  checks.sphinx.sphinxext.kernel_environment(app, docname): one variable, one file per chapter, so chapters
  running at the same time never share a file.
- Records loaded back from JSON (from_dict, from_json, load_records) are not collected: they were
  executed elsewhere.

Outcome and declaration: a record's verdict is the check's Outcome (pass / fail / inconclusive,
checks.core.outcome; None before it runs). What the chapter declared sits beside it as flags:
expected_failure (a demonstration of a failure), expected_inconclusive (a demonstration of what a check cannot
judge), measurement (a run of a study, such as the mutant suite, whose every outcome is a finding). status()
reads the verdict against them; it is the one rule, used by Record.status and by the ledger, which recomputes
it from the stored fields.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal, get_args

import torch

from ..core.errors import CheckInputError
from ..core.indices import unravel
from ..core.outcome import Outcome

Number = float | int
Value = Number | list[Any]
# How an observed value was produced: backward() into .grad ("stored"), torch.autograd.grad ("returned";
# "create_graph" when it kept a graph to differentiate again), handed to a tensor's hook during backward()
# ("hook"), torch.func's reverse and forward mode ("jacrev", "jacfwd"; one product of either, "vjp" and
# "jvp") and "hessian", a finite-difference estimate ("numerical"), or gradcheck's own.
Provenance = Literal["stored", "returned", "create_graph", "hook", "jacrev", "jacfwd", "vjp", "jvp", "hessian",
                     "numerical", "gradcheck"]
PROVENANCES: tuple[Provenance, ...] = get_args(Provenance)
# The keys every record has, and the seed of the book shows literally (Record.summary()).
SUMMARY_KEYS = ("function", "x", "analytical_gradient", "observed_gradient", "executed")
# A verdict read against what was declared (status()). The "unexpected" ones are problems: the book still
# shows them, and the build's warnings and python -m checks on the built ledger fail on them.
Status = Literal["pass", "expected failure", "expected inconclusive", "measured", "unexpected failure",
                 "unexpected inconclusive", "unexpected pass"]
STATUSES: tuple[Status, ...] = get_args(Status)
PROBLEMS: tuple[Status, ...] = ("unexpected failure", "unexpected inconclusive", "unexpected pass")
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
# Names the file (one per chapter) each executed record is appended to, as one JSON line.
RECORDS_VARIABLE = "CHECKS_RECORDS"
# A passing check whose allowance would pass a gradient more than this far wrong (relative, at its weakest
# element) is weak: it is marked on its page, and python -m checks lists it (a problem unless declared).
WEAK_ABOVE = 1e-2

_collected: dict[str, Record] = {}


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
    verdict: Outcome | None = None  # None: not executed yet (a plan)
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
    # What the allowance could catch (checks.core.compare.detectable): a gradient wrong by more than this
    # relative error at every element fails; the element where the allowance is widest against the expected
    # value. None: nothing was compared against an expected value, or every expected element is 0.
    detectable_relative_error: float | None = None
    detectable_index: list[int] | None = None
    # Why a weak allowance is acceptable here, as the chapter declared it (weak="..."); "" when undeclared.
    weak_reason: str = ""
    # Declared: the check is meant to be inconclusive (a kink, say: what a check cannot judge, shown).
    expected_inconclusive: bool = False
    # Declared: why this run's outcome is a finding of a study, whichever it is (the mutant suite asks how often
    # a checker catches a known bug); "" for a claim about a gradient.
    measurement: str = ""
    # The library call or tool that made the check: "check_jacobian", "assert_gradients", "check_module",
    # "assert_module_gradients", "gradcheck", "gradgradcheck", or a study's checker; "" for a teaching check.
    checker: str = ""

    def __post_init__(self) -> None:
        # Checks of the arguments only; a record is handed to collect() by whoever executed it.
        if self.verdict not in (None, *OUTCOMES):
            raise CheckInputError(f"a record's verdict is one of {', '.join(OUTCOMES)} (or None before it runs), "
                                  f"got {self.verdict!r}")
        if self.expected_failure and self.expected_inconclusive:
            raise CheckInputError("a check is declared either an expected failure or an expected inconclusive, "
                                  "not both")
        if not self.id:
            object.__setattr__(self, "id", record_id(self))

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def outcome(self) -> Outcome | None:
        """The check's outcome (pass / fail / inconclusive); None before it runs."""
        return self.verdict

    @property
    def status(self) -> Status | None:
        """The outcome read against what was declared (status()); None before it runs."""
        return status(self.verdict, self.expected_failure, self.expected_inconclusive, self.measurement)

    @property
    def weak(self) -> bool:
        """A pass whose allowance would also pass a gradient more than WEAK_ABOVE (relative) wrong."""
        return is_weak(self.verdict, self.detectable_relative_error)

    def to_dict(self) -> dict[str, Any]:
        """The record's fields; values of more than FOLD_LIMIT numbers are folded (see fold)."""
        large = _count(self.x) > FOLD_LIMIT
        data = {f.name: getattr(self, f.name) if large and f.name in FOLDED else copy.deepcopy(getattr(self, f.name))
                for f in fields(self)}
        if large:
            for name in FOLDED:
                if data[name] is not None:
                    data[name] = fold(data[name])
            if self.observed_gradient is not None:
                data["observed_gradient"]["worst"] = _worst(self.analytical_gradient, self.observed_gradient)
            if "element_atol" in data["tolerance"]:
                data["tolerance"]["element_atol"] = fold(data["tolerance"]["element_atol"])
        return data

    def summary(self) -> Summary:
        """The documented keys only, shown as JSON: {"function": "x*x", "x": 3, ..., "executed": false}."""
        return Summary({key: _json_number(getattr(self, key)) for key in SUMMARY_KEYS})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        if not isinstance(data, dict):
            raise CheckInputError(f"a record is read from a dictionary, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise CheckInputError(f"a record needs {', '.join(missing)}; the dictionary lacks them")
        given = {key: value for key, value in data.items() if key in known}
        if given.get("verdict") == "planned":  # as records were written before the one Outcome vocabulary
            given["verdict"] = None
        return cls(**given)

    @classmethod
    def from_json(cls, text: str) -> Record:
        return cls.from_dict(_parse(text))


# Above this many input elements, a record's values are kept as summaries: a check of a 10⁶-element input
# would otherwise write every value (tens of MB of JSON) into its page and the ledger.
FOLD_LIMIT = 1000
# (A per-element tolerance's element_atol is folded too: checks.core.tolerances.Tolerance.per_element.)
FOLDED = ("x", "analytical_gradient", "observed_gradient", "step", "error_estimate")
WORST_KEPT = 10


def declared(expected_failure: bool, expected_inconclusive: bool = False) -> Outcome:
    """The outcome a chapter declared for a check: pass unless it said otherwise."""
    return "fail" if expected_failure else "inconclusive" if expected_inconclusive else "pass"


# A verdict as declared, by verdict; anything else is unexpected.
_AS_DECLARED: dict[Outcome, Status] = {"pass": "pass", "fail": "expected failure",
                                       "inconclusive": "expected inconclusive"}
_UNEXPECTED: dict[Outcome, Status] = {"pass": "unexpected pass", "fail": "unexpected failure",
                                      "inconclusive": "unexpected inconclusive"}


def status(verdict: Outcome | None, expected_failure: bool, expected_inconclusive: bool = False,
           measurement: str = "") -> Status | None:
    """A verdict read against the declared flags: the one rule, for a Record and for a ledger entry alike.

    A study's run (measurement) is a finding whatever its outcome; otherwise a verdict equal to the declared
    outcome is as declared, and any other is unexpected (a problem). None: not executed.
    """
    if verdict is None:
        return None
    if verdict not in OUTCOMES:
        raise CheckInputError(f"verdict {verdict!r} is not one of {', '.join(OUTCOMES)}")
    if measurement:
        return "measured"
    wanted = declared(expected_failure, expected_inconclusive)
    return _AS_DECLARED[verdict] if verdict == wanted else _UNEXPECTED[verdict]


def is_weak(verdict: str, detectable_relative_error: float | None) -> bool:
    """Whether a check with this verdict and detectable error is weak (see WEAK_ABOVE)."""
    return verdict == "pass" and detectable_relative_error is not None and detectable_relative_error > WEAK_ABOVE


def fold(value: Value) -> dict[str, Any]:
    """A large value as its shape, count, summary statistics and first and last few elements."""
    tensor = torch.tensor(value, dtype=torch.float64)
    flat = tensor.reshape(-1)
    finite = flat[torch.isfinite(flat)]
    return {
        "folded": True,
        "shape": list(tensor.shape),
        "count": flat.numel(),
        "min": float(finite.min()) if finite.numel() else None,
        "max": float(finite.max()) if finite.numel() else None,
        "mean": float(finite.mean()) if finite.numel() else None,
        "non_finite": flat.numel() - finite.numel(),
        "first": flat[:3].tolist(),
        "last": flat[-3:].tolist(),
    }


def _worst(expected: Value, observed: Value) -> list[dict[str, Any]]:
    """The elements where observed and expected differ most, with their indices: what a reader needs."""
    wanted = torch.tensor(expected, dtype=torch.float64)
    got = torch.tensor(observed, dtype=torch.float64)
    difference = (got - wanted).abs().nan_to_num(nan=math.inf).reshape(-1)
    order = difference.topk(min(WORST_KEPT, difference.numel())).indices
    return [{"index": list(unravel(int(index), wanted.shape)),
             "expected": float(wanted.reshape(-1)[index]), "observed": float(got.reshape(-1)[index]),
             "difference": float(difference[index])} for index in order]


def _count(value: object) -> int:
    """How many numbers a value holds (x is a number or a nested list of them)."""
    count = 1
    while isinstance(value, list):
        count *= len(value)
        value = value[0] if value else 0
    return count


class Summary(dict):
    """A record's documented keys; its repr is the JSON a reader would write down (null, false, 3)."""

    def __repr__(self) -> str:
        return json.dumps(self)

    def _repr_html_(self) -> str:
        # Wrapped at its spaces, so the whole record is in view on a phone; the text is unchanged.
        text = json.dumps(self).replace("&", "&amp;").replace("<", "&lt;")
        return f'<pre class="checks-summary" style="white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal;">{text}</pre>'


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
    # So is the same check held to another tolerance, or declared an expected failure: both are claims,
    # and a chapter that shows both must not give them one anchor (the ledger keeps the last per id).
    parts += [record.tolerance.get("rtol"), record.tolerance.get("atol"), record.expected_failure]
    # Declarations added later enter the key only when set: the ids of other records stay unchanged.
    parts += [flag for flag in (record.expected_inconclusive and "expected inconclusive",
                                record.measurement and "measurement", record.checker) if flag]
    # Two numerical methods on the same check are two checks; other records keep their ids unchanged.
    key = json.dumps(parts + [record.method] if record.method else parts)
    slug = re.sub(r"[^a-z0-9]+", "-", record.check.lower()).strip("-")[:40] or "check"
    how = f"{record.how}-{record.method}" if record.method else record.how
    return f"check-{slug}-{how}-{record.dtype}-{record.device}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def dump_records(records: list[Record]) -> str:
    if isinstance(records, Record) or not all(isinstance(record, Record) for record in records):
        raise CheckInputError("dump_records needs a list of Records (a single one goes in a list: [record])")
    return json.dumps([record.to_dict() for record in records], sort_keys=True, indent=1)


def load_records(text: str) -> list[Record]:
    items = _parse(text)
    if not isinstance(items, list):
        raise CheckInputError(f"records are stored as a JSON list (dump_records), got {type(items).__name__}")
    return [Record.from_dict(item) for item in items]


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise CheckInputError(f"records must be JSON text: {error}") from None


def collect(record: Record) -> Record:
    """Keep an executed record, and append it to the file CHECKS_RECORDS names (if any) as one JSON line;
    returns it. The one way a check reaches the ledger."""
    if not isinstance(record, Record):
        raise CheckInputError(f"collect() keeps a Record, got {type(record).__name__}")
    if record.executed is not True or record.verdict is None:
        raise CheckInputError(f"{record.check}: only an executed record with a verdict is collected "
                              f"(executed={record.executed}, verdict={record.verdict!r})")
    _collected[record.id] = record
    _append(record.to_dict())
    return record


def displayed(ids: list[str], cell: int | None) -> None:
    """Note that the cell with execution count `cell` displays the records of these ids (a table's HTML):
    one JSON line in the CHECKS_RECORDS file, when there is one."""
    if ids:
        _append({"shown": list(ids), "cell": cell})


def _append(item: dict[str, Any]) -> None:
    target = os.environ.get(RECORDS_VARIABLE)
    if target:
        line = (json.dumps(item, sort_keys=True) + "\n").encode("utf-8")
        descriptor = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)


def collected() -> list[Record]:
    """Every record collected in this process so far (the last one per id)."""
    return list(_collected.values())


def read_collected(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records a CHECKS_RECORDS file holds, the last one per id, in the order first seen."""
    return _records_of(_read_lines(path))


def read_shown(path: str | os.PathLike[str]) -> dict[str, set[int | None]]:
    """The ids of the records each display of a CHECKS_RECORDS file showed, with the cells (execution counts)
    that showed them."""
    shown: dict[str, set[int | None]] = {}
    for item in _read_lines(path):
        if "shown" in item:
            for key in item["shown"]:
                shown.setdefault(key, set()).add(item.get("cell"))
    return shown


def _records_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        if "shown" not in item:
            found[item["id"]] = item
    return list(found.values())


def _read_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON lines of a CHECKS_RECORDS file. A missing file means nothing was executed. A line cut short (a
    kernel killed mid-write) is an error, not a record silently lost."""
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: not a complete record ({error})") from None
    return items
