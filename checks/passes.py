"""Gradient passes on one leaf: what backward() stores, what autograd.grad returns, pass after pass.

A script of Steps runs on a single leaf x (never a fresh leaf per pass: accumulation is the point).
Before anything runs, expect_passes() walks the script with the analytical derivative: backward() adds
f'(x) to x.grad (x.grad is None until the first one), torch.autograd.grad returns f'(x) and leaves x.grad
as it was, a reset sets x.grad to None (zeros for zero_grad(set_to_none=False)), and a pass that reuses a
graph an earlier pass walked without retain_graph=True raises PyTorch's "backward through the graph a
second time" error. (That prediction assumes f saves tensors for its backward, as any product does; the
graph of a plain sum saves none and can be walked again.)

Each pass becomes one Record about the derivative it asked for:
- backward(): how="stored", x.grad after the pass against the expected (accumulated) .grad;
- torch.autograd.grad: how="returned", the returned value against f'(x).
A pass predicted to raise is an expected failure: it asked for a derivative and got none. The verdict also
holds the rest of what was predicted (x.grad after an autograd.grad or a failed pass, x.grad right after a
reset, which error): any mismatch there fails the pass and is no longer an expected failure; the message
says what differed. The same rules give the records of the non-leaf, second-derivative and unused-input
checks below.
"""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import pandas as pd
import torch

from .compare import compare
from .devices import device_name, resolve_devices
from .display import format_value, records_html
from .dtypes import dtype_name, real_dtype, to_dtype
from .environment import environment
from .execute import Results
from .errors import CheckInputError
from .expectations import Expectation, Function, reference_input
from .observe import forward, leaf
from .plan import source_code
from .records import Provenance, Record, Value
from .tolerances import Tolerance, default_tolerance, tolerance_argument
from .validate import flag, function, integer, text

Action = Literal["backward", "grad"]
Reset = Literal[
    "x.grad = None",
    "module.zero_grad()",
    "optimizer.zero_grad()",
    "optimizer.zero_grad(set_to_none=False)",
]
RESETS: tuple[Reset, ...] = get_args(Reset)

# The start of the errors PyTorch raises; a captured error matches when its text contains this.
SECOND_BACKWARD = "Trying to backward through the graph a second time"
NO_GRAD_FN = "does not require grad and does not have a grad_fn"
UNUSED = "appears to not have been used in the graph"
NON_LEAF_WARNING = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"

ACTION_WORDS: dict[Action, str] = {"backward": "backward()", "grad": "torch.autograd.grad"}
WHERE_WORDS: dict[str, str] = {
    "stored": "stored: read from .grad, written there by backward()",
    "returned": "returned: handed back by torch.autograd.grad",
}


@dataclass(frozen=True)
class Step:
    """One pass of a script: an optional reset, a forward (fresh or the previous graph), then an action."""

    action: Action
    fresh_forward: bool = True
    reset: Reset | None = None
    retain_graph: bool = False

    def __post_init__(self) -> None:
        if self.action not in ACTION_WORDS:
            raise CheckInputError(f"action={self.action!r} is not a pass; use one of {tuple(ACTION_WORDS)}")
        if self.reset is not None and self.reset not in RESETS:
            raise CheckInputError(f"reset={self.reset!r} is not a reset; use None or one of {RESETS}")
        flag(self.fresh_forward, "fresh_forward")
        flag(self.retain_graph, "retain_graph")

    def describe(self) -> str:
        parts = [f"reset: {self.reset}"] if self.reset else []
        parts.append("fresh forward" if self.fresh_forward else "same graph, no new forward")
        parts.append(ACTION_WORDS[self.action] + (" (retain_graph=True)" if self.retain_graph else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class Expected:
    """A pass's analytical prediction: x.grad after it, what it returns, x.grad after its reset, its error."""

    grad: torch.Tensor | None
    returned: torch.Tensor | None
    after_reset: torch.Tensor | None
    error: str | None


@dataclass(frozen=True)
class Pass:
    """One executed pass: the step, what was expected, what torch did, and the record judging it."""

    number: int
    step: Step
    expected: Expected
    grad: torch.Tensor | None
    returned: torch.Tensor | None
    after_reset: torch.Tensor | None
    error: str | None
    record: Record

    def row(self) -> dict[str, str]:
        record = self.record
        row = {
            "pass": str(self.number),
            "what was done": self.step.describe(),
            "expected .grad": _text(self.expected.grad),
            "observed .grad": _text(self.grad),
            "expected returned": _text(self.expected.returned),
            "observed returned": _text(self.returned),
        }
        if self.step.reset:
            row["expected .grad after reset"] = _text(self.expected.after_reset)
            row["observed .grad after reset"] = _text(self.after_reset)
        row.update({
            "shape": _shape(record.input_shape),
            "dtype": record.dtype,
            "device": record.device,
            "error raised": _headline(self.error) if self.error else "none",
            "verdict": record.verdict + (" (expected failure)" if record.expected_failure else ""),
        })
        return row


class PassTable(Sequence[Pass]):
    """Executed passes; displays as the pass table followed by the records (embedded for the ledger)."""

    def __init__(self, passes: Sequence[Pass]) -> None:
        self._passes = tuple(passes)

    def __getitem__(self, index):  # type: ignore[override]
        return self._passes[index]

    def __len__(self) -> int:
        return len(self._passes)

    def __iter__(self) -> Iterator[Pass]:
        return iter(self._passes)

    @property
    def records(self) -> list[Record]:
        return [item.record for item in self._passes]

    def one(self, number: int, device: str = "cpu") -> Pass:
        """The pass with this number on this device."""
        found = [p for p in self._passes if p.number == number and p.record.device == device]
        if len(found) != 1:
            raise CheckInputError(f"{len(found)} passes numbered {number} on {device}; expected exactly one")
        return found[0]

    def frame(self) -> pd.DataFrame:
        rows = [item.row() for item in self._passes]
        columns = list(dict.fromkeys(key for row in rows for key in row))
        # The after-reset columns (only rows with a reset have them) go before shape; other rows read "no reset".
        if "expected .grad after reset" in columns:
            for key in ("expected .grad after reset", "observed .grad after reset"):
                columns.remove(key)
                columns.insert(columns.index("shape"), key)
        return pd.DataFrame(rows, columns=columns).fillna("no reset")

    def _repr_html_(self) -> str:
        return table_html(self.frame()) + records_html(self.records)


@dataclass(frozen=True)
class Table:
    """A chapter's own table (not a check table): shows as HTML without the index."""

    frame: pd.DataFrame

    def _repr_html_(self) -> str:
        return table_html(self.frame)


@dataclass(frozen=True)
class Quote:
    """A message PyTorch emitted, shown verbatim as a quotation that wraps anywhere.

    Its paths and URLs are single unbreakable words wider than a phone; wrapping them keeps the page
    from scrolling sideways without changing a character of the text.
    """

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (f'<blockquote class="checks-quote" style="overflow-wrap: anywhere;">'
                f"{html.escape(self.text)}</blockquote>")


def _headline(error: str) -> str:
    """The error's first clause: the whole text (under the table, in the record) would make the row a page tall."""
    first = re.split(r"(?<=[.])\s|\s\(", error, maxsplit=1)[0].rstrip(".")
    return first if first == error else first + " …"


def table_html(frame: pd.DataFrame) -> str:
    """A chapter's own table, told apart from the shared check tables by its class.

    It scrolls sideways inside its own box: its error texts make it wider than a phone, and the page
    itself must never scroll sideways (the style is inline so the table needs no stylesheet).
    """
    table = frame.to_html(index=False, classes="checks-passes", border=0, justify="left")
    return f'<div class="checks-passes-scroll" style="overflow-x: auto; max-width: 100%;">{table}</div>'


def expect_passes(expectation: Expectation, x: object, steps: Sequence[Step]) -> list[Expected]:
    """Walk the script with the analytical derivative, before anything runs (see the module docstring)."""
    if not isinstance(expectation, Expectation):
        raise CheckInputError("passes need an Expectation written first (checks.Expectation(...))")
    steps = _steps(steps)
    derivative = expectation.analytical(reference_input(x))
    grad: torch.Tensor | None = None
    graph: Literal["none", "live", "freed"] = "none"
    predicted = []
    for number, step in enumerate(steps, start=1):
        after_reset = None
        if step.reset:
            grad = torch.zeros_like(derivative) if step.reset.endswith("set_to_none=False)") else None
            after_reset = grad
        if step.fresh_forward:
            graph = "live"
        elif graph == "none":
            raise CheckInputError(f"pass {number} reuses the graph, but no forward has run before it")
        if graph == "freed":
            predicted.append(Expected(grad, None, after_reset, SECOND_BACKWARD))
            continue
        returned = None
        if step.action == "backward":
            grad = derivative.clone() if grad is None else grad + derivative
        else:
            returned = derivative
        graph = "live" if step.retain_graph else "freed"
        predicted.append(Expected(grad, returned, after_reset, None))
    return predicted


def run_passes(
    expectation: Expectation,
    x: object,
    steps: Sequence[Step],
    *,
    dtype: str = "float64",
    devices: str | Sequence[str] | None = None,
    name: str = "",
    tolerance: Tolerance | None = None,
    seed: int = 0,
) -> PassTable:
    """Run the script on one leaf per device (all available by default), one record per pass.

    name -- the script's name, put in every record's label: record ids come from the label, so two scripts
            on one page whose passes read alike (pass 2: fresh forward, backward()) need different names.
    """
    steps = _steps(steps)
    predicted = expect_passes(expectation, x, steps)
    reference = reference_input(x)
    dtype = dtype_name(real_dtype(dtype))
    tolerance = tolerance_argument(tolerance, dtype)
    if not isinstance(name, str):
        raise CheckInputError(f"name must be text (the script's name in every record's label), got {name!r}")
    integer(seed, "seed")
    prefix = f"{name}: " if name.strip() else ""
    passes = []
    for device in resolve_devices(devices if devices is None or not isinstance(devices, str) else [devices]):
        torch.manual_seed(seed)
        # A Parameter is a leaf like any other; holding it in a module and an optimizer lets a script
        # call their zero_grad(). lr=0: the optimizer is never stepped, only its zero_grad() is used.
        x_leaf = torch.nn.Parameter(leaf(reference.to(device=device, dtype=to_dtype(dtype))))
        module = torch.nn.Module()
        module.register_parameter("x", x_leaf)
        optimizer = torch.optim.SGD([x_leaf], lr=0.0)
        y: torch.Tensor | None = None
        for number, (step, expected) in enumerate(zip(steps, predicted), start=1):
            after_reset = None
            if step.reset:
                _reset(step.reset, x_leaf, module, optimizer)
                after_reset = _snapshot(x_leaf.grad)
            if step.fresh_forward:
                y = forward(expectation.f, x_leaf)
            assert y is not None  # expect_passes refused a script that reuses a graph before any forward
            returned, error = _act(step, y, x_leaf)
            grad = _snapshot(x_leaf.grad)
            how: Provenance = "stored" if step.action == "backward" else "returned"
            wanted = _asked_for(step, expected, expectation.analytical(reference))
            produced = None if error else (grad if how == "stored" else returned)
            state = [("x.grad", grad, expected.grad)] if how == "returned" or expected.error else []
            if step.reset:
                state.append(("x.grad after the reset", after_reset, expected.after_reset))
            problems = _state_problems(state, tolerance) + _error_problems(error, expected.error)
            label = f"{prefix}{expectation.function} at x={_short(reference)}, pass {number}: {step.describe()}"
            source = expectation.source + (
                "; backward() adds to x.grad, so the expected .grad is the sum of the passes since the last reset"
                if how == "stored" else ""
            )
            record = _record(label, expectation.function, expectation.gradient, source, reference, how, dtype,
                             device, wanted, produced, tolerance, expected.error is not None, problems, error,
                             seed, source_code(expectation))
            passes.append(Pass(number, step, expected, grad, returned, after_reset, error, record))
    return PassTable(passes)


def non_leaf_passes(
    outer: Expectation,
    inner: Function,
    inner_text: str,
    x: object,
    *,
    dtype: str = "float64",
    device: str = "cpu",
    tolerance: Tolerance | None = None,
    seed: int = 0,
) -> tuple[Results, str]:
    """h = inner(x) is not a leaf; loss = outer.f(h). h.grad after backward(), without and with retain_grad().

    Expected: dloss/dh = outer.df(h). Without retain_grad() PyTorch keeps no .grad for a non-leaf and warns
    when it is read (an expected failure: the derivative exists, .grad does not hold it); with retain_grad()
    it is stored. Returns the two records and the warning text captured from the first read.
    """
    _require_expectations(outer=outer)
    function(inner, "inner")
    text(inner_text, "inner_text")
    reference, name, tolerance = _common(x, dtype, device, tolerance, seed)
    with torch.no_grad():
        h_reference = reference_input(inner(reference.clone()))
    expected = outer.analytical(h_reference)
    records, first_warning = [], ""
    for retain in (False, True):
        torch.manual_seed(seed)
        h = inner(leaf(reference.to(device=device, dtype=to_dtype(name))))
        if not isinstance(h, torch.Tensor) or h.is_leaf:
            raise CheckInputError(f"h = {inner_text} must be a tensor computed from x (a non-leaf); it is not")
        if retain:
            h.retain_grad()
        forward(outer.f, h).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the warning is shown once per place by default; catch it here
            observed = _snapshot(h.grad)
        warning = " ".join(str(item.message) for item in caught)
        first_warning = first_warning or warning
        warned = NON_LEAF_WARNING in warning
        problems = [] if warned != retain else [
            "PyTorch warned although retain_grad() was called" if retain else "PyTorch did not warn"
        ]
        label = f"h.grad for {outer.function} with h = {inner_text} (not a leaf)" + (
            ", after h.retain_grad()" if retain else ", no retain_grad()"
        )
        records.append(_record(label, f"{outer.function}, h = {inner_text}", outer.gradient, outer.source,
                               h_reference, "stored", name, device, expected, observed, tolerance,
                               not retain, problems, warning or None, seed, {"h": inner_text}))
    return Results(records), first_warning


def second_derivative_passes(
    first: Expectation,
    second: Expectation,
    x: object,
    *,
    dtype: str = "float64",
    device: str = "cpu",
    tolerance: Tolerance | None = None,
    seed: int = 0,
) -> Results:
    """f'(x) returned with create_graph=True, then f''(x) from it; and f''(x) asked for without create_graph.

    first is f with f'; second is f' with f'' (second.f must agree with first.df: checked analytically).
    The last record is an expected failure: without create_graph the returned f'(x) has no graph, and
    PyTorch refuses to differentiate it.
    """
    _require_expectations(first=first, second=second)
    reference, name, tolerance = _common(x, dtype, device, tolerance, seed)
    first_expected = first.analytical(reference)
    second_expected = second.analytical(reference)
    with torch.no_grad():
        agreement = compare(torch.as_tensor(second.f(reference.clone())), first_expected, default_tolerance("float64"))
    if not agreement.passed:
        raise CheckInputError(
            f"second.f ({second.function}) must be the first derivative {first.gradient}; at "
            f"x={reference.tolist()} they differ: {agreement.message}"
        )
    records = []
    for create_graph in (True, False):
        torch.manual_seed(seed)
        x_leaf = leaf(reference.to(device=device, dtype=to_dtype(name)))
        (gradient,) = torch.autograd.grad(forward(first.f, x_leaf), x_leaf, create_graph=create_graph)
        if create_graph:
            problems = [] if gradient.requires_grad else ["the returned f'(x) does not require grad"]
            records.append(_record(
                f"f'(x) of {first.function} at x={_short(reference)}, create_graph=True", first.function,
                first.gradient, first.source, reference, "returned", name, device, first_expected,
                _snapshot(gradient), tolerance, False, problems, None, seed, source_code(first)))
        error, second_observed = None, None
        try:
            (second_observed,) = torch.autograd.grad(gradient, x_leaf)
        except RuntimeError as caught:
            error = str(caught)
        records.append(_record(
            f"f''(x) of {first.function} at x={_short(reference)}, from f'(x) returned with "
            f"create_graph={create_graph}", second.function, second.gradient, second.source, reference,
            "returned", name, device, second_expected, _snapshot(second_observed), tolerance,
            not create_graph, _error_problems(error, None if create_graph else NO_GRAD_FN), error, seed,
            source_code(second)))
    return Results(records)


def unused_input_passes(
    expectation: Expectation,
    x: object,
    u: object,
    *,
    dtype: str = "float64",
    device: str = "cpu",
    tolerance: Tolerance | None = None,
    seed: int = 0,
) -> Results:
    """autograd.grad of f(x) with respect to (x, u), where f does not use u.

    Expected: f'(x) for x, and ∂f/∂u = 0 (f does not depend on u). Asked plainly, PyTorch raises; with
    allow_unused=True it returns None for u (an expected failure: None is not the zero the maths gives);
    with materialize_grads=True it returns zeros.
    """
    _require_expectations(expectation=expectation)
    reference, name, tolerance = _common(x, dtype, device, tolerance, seed)
    u_reference = reference_input(u)
    expected_x = expectation.analytical(reference)
    expected_u = torch.zeros_like(u_reference)
    options = (
        ("plain", {}, UNUSED),
        ("allow_unused=True", {"allow_unused": True}, None),
        ("materialize_grads=True", {"materialize_grads": True}, None),
    )
    records = []
    for words, kwargs, error_expected in options:
        torch.manual_seed(seed)
        x_leaf = leaf(reference.to(device=device, dtype=to_dtype(name)))
        u_leaf = leaf(u_reference.to(device=device, dtype=to_dtype(name)))
        error, returned = None, (None, None)
        try:
            returned = torch.autograd.grad(forward(expectation.f, x_leaf), (x_leaf, u_leaf), **kwargs)
        except RuntimeError as caught:
            error = str(caught)
        problems = _error_problems(error, error_expected)
        # None for u is the documented answer of allow_unused alone: predicted, so an expected failure.
        for which, point, wanted, observed, failing in (
            ("x", reference, expected_x, returned[0], error_expected is not None),
            ("u", u_reference, expected_u, returned[1], error_expected is not None or words == "allow_unused=True"),
        ):
            records.append(_record(
                f"d/d{which} of {expectation.function} (u unused) at x={_short(reference)}, "
                f"u={_short(u_reference)}, {words}", f"{expectation.function} (u unused)",
                expectation.gradient if which == "x" else "0",
                expectation.source if which == "x" else "f does not use u, so ∂f/∂u = 0",
                point, "returned", name, device, wanted, _snapshot(observed), tolerance, failing, problems,
                error, seed, source_code(expectation)))
    return Results(records)


def provenance_frame(records: Sequence[Record]) -> pd.DataFrame:
    """Where each derivative came from: one row per record, stored or returned, with shape/dtype/device."""
    if not isinstance(records, Sequence) or not all(isinstance(record, Record) for record in records):
        raise CheckInputError(f"provenance needs a sequence of Records (e.g. the Results of a run), got {records!r:.80}")
    if not records:
        raise CheckInputError("provenance of no records: there is nothing to show")
    return pd.DataFrame([
        {
            "check": record.check,
            "where the derivative came from": WHERE_WORDS.get(record.how, record.how),
            "expected": format_value(record.analytical_gradient),
            "observed": format_value(record.observed_gradient),
            "shape": _shape(record.input_shape),
            "dtype": record.dtype,
            "device": record.device,
            "verdict": record.verdict + (" (expected failure)" if record.expected_failure else ""),
        }
        for record in records
    ])


def provenance_table(records: Sequence[Record]) -> Table:
    """provenance_frame for the page. Its records are shown (and embedded) where they ran, not again here."""
    return Table(provenance_frame(records))


def plain(value: torch.Tensor | Value | None) -> float | str:
    """A one-element observed value as a float to glue into prose, or "none" where there was none."""
    if value is None:
        return "none"
    tensor = torch.as_tensor(value, dtype=torch.float64)
    if tensor.numel() != 1:
        raise CheckInputError(f"plain() glues one number; this value has shape {tuple(tensor.shape)}")
    return float(tensor.item())


def _require_expectations(**expectations: object) -> None:
    for argument, value in expectations.items():
        if not isinstance(value, Expectation):
            raise CheckInputError(f"{argument} must be an Expectation written first (checks.Expectation(...)), "
                                  f"got {type(value).__name__}")


def _common(x: object, dtype: str, device: str, tolerance: object, seed: object) -> tuple[torch.Tensor, str, Tolerance]:
    """The arguments every single-device check here shares: x, a real dtype, a present device, tolerance, seed."""
    reference = reference_input(x)
    name = dtype_name(real_dtype(dtype))
    resolve_devices([device] if isinstance(device, str) else device, source="device")
    integer(seed, "seed")
    return reference, name, tolerance_argument(tolerance, name)


def _steps(steps: Sequence[Step]) -> tuple[Step, ...]:
    steps = tuple(steps) if isinstance(steps, Sequence) and not isinstance(steps, str) else ()
    if not steps or not all(isinstance(step, Step) for step in steps):
        raise CheckInputError("a script needs at least one pass, each a checks.passes.Step(...)")
    return steps


def _reset(reset: Reset, x: torch.nn.Parameter, module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    if reset == "x.grad = None":
        x.grad = None
    elif reset == "module.zero_grad()":
        module.zero_grad()
    elif reset == "optimizer.zero_grad()":
        optimizer.zero_grad()
    else:
        optimizer.zero_grad(set_to_none=False)


def _act(step: Step, y: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor | None, str | None]:
    """Run the pass's action; PyTorch's RuntimeError is an observed outcome, returned as its text."""
    try:
        if step.action == "backward":
            y.backward(retain_graph=step.retain_graph)
            return None, None
        (returned,) = torch.autograd.grad(y, x, retain_graph=step.retain_graph)
        return _snapshot(returned), None
    except RuntimeError as error:
        return None, str(error)


def _asked_for(step: Step, expected: Expected, derivative: torch.Tensor) -> torch.Tensor:
    """What the pass would produce if it ran: the accumulated .grad (backward) or f'(x) (autograd.grad)."""
    if step.action == "grad":
        return derivative
    if expected.error is None:
        assert expected.grad is not None  # a backward that runs always leaves x.grad set
        return expected.grad
    return derivative if expected.grad is None else expected.grad + derivative


def _state_problems(
    state: Sequence[tuple[str, torch.Tensor | None, torch.Tensor | None]], tolerance: Tolerance
) -> list[str]:
    problems = []
    for what, observed, expected in state:
        if observed is None and expected is None:
            continue
        if observed is None or expected is None or not compare(observed, expected, tolerance).passed:
            problems.append(f"{what} is {_text(observed)}, expected {_text(expected)}")
    return problems


def _error_problems(error: str | None, expected: str | None) -> list[str]:
    if expected is None:
        return [] if error is None else [f"unexpected error: {error}"]
    if error is None:
        return [f"expected an error containing {expected!r}; none was raised"]
    return [] if expected in error else [f"expected an error containing {expected!r}, got: {error}"]


def _record(
    check: str, function: str, formula: str, source: str, point: torch.Tensor, how: Provenance, dtype: str,
    device: str, wanted: torch.Tensor, observed: torch.Tensor | None, tolerance: Tolerance,
    expected_failure: bool, problems: list[str], outcome: str | None, seed: int, code: dict[str, str],
) -> Record:
    """One executed record: observed None (nothing produced) fails; other mismatches are listed in message."""
    errors: dict[str, object] = {}
    if observed is None:
        passed, comparison = False, "no derivative was produced"
    else:
        result = compare(observed, wanted, tolerance)
        passed, comparison = result.passed, result.message
        errors = {"abs_error": result.abs_error, "rel_error": result.rel_error,
                  "worst_index": list(result.worst_index), "mismatched": result.mismatched}
    parts = [f"observed: {outcome}" if outcome else "", comparison, *problems]
    return Record(
        check=check,
        function=function,
        x=point.tolist(),
        input_shape=list(point.shape),
        dtype=dtype,
        device=device,
        how=how,
        gradient_formula=formula,
        derivative_source=source,
        analytical_gradient=wanted.tolist(),
        observed_gradient=None if observed is None else observed.cpu().to(torch.float64).tolist(),
        executed=True,
        tolerance=tolerance.to_dict(),
        verdict="pass" if passed and not problems else "fail",
        # A predicted failure stops being "expected" once anything else differs from the prediction.
        expected_failure=expected_failure and not problems,
        message="\n".join(part for part in parts if part),
        device_name=device_name(device),
        code=code,
        environment=environment(seed),
        **errors,  # type: ignore[arg-type]
    )


def _snapshot(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().clone()


def _text(tensor: torch.Tensor | None) -> str:
    return "none" if tensor is None else format_value(tensor.detach().cpu().to(torch.float64).tolist())


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _short(x: torch.Tensor) -> str:
    values = x.tolist()
    return f"{values:g}" if isinstance(values, float) else str(values)


__all__ = [
    "Expected",
    "Pass",
    "PassTable",
    "Quote",
    "Step",
    "Table",
    "expect_passes",
    "non_leaf_passes",
    "plain",
    "provenance_frame",
    "provenance_table",
    "run_passes",
    "second_derivative_passes",
    "unused_input_passes",
]
