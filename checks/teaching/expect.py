"""One line beside the value it checks: checks.expect(value, expected, "label"); checks.raises(Error).

    x = torch.tensor(3.0, requires_grad=True)
    y = x * x
    y.backward()
    checks.expect(x.grad, 6.0, "d/dx x·x = 2x at 3")
    with checks.raises(RuntimeError, "a second backward() through a freed graph"):
        y.backward()

The expectation, as written:
- a number, a nested list of them, True/False, or None (no value: x.grad still None), taken as written in
  float64;
- a function of the input, given with at=: `lambda x: 2 * x, at=x` is evaluated at the x the row's dtype
  holds (several inputs: at=(model, X, Y); a module arrives as a float64 copy), converted to float64 on the
  CPU, under float64 as the default dtype and the CPU as the default device
  (the intro's rule: expectations are evaluated in float64 on the CPU);
- a tensor only if it is float64 on the CPU already: a float32 tensor has been rounded before it was compared,
  so it is refused (write the number, or the function with at=);
- `...` (or a function returning it), an exercise's blank: the cell says what to fill in and records nothing.

Each check is a Record handed to checks.teaching.records.collect at once, then reported (a row of its cell's
table under checks.each_cell, else one printed line). The row's dtype and device are the observed value's
own. How the value was produced is read off the code (checks.teaching.provenance); how= names it where the
code cannot tell. A failure says which slip the numbers show (checks.teaching.slips). Declared outcomes:
expected_failure="why" (a demonstration of a wrong expectation), inconclusive="why" (an expected value that
is not a number, e.g. NaN where the derivative is not defined), weak="why" (a pass whose allowance is coarse on
purpose: the row says how wrong a gradient it would also pass).

The value may be an Estimate (checks.estimate_gradient): its values are checked as a numerical estimate, and
the record keeps its method, steps, evaluations of f and error estimate; tolerance="estimate" takes the
allowance from the estimate's own error estimate (Richardson). A numerical check that cannot fail (an
allowance as large as every expected element) is recorded as a failure.

checks.recorded(label, dtype=..., device=...) gives a check's record back, for a hidden cell to glue its
numbers into the prose.
"""

from __future__ import annotations

import copy
import sys
import traceback as traceback_module
from collections.abc import Callable
from types import EllipsisType, TracebackType
from typing import Any

import torch

from ..core.compare import compare, detectable
from ..core.dtypes import dtype_name
from ..core.errors import CheckInputError, ShapeMismatchError
from ..core.numerical import Estimate
from ..core.tolerances import Tolerance, default_tolerance, estimate_tolerance, tolerance_argument
from . import cells, provenance, records
from .display import format_value
from .environment import device_name, environment
from .execute import undiscriminating
from .records import Record
from .rows import DECLARED, DIAGNOSIS, RAISED
from .slips import diagnosis
from .witness import _caller_objects

Expected = float | int | bool | list | None | torch.Tensor | Callable[..., Any]


def _float64(value: Any, what: str) -> torch.Tensor:
    try:
        return torch.as_tensor(value, dtype=torch.float64, device="cpu")
    except (TypeError, ValueError, RuntimeError) as error:
        raise CheckInputError(f"{what}={value!r} is not a number, a list of numbers, a tensor or None: "
                              f"{error}") from None


def _inputs(at: Any) -> tuple[Any, ...]:
    """The input(s) as float64 on the CPU: the value each dtype holds, without its rounding undone. A module
    (its parameters as they are now) is handed over as a float64 copy on the CPU."""
    items = at if isinstance(at, tuple) else (at,)
    if not all(isinstance(item, (torch.Tensor, torch.nn.Module)) for item in items):
        raise CheckInputError(f"at= names the tensor(s) or module(s) the expected function is evaluated at, "
                              f"got {at!r}")
    return tuple(copy.deepcopy(item).to("cpu", torch.float64) if isinstance(item, torch.nn.Module)
                 else item.detach().to("cpu", torch.float64) for item in items)


def _input_of(at: Any) -> torch.Tensor | None:
    """The record's x: the input at= gives, or of several (model, X, Y) the first tensor, the data."""
    return next((item for item in _inputs(at) if isinstance(item, torch.Tensor)), None)


def expected_value(expected: Expected, at: Any = None) -> torch.Tensor | bool | None | EllipsisType:
    """The expectation in float64 on the CPU, by the rules of the module doc."""
    if expected is None or isinstance(expected, bool):
        return expected
    if isinstance(expected, torch.Tensor):
        if expected.dtype != torch.float64 or expected.device.type != "cpu":
            raise CheckInputError(
                f"expected is a {dtype_name(expected.dtype)} tensor on {expected.device.type}: an expectation is "
                f"evaluated in float64 on the CPU, and this one was computed (and rounded) already; write the "
                f"number, or a function of the input: lambda x: ..., at=x")
        return expected.detach().clone()
    if callable(expected):
        inputs = _inputs(at) if at is not None else ()
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with torch.device("cpu"), torch.no_grad():
                value = expected(*inputs)
        finally:
            torch.set_default_dtype(default)
        if value is None or isinstance(value, bool) or value is Ellipsis:
            return value
        if isinstance(value, torch.Tensor) and value.dtype != torch.float64:
            raise CheckInputError(f"the expected function returned {dtype_name(value.dtype)}: build it from its "
                                  f"input (float64) so that it is evaluated in float64")
        return _float64(value, "expected")
    if at is not None:
        raise CheckInputError("at= is the input of an expected function; this expectation is a value")
    return Ellipsis if expected is Ellipsis else _float64(expected, "expected")


def _observed(value: Any, label: str) -> torch.Tensor | bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64) if value.dtype != torch.bool else bool(value.all())
    if isinstance(value, (int, float)):
        return torch.tensor(float(value), dtype=torch.float64)
    if isinstance(value, tuple):
        raise CheckInputError(f"{label!r}: the value is a tuple (torch.autograd.grad returns one); unpack it: "
                              f"(dy_dx,) = torch.autograd.grad(y, x)")
    raise CheckInputError(f"{label!r}: checks.expect compares a tensor, a number, True/False or None, "
                          f"got {type(value).__name__}")


def _where(value: Any) -> tuple[str, str]:
    """The row's dtype and device: a tensor's own (an integer count's too), else the run's defaults."""
    if isinstance(value, torch.Tensor):
        return dtype_name(value.dtype), value.device.type
    return dtype_name(torch.get_default_dtype()), torch.get_default_device().type


def _code(frame: Any, statement: str) -> dict[str, str]:
    """The cell (or, in a long file, the statement) the check ran in."""
    lines = provenance.source_lines(frame.f_code.co_filename)
    return {"cell": "".join(lines) if 0 < len(lines) <= 60 else statement}


def _listed(value: torch.Tensor | bool | None) -> Any:
    return value.tolist() if isinstance(value, torch.Tensor) else value


def expect(value: Any, expected: Expected, label: str, *, at: Any = None,
           tolerance: Tolerance | str | None = None, how: str | None = None, expected_failure: str = "",
           inconclusive: str = "", weak: str = "") -> None:
    """Check value against the expectation written before it; the record is collected and reported."""
    if not isinstance(label, str) or not label.strip():
        raise CheckInputError("checks.expect needs a label saying what is checked, e.g. \"d/dx x·x = 2x at 3\"")
    for name, reason in (("expected_failure", expected_failure), ("inconclusive", inconclusive), ("weak", weak)):
        if not isinstance(reason, str):
            raise CheckInputError(f"{name}= is the reason, as text (\"why this is a demonstration\")")
    estimate = value if isinstance(value, Estimate) else None
    if isinstance(tolerance, str):
        if tolerance != "estimate" or estimate is None or estimate.error is None:
            raise CheckInputError(f"tolerance={tolerance!r}: only \"estimate\", for an Estimate with an error estimate "
                                  f"(checks.estimate_gradient(f, x, \"richardson\")), takes its allowance from a run")
        tolerance = estimate_tolerance(estimate)
    if estimate is not None:
        value, how = estimate.values, how or "numerical"
    frame = sys._getframe(1)
    statement, arguments, keywords = provenance.call_arguments(frame, "expect")
    written = arguments[1] if len(arguments) > 1 else repr(expected)
    history = [provenance.source_before(frame), *cells.history()[1:]]
    kind = how or provenance.value_kind(arguments[0] if arguments else "", value, _caller_objects(frame), history)
    wanted = expected_value(expected, at)
    if wanted is Ellipsis:
        # An exercise not filled in yet: a notebook's Run All goes on, and nothing is recorded as checked.
        print(f"Not checked yet: {label!r} — fill in the blank (...) of the expected value, then run this cell "
              f"again.")
        return
    observed = _observed(value, label)
    dtype, device = _where(value)
    allowed = tolerance_argument(tolerance, dtype) if dtype in ("float16", "bfloat16", "float32", "float64") \
        else default_tolerance("float64")
    verdict, message, fields = _judge(observed, wanted, allowed)
    cannot = ""
    if estimate is not None and verdict == "pass" and isinstance(wanted, torch.Tensor) and isinstance(observed, torch.Tensor):
        cannot = undiscriminating(wanted, observed, allowed)
        verdict, message = ("fail", f"{cannot}\n{message}") if cannot else (verdict, message)
    if verdict == "fail" and not cannot and isinstance(observed, torch.Tensor) and isinstance(wanted, torch.Tensor):
        inputs = _inputs(at) if at is not None else ()
        single = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], torch.Tensor) else None
        found = diagnosis(observed, wanted, allowed, kind, single)
        message += f"\n{DIAGNOSIS}{found}" if found else ""
    reason = expected_failure or inconclusive
    if reason:
        message += f"\n{DECLARED}{reason}"
    function, leaf = provenance.subject(arguments[0] if arguments else "", frame, history)
    given = _input_of(at) if at is not None else leaf.detach().to("cpu", torch.float64) if leaf is not None else None
    x = _listed(given) if given is not None else []
    record = Record(
        check=label, function=function or (arguments[0] if arguments else "value"), x=x,
        input_shape=list(observed.shape) if isinstance(observed, torch.Tensor) else [],
        dtype=dtype, device=device, how=kind,  # type: ignore[arg-type]
        gradient_formula=written + _where_evaluated(at, x, keywords.get("at", "")),
        derivative_source=label, analytical_gradient=_listed(wanted), observed_gradient=_listed(observed),
        executed=True, tolerance=allowed.to_dict(), verdict=verdict,  # type: ignore[arg-type]
        expected_failure=bool(expected_failure), message=message, device_name=device_name(device),
        code=_code(frame, statement), environment=environment(torch.initial_seed()),
        weak_reason=weak, **(estimate.summary() if estimate is not None else {}), **fields,
        **_inconclusive(inconclusive))
    cells.report(records.collect(record) or record)


def _where_evaluated(at: Any, x: Any, written: str) -> str:
    """' at x = 2' (one input, as the dtype holds it), ' at (model, X, Y)' (as written), '' (a value)."""
    if at is None:
        return ""
    if isinstance(at, torch.Tensor):
        return f" at x = {format(x, '.10g') if isinstance(x, float) else x}"
    return f" at {written or 'the inputs given'}"


def _inconclusive(reason: str) -> dict[str, bool]:
    """The declared-inconclusive flag, where the Record has one (records-28 adds expected_inconclusive)."""
    return {"expected_inconclusive": True} if reason and "expected_inconclusive" in Record.__dataclass_fields__ else {}


def _judge(observed: Any, wanted: Any, allowed: Tolerance) -> tuple[str, str, dict[str, Any]]:
    """(verdict, message, fields of the comparison); a non-finite expectation is inconclusive, never a pass.
    An expected tensor says what its allowance could catch, whatever was observed (None included)."""
    fields: dict[str, Any] = {}
    if isinstance(wanted, torch.Tensor):
        caught = detectable(wanted, allowed)
        fields = {"detectable_relative_error": caught.relative_error,
                  "detectable_index": None if caught.index is None else list(caught.index)}
    if observed is None or wanted is None or isinstance(observed, bool) or isinstance(wanted, bool):
        passed = observed == wanted if type(observed) is type(wanted) else False
        shown = lambda item: "None" if item is None else format_value(_listed(item))  # noqa: E731
        return ("pass" if passed else "fail",
                f"expected {shown(wanted)}, observed {shown(observed)}", fields)
    if bool(torch.isnan(wanted).any()):
        return "inconclusive", "the expected value is NaN (not a number): there is nothing to compare with", fields
    try:
        comparison = compare(observed, wanted, allowed)
    except ShapeMismatchError as error:
        return "fail", f"{error}: a gradient has the shape of its input", fields
    fields |= {"abs_error": comparison.abs_error, "rel_error": comparison.rel_error,
               "worst_index": list(comparison.worst_index), "mismatched": comparison.mismatched}
    return ("pass" if comparison.passed else "fail"), comparison.message, fields


class raises:  # noqa: N801  (used as `with checks.raises(RuntimeError):`, like pytest.raises)
    """with checks.raises(RuntimeError): the plain line that raises. Passes when it raises that error.

    The record keeps PyTorch's message verbatim and which statement raised, read off the code (the
    constructor, the forward, an in-place statement, backward(), autograd.grad), and the dtype and device of
    the tensors that statement read; no error, or another type, fails. match= is text the message must
    contain.
    """

    def __init__(self, error: type[BaseException], label: str = "", *, match: str = "") -> None:
        if not (isinstance(error, type) and issubclass(error, Exception)):
            raise CheckInputError(f"checks.raises needs an exception class (RuntimeError), got {error!r}")
        self.error, self.label, self.match = error, label, match
        self.message = ""

    def __enter__(self) -> raises:
        self._frame = sys._getframe(1)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if error is not None and not isinstance(error, Exception):
            return False  # KeyboardInterrupt and the like are not outcomes
        self.message = "" if error is None else str(error).strip()
        statement, how = (provenance.raised_kind(traceback, self.message, cells.history()[1:]) if error is not None
                          else ("", "unknown"))
        wanted = f"raises {self.error.__name__}" + (f" ({self.match!r})" if self.match else "")
        matched = isinstance(error, self.error) and self.match in self.message
        first_line = self.message.splitlines()[0] if self.message else ""
        message = (f"{RAISED}{type(error).__name__}: {first_line}\n{self.message}" if error is not None
                   else f"no error was raised; expected {self.error.__name__}")
        if error is not None and not matched:
            message += "\n" + "".join(traceback_module.format_exception(error)).strip()
        label = self.label or provenance.simple_name(statement) or f"the block {wanted}"
        dtype, device = provenance.read_where(statement, self._frame) or _where(None)
        record = Record(
            check=label, function=provenance.simple_name(statement), x=[], input_shape=[], dtype=dtype,
            device=device, how=how,  # type: ignore[arg-type]
            gradient_formula=wanted, derivative_source=label, analytical_gradient=None, observed_gradient=None,
            executed=True, verdict="pass" if matched else "fail", message=message, device_name=device_name(device),
            code=_code(self._frame, statement), environment=environment(torch.initial_seed()))
        cells.report(records.collect(record) or record)
        return True


def recorded(label: str, *, dtype: str | None = None, device: str = "cpu") -> Record:
    """The record of the check labelled label, in this dtype and on this device (the last one collected).

    dtype None: the dtype the check ran in on that device where it ran in one only (a value, or a raise,
    of a fixed dtype), else float32, the reader's run."""
    labelled = [record for record in records.collected() if record.check == label and record.device == device]
    if dtype is None:
        dtypes = {record.dtype for record in labelled}
        dtype = dtypes.pop() if len(dtypes) == 1 else "float32"
    found = [record for record in labelled if record.dtype == dtype]
    if not found:
        known = sorted({record.check for record in records.collected()})
        raise CheckInputError(f"no check {label!r} ran in {dtype} on {device}; checks so far: {known}")
    return found[-1]


def records_of(label: str) -> list[Record]:
    """Every row of the check labelled label: one per dtype and device it ran in (the last of each)."""
    found = [record for record in records.collected() if record.check == label]
    if not found:
        raise CheckInputError(f"no check {label!r} has run; checks so far: "
                              f"{sorted({record.check for record in records.collected()})}")
    return found
