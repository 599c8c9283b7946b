"""The checker library's reports as records: every check_jacobian, assert_gradients, check_module and
assert_module_gradients call a reader's code makes reaches the ledger, without wrapping the call.

checks.core knows nothing of the book: it hands each finished CheckReport to the observers of
checks.core.observers. Importing checks.teaching subscribes observe() there, so a chapter's kernel (which
imports the teaching API) turns each report into one Record and hands it to records.collect:

- what was checked: the call as the reader wrote it (its source, read from the calling frame), the function
  (the call's first argument), the inputs' names and shapes (x), dtype and device;
- the outcome, inconclusive included, as the report's own (pass / fail / inconclusive);
- the element that decided it (the worst mismatch, else an element it could not judge, else the element
  nearest its allowance): expected (the numerical estimate), observed (autograd), their difference and the
  allowance there; the detectable error; the report's one-line summary and, unless it passed, its message.

Calls the teaching side makes itself (the mutant suite, say) are not recorded here: their callers record
them in their own words. A chapter that shows a failing or inconclusive library call on purpose declares
it first, in a removed cell, by a piece of the call's text or of the function's name:
declare("checks.check_jacobian(torch.relu, x)", "inconclusive"), declare("SwishBuggy.apply", "fail"); an
undeclared one is a problem of the build, as an undeclared failure of any check is. A call made through a
variable (a helper's `function`) is named by what the variable holds too ("function = SwishBuggy.apply").
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import linecache
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from ..core.errors import CheckInputError
from ..core.observers import observers
from ..core.outcome import Outcome
from .environment import device_name, environment
from .records import OUTCOMES, Provenance, Record, collect

PACKAGE = Path(__file__).resolve().parent.parent  # checks/
CORE = PACKAGE / "core"
# The library's public calls, by the name a reader writes.
CALLS = ("check_jacobian", "assert_gradients", "check_module", "assert_module_gradients")


@dataclass(frozen=True)
class Declaration:
    """What a chapter declared about some library calls (declare())."""

    outcome: Outcome = "pass"
    weak: str = ""
    measurement: str = ""


# Declarations, by a piece of the call's text or of the function's name, whitespace removed (declare()).
_declared: dict[str, Declaration] = {}
# How many reports each call site has made in this process: a call in a loop gets one record per report.
_calls: dict[str, int] = {}


def declare(call: str, outcome: Outcome = "pass", *, weak: str = "", measurement: str = "") -> None:
    """Declare what the chapter's library calls whose text (or function's name) contains `call` (whitespace
    ignored) are meant to show: their outcome (a failure or an inconclusive shown on purpose: the record's
    expected_failure or expected_inconclusive), why a weak pass is acceptable (weak), or that each outcome is a
    finding of a comparison (measurement). The latest declaration matching a call counts; declare(call)
    alone withdraws one."""
    if not isinstance(call, str) or not _squeezed(call):
        raise CheckInputError(f"declare() names library calls by a piece of their text, got {call!r}")
    if outcome not in OUTCOMES:
        raise CheckInputError(f"declare(..., outcome) takes one of {', '.join(OUTCOMES)}, got {outcome!r}")
    for name, value in (("weak", weak), ("measurement", measurement)):
        if not isinstance(value, str):
            raise CheckInputError(f"declare(..., {name}=...) is the reason, as text; got {value!r}")
    _declared.pop(_squeezed(call), None)  # re-declared: it becomes the latest
    _declared[_squeezed(call)] = Declaration(outcome, weak, measurement)


def observe(report: Any) -> None:
    """The observer subscribed to checks.core.observers: one collected Record per report of a reader's call."""
    caller, checker = _caller()
    if caller is None:
        return
    call = _call_text(caller) or f"{checker}(...)"
    collect(record_of(report, call, checker, _function(call, caller)))


def _declared_for(call: str, function: str) -> Declaration:
    """The latest declaration whose text is in the call's or the function's."""
    said = [declared for text, declared in _declared.items()
            if text in _squeezed(call) or text in _squeezed(function)]
    return said[-1] if said else Declaration()


def _label(call: str) -> str:
    """The call as one line; a call site run again (a loop) numbers its later calls."""
    squeezed = _squeezed(call)
    count = _calls[squeezed] = _calls.get(squeezed, 0) + 1
    return " ".join(call.split()) + (f" (call {count})" if count > 1 else "")


def record_of(report: Any, call: str, checker: str = "check_jacobian", function: str = "") -> Record:
    """The Record of a CheckReport, made by `call` (its source text) through `checker`, of `function` (by
    default the call's first argument as written)."""
    function = function or _function(call) or report.call
    wanted = _declared_for(call, function)
    label = _label(call)
    i, j = _decisive(report)
    expected, observed = float(report.numerical[i, j]), float(report.autograd[i, j])
    difference = abs(observed - expected)
    mismatched = int(report.mismatch.sum())
    message = report.summary() if report.outcome == "pass" else report.message()
    return Record(
        check=label,
        function=function,
        x={"arguments": [{"name": a.name, "shape": list(a.shape)} for a in report.arguments]},
        input_shape=list(report.input_shape),
        dtype=report.dtype,
        device=report.device,
        how=_how(report),
        gradient_formula="numerical: check_jacobian's adaptive Richardson estimate of the Jacobian",
        derivative_source="finite differences, each element with its own error estimate",
        analytical_gradient=expected,
        observed_gradient=observed,
        executed=True,
        abs_error=difference,
        rel_error=difference / abs(expected) if expected else None,
        worst_index=[i, j],
        mismatched=mismatched,
        tolerance=_tolerance(report, i, j),
        verdict=report.outcome,
        expected_failure=wanted.outcome == "fail",
        expected_inconclusive=wanted.outcome == "inconclusive",
        weak_reason=wanted.weak,
        measurement=wanted.measurement,
        message=message,
        device_name=device_name(report.device),
        code={"call": call},
        environment=environment(report.seed or 0),
        detectable_relative_error=report.detectable_relative_error,
        detectable_index=_detectable_index(report),
        checker=checker,
    )


def _caller() -> tuple[FrameType | None, str]:
    """The frame of the reader's code that called the library, and the library call it made; (None, "")
    when the teaching or Sphinx side of the package made the call (it records its own)."""
    frame, checker = inspect.currentframe(), "check_jacobian"
    while frame is not None and _inside(frame, PACKAGE):
        if _inside(frame, CORE):
            if frame.f_code.co_name in CALLS:
                checker = frame.f_code.co_name  # the outermost public call wins: assert_gradients, not check_jacobian
        elif frame.f_code.co_filename != __file__:
            return None, ""
        frame = frame.f_back
    return frame, checker


def watch_gradcheck() -> None:
    """Record each torch.autograd.gradcheck and gradgradcheck call a chapter makes, as the library's calls are:
    its outcome (pass, or fail: it raised GradcheckError or returned False), options and message. Only a
    chapter's kernel asks for this (checks/sphinx/kernel_startup.py): it replaces the two functions in
    torch.autograd by recording ones that call them unchanged. A call the teaching side makes, or one inside
    a script checks.run_script runs (its see.raises records it), is left alone."""
    for name in WATCHED:
        original = getattr(torch.autograd, name)
        if not getattr(original, "_checks_watched", False):
            setattr(torch.autograd, name, _watched(original, name))


WATCHED = ("gradcheck", "gradgradcheck")


def _watched(original: Any, name: str) -> Any:
    from torch.autograd.gradcheck import GradcheckError

    @functools.wraps(original)
    def watched(func: Any, inputs: Any, *args: Any, **options: Any) -> Any:
        caller = _gradcheck_caller()
        if caller is None:
            return original(func, inputs, *args, **options)
        call = _call_text(caller) or f"torch.autograd.{name}(...)"
        function = _function(call, caller)
        try:
            result = original(func, inputs, *args, **options)
        except GradcheckError as error:
            collect(_gradcheck_record(name, call, function, inputs, options, "fail", str(error).strip()))
            raise
        collect(_gradcheck_record(name, call, function, inputs, options, "pass" if result else "fail",
                                  f"{name} returned {result}"))
        return result

    watched._checks_watched = True  # type: ignore[attr-defined]
    return watched


def _gradcheck_caller() -> FrameType | None:
    """The reader's frame that called gradcheck; None when the package, or a script it runs, called it."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    caller = frame
    while frame is not None:
        if _inside(frame, PACKAGE):
            return None
        frame = frame.f_back
    return caller


def _gradcheck_module() -> Any:
    # The module, whose functions are the originals (torch.autograd.gradcheck is the watched function).
    return importlib.import_module("torch.autograd.gradcheck")


def _gradcheck_record(name: str, call: str, function: str, inputs: Any, options: dict[str, Any], verdict: Outcome,
                      message: str) -> Record:
    tensors = [inputs] if isinstance(inputs, torch.Tensor) else [t for t in inputs if isinstance(t, torch.Tensor)]
    first = next((t for t in tensors if t.dtype.is_floating_point or t.dtype.is_complex), None)
    defaults = {key: value.default for key, value in inspect.signature(getattr(_gradcheck_module(), name))
                .parameters.items() if key in ("eps", "atol", "rtol")}
    used = {**defaults, **{key: options[key] for key in defaults if key in options}}
    wanted = _declared_for(call, function)
    return Record(
        check=_label(call),
        function=function,
        x={"arguments": [{"name": f"input {k}", "shape": list(t.shape)} for k, t in enumerate(tensors)]},
        input_shape=list(first.shape) if first is not None else [],
        dtype=str(first.dtype).removeprefix("torch.") if first is not None else "",
        device=first.device.type if first is not None else "cpu",
        how="gradcheck",
        gradient_formula=f"numerical: {name}'s central differences at eps={used['eps']:g}",
        derivative_source="finite differences (torch.autograd.gradcheck)",
        analytical_gradient=None,
        executed=True,
        tolerance={"rtol": float(used["rtol"]), "atol": float(used["atol"]),
                   "reason": f"{name}'s " + ("given" if {"atol", "rtol"} & set(options) else "default")
                             + " tolerance"},
        verdict=verdict,
        expected_failure=wanted.outcome == "fail",
        expected_inconclusive=wanted.outcome == "inconclusive",
        weak_reason=wanted.weak,
        measurement=wanted.measurement,
        message=message,
        device_name=device_name(first.device.type if first is not None else "cpu"),
        code={"call": call},
        environment=environment(0),
        checker=name,
    )


def _inside(frame: FrameType, folder: Path) -> bool:
    try:
        return Path(frame.f_code.co_filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _call_text(frame: FrameType) -> str:
    """The source of the call the frame is making (a cell's too: IPython keeps cells in linecache)."""
    position = inspect.getframeinfo(frame, context=0).positions
    lines = linecache.getlines(frame.f_code.co_filename)
    if position is None or position.lineno is None or not lines:
        return ""
    first, last = position.lineno - 1, (position.end_lineno or position.lineno) - 1
    chosen = lines[first:last + 1]
    if not chosen:
        return ""
    if position.col_offset is not None and position.end_col_offset is not None:
        # Column offsets count UTF-8 bytes.
        chosen = [line.encode() for line in chosen]
        chosen[-1] = chosen[-1][:position.end_col_offset]
        chosen[0] = chosen[0][position.col_offset:]
        chosen = [line.decode(errors="replace") for line in chosen]
    head, *rest = chosen
    return (head + textwrap.dedent("".join(rest))).strip() if rest else head.strip()


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _function(call: str, frame: FrameType | None = None) -> str:
    """The call's first argument as written: the function (or module) checked; with the calling frame, a
    variable is named by what it holds too ("function = SwishBuggy.apply")."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return ""
    if not (isinstance(node, ast.Call) and node.args):
        return ""
    first = node.args[0]
    text = ast.get_source_segment(call, first) or ""
    if frame is None or not isinstance(first, ast.Name):  # Swish.apply, torch.sin: named as written
        return text
    value = frame.f_locals.get(first.id, frame.f_globals.get(first.id))
    held = _name_of(value)
    return f"{text} = {held}" if held and held != text and not text.endswith(held) else text


def _name_of(value: object) -> str:
    """A function's natural name: Swish.apply for a custom Function's apply, a module's class, a def's name."""
    owner = getattr(value, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function):
        return f"{owner.__name__}.{value.__name__}"
    if isinstance(value, torch.nn.Module):
        return type(value).__name__
    name = getattr(value, "__qualname__", "")
    return "" if "<" in name else name


def _how(report: Any) -> Provenance:
    """How autograd's Jacobian was produced: torch.autograd.grad (reverse), forward mode, or a backward
    differentiated again (order 2)."""
    if report.order == 2:
        return "create_graph"
    return "returned" if report.mode == "reverse" else "jacfwd"


def _decisive(report: Any) -> tuple[int, int]:
    """The element that decides the outcome: the worst mismatch; else one that could not be judged; else the
    one nearest its allowance."""
    allowed = report.allowed if report.tolerance is None else report.given_allowed
    ratio = (report.difference / allowed).nan_to_num(nan=math.inf, posinf=math.inf)
    for mask in (report.mismatch, report.inconclusive):
        if bool(mask.any()):
            chosen = ratio.masked_fill(~mask, -1.0)
            break
    else:
        chosen = ratio
    index = int(chosen.reshape(-1).argmax())
    return divmod(index, report.autograd.shape[1])


def _tolerance(report: Any, i: int, j: int) -> dict[str, Any]:
    """What the decisive element was allowed: the caller's atol and rtol, or the estimate's own allowance."""
    if report.tolerance is not None:
        return {**report.tolerance.to_dict(), "reason": "given to the library call (atol, rtol)"}
    return {"rtol": 0.0, "atol": 0.0, "element_atol": [float(report.allowed[i, j])],
            "reason": f"the estimate's own allowance at this element: {report.safety:g} × its uncertainty (error "
                      f"estimate and f's rounding over the step) plus autograd's rounding"}


def _detectable_index(report: Any) -> list[int] | None:
    judged = (report.mismatch | report.agreed) & ~report.detectable.isnan()
    if not bool(judged.any()):
        return None
    index = int(report.detectable.masked_fill(~judged, -math.inf).reshape(-1).argmax())
    return list(divmod(index, report.autograd.shape[1]))


def subscribe() -> None:
    """Record every library report from now on in this process (once, however often called)."""
    if observe not in observers:
        observers.append(observe)
