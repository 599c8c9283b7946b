"""Witnessing the reader's own PyTorch: run their code per dtype and device, compare, record.

checks never replaces the code a reader sees. Two forms:

- gradient functions, run by checks.witness(expectation, x, code...) or checks.plan(...).run(code...):
  each function takes a fresh leaf x (torch.tensor(x, dtype=..., device=..., requires_grad=True)) and
  returns the gradient it observed, e.g. x.grad after y.backward(), or what torch.autograd.grad returned;
- scripts, run by checks.run_script(script, ...): several passes of the reader's code on ONE leaf (or a
  module), each value handed to see(value, expected=..., what=...) with the expected value written beside
  it from the analytical derivative; an error PyTorch raises inside `with see.raises(...)` is an outcome.

How a value was observed (its provenance) is inferred where that is safe: the value *is* the .grad of x,
or of another tensor the code uses, or of a parameter of a module (or optimizer) the code uses
(model.weight.grad) -> "stored"; the function's source calls torch.autograd.grad -> "returned"
("create_graph" with create_graph=True), torch.func.jacrev / jacfwd / vjp / jvp / hessian -> those;
anything else must say how=.
Every record keeps the code that ran (the function or script as written, and the expectation's f and df).
"""

from __future__ import annotations

import inspect
import io
import re
import sys
import tokenize
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import torch

from ..core.compare import compare, detectable
from ..core.devices import resolve_devices
from ..core.dtypes import to_dtype
from ..core.errors import CheckInputError, ShapeMismatchError
from ..core.tolerances import Tolerance
from ..core.validate import flag, integer, text
from .display import RAISED_PREFIX, format_value
from .environment import device_name, environment
from .expectations import Expectation, reference_input
from .planning import PlannedCheck, planned_dtypes, tolerance_for, weak_reasons
from .records import PROVENANCES, Provenance, Record, collect
from .results import Results
from .source import source_code, source_of
from .tables import ScriptResults

Code = Callable[[torch.Tensor], object]

# A call in the code's source that says how its value was produced; checked in this order.
SOURCE_MARKERS: tuple[tuple[str, Provenance], ...] = (
    (r"\bhessian\s*\(", "hessian"),
    (r"\bjacfwd\s*\(", "jacfwd"),
    (r"\bjacrev\s*\(", "jacrev"),
    (r"\bjvp\s*\(", "jvp"),
    (r"\bvjp\s*\(", "vjp"),
    (r"\bgradcheck\s*\(", "gradcheck"),
    (r"\bautograd\.grad\s*\(", "returned"),
)


def run_code(planned: Sequence[PlannedCheck], code: Sequence[Code | tuple[Code, Provenance]], *,
             how: Provenance | None = None) -> Results:
    """Each function on each (device, dtype) of the plan; the tolerance is the plan's for that row's how."""
    functions = [function_and_how(item, how) for item in code]
    rows: dict[tuple[str, str], list[PlannedCheck]] = {}
    for check in planned:
        rows.setdefault((check.device, check.dtype), []).append(check)
    records = []
    for checks_here in rows.values():
        for function, explicit in functions:
            records.append(_witness_one(checks_here, function, explicit))
    return Results(records)


def function_and_how(item: object, how: Provenance | None) -> tuple[Code, Provenance | None]:
    function, explicit = item if isinstance(item, tuple) and len(item) == 2 else (item, how)
    if not callable(function):
        raise CheckInputError(f"{function!r} is not a function: pass your code as def name(x): ... return gradient")
    if explicit is not None and explicit not in PROVENANCES:
        raise CheckInputError(f"how={explicit!r} is not a way of observing a gradient; use one of {PROVENANCES}")
    return function, explicit


def _witness_one(candidates: list[PlannedCheck], function: Code, explicit: Provenance | None) -> Record:
    first = candidates[0]
    name = _name(function)
    torch.manual_seed(first.seed)
    x = first.x.to(device=first.device, dtype=to_dtype(first.dtype)).detach().clone().requires_grad_(True)
    observed = function(x)
    source = source_of(function)
    how = explicit or infer_how(name, source, observed, x, uses=_names_used(function))
    value = _gradient_value(name, observed, x)
    check = next((item for item in candidates if item.how == how), first)
    record = replace(check.record(), check=f"{check.label}, by {name}(x)", how=how,
                     code={name: source, **source_code(check.expectation)}, method="", id="")
    return _judged(record, value, check.expected, check.tolerance, check.seed,
                   missing=f"{name}(x) returned None: no gradient was produced"
                   + (" (x.grad is None: did it call backward()?)" if how == "stored" else ""))


def infer_how(name: str, source: str, observed: object, x: torch.Tensor, uses: Sequence[object] = ()) -> Provenance:
    """How the code produced its value, from what it returned and the calls in its source (see the module doc).

    uses -- the objects the code names besides x (its globals and closure): a value that is the .grad of
    one of them, or of a parameter of a module or optimizer among them, is stored too.
    """
    if observed is not None and (observed is x.grad or is_stored_grad(observed, uses)):
        return "stored"
    calls = _code_only(source)
    found = [how for pattern, how in SOURCE_MARKERS if re.search(pattern, calls)]
    if len(found) == 1 or (found and found[0] == "hessian"):
        if found[0] == "returned" and re.search(r"create_graph\s*=\s*True", calls):
            return "create_graph"
        return found[0]
    if not found and observed is None and x.grad is None and re.search(r"\.backward\s*\(", calls):
        return "stored"  # it called backward() and returned x.grad, which stayed None
    why = (f"its source calls {', '.join(found)}" if found else
           "it neither returns x.grad nor calls autograd.grad, jacrev, jacfwd, vjp, jvp or hessian")
    raise CheckInputError(
        f"cannot tell how {name}(x) observed its gradient: {why}; name it, e.g. run(({name}, 'returned')) "
        f"or how='numerical' (one of {PROVENANCES})"
    )


def is_stored_grad(value: object, objects: Sequence[object]) -> bool:
    """Whether value *is* the .grad that backward() stored on one of objects: a tensor that keeps its .grad (a
    leaf, or one that called retain_grad()), a parameter of an nn.Module, or a tensor an optimizer updates.

    Identity, not equality: a tensor equal to a gradient proves nothing about where it came from.
    """
    if not isinstance(value, torch.Tensor):
        return False
    for item in objects:
        if isinstance(item, torch.Tensor):
            tensors = [item]
        elif isinstance(item, torch.nn.Module):
            tensors = list(item.parameters())
        elif isinstance(item, torch.optim.Optimizer):
            tensors = [tensor for group in item.param_groups for tensor in group["params"]]
        else:
            continue
        # .grad of a non-leaf that does not retain it is None, and reading it warns: skip those.
        if any((tensor.is_leaf or tensor.retains_grad) and value is tensor.grad for tensor in tensors):
            return True
    return False


def _names_used(function: Callable[..., object]) -> list[object]:
    """The objects a function names from outside itself: the globals its code uses, and its closure."""
    code = getattr(function, "__code__", None)
    if code is None:
        return []
    found = [getattr(function, "__globals__", {}).get(name) for name in code.co_names]
    found += [cell.cell_contents for cell in getattr(function, "__closure__", None) or () if _filled(cell)]
    return found


def _filled(cell: object) -> bool:
    try:
        cell.cell_contents  # type: ignore[attr-defined]
    except ValueError:  # a closure variable not assigned yet
        return False
    return True


def _caller_objects(frame: object) -> list[object]:
    """What the code calling see(...) can name: its local variables and the globals its code uses."""
    code = frame.f_code  # type: ignore[attr-defined]
    return [*frame.f_locals.values(), *(frame.f_globals.get(name) for name in code.co_names)]  # type: ignore[attr-defined]


def _code_only(source: str) -> str:
    """The source without comments and strings, so '# unlike autograd.grad(...)' says nothing about how."""
    kept = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in (tokenize.COMMENT, tokenize.STRING):
                kept.append(token.string)
    except (tokenize.TokenError, IndentationError):
        return source
    return " ".join(kept).replace(" . ", ".").replace(" (", "(")


def _gradient_value(name: str, observed: object, x: torch.Tensor) -> torch.Tensor | None:
    """The returned gradient as a detached tensor; None stays None (an outcome, recorded as a failure)."""
    if observed is None:
        return None
    if isinstance(observed, tuple) and all(isinstance(item, torch.Tensor) for item in observed):
        raise CheckInputError(
            f"{name}(x) returned a tuple of {len(observed)} tensor(s), not one gradient: torch.autograd.grad "
            f"returns a tuple; unpack it, e.g. (dy_dx,) = torch.autograd.grad(y, x)"
        )
    if not isinstance(observed, torch.Tensor):
        raise CheckInputError(
            f"{name}(x) returned {type(observed).__name__}, not a tensor: return the gradient itself "
            f"(x.grad, or the tensor torch.autograd.grad gives)"
        )
    if observed.shape != x.shape:
        raise ShapeMismatchError(
            f"{name}(x) returned a tensor of shape {tuple(observed.shape)}, but x has shape {tuple(x.shape)}: "
            f"a gradient has the shape of its input"
        )
    return observed.detach().clone()


def _judged(record: Record, observed: torch.Tensor | None, expected: torch.Tensor | None, tolerance: Tolerance,
            seed: int, *, missing: str, problems: Sequence[str] = (), notes: Sequence[str] = ()) -> Record:
    """The executed record: compared as torch.testing would; a missing value where one was expected fails.

    What the allowance could catch is recorded wherever a value was expected, compared or not.
    """
    fields: dict[str, object] = {}
    if expected is not None:
        caught = detectable(expected, tolerance)
        fields = {"detectable_relative_error": caught.relative_error,
                  "detectable_index": None if caught.index is None else list(caught.index)}
    if expected is None or observed is None:
        passed = observed is None and expected is None
        message = "none, as expected" if passed else (missing if observed is None else
                                                       f"expected none, observed {observed.tolist()}")
    else:
        comparison = compare(observed, expected, tolerance)
        passed, message = comparison.passed, comparison.message
        fields |= {"abs_error": comparison.abs_error, "rel_error": comparison.rel_error,
                   "worst_index": list(comparison.worst_index), "mismatched": comparison.mismatched}
    return collect(replace(
        record,
        analytical_gradient=None if expected is None else expected.tolist(),
        observed_gradient=None if observed is None else observed.cpu().to(torch.float64).tolist(),
        executed=True,
        verdict="pass" if passed and not problems else "fail",
        message="\n".join([message, *problems, *notes]),
        tolerance=tolerance.to_dict(),
        device_name=device_name(record.device),
        environment=environment(seed),
        **fields,  # type: ignore[arg-type]
    ))


def _name(function: Callable[..., object]) -> str:
    return getattr(function, "__name__", None) or type(function).__name__


# Scripts: passes on one leaf --------------------------------------------------------------------------------

# How a captured error or warning is introduced in a record's message (read back by captured()).
RAISED = RAISED_PREFIX
WARNED = "PyTorch warned "


class See:
    """The observer a script is handed: see(value, expected=..., what=...) records one observed value.

    expected -- the value the reader worked out beside the code from the analytical derivative (for
                backward() passes, the accumulated .grad); None means "no value" (x.grad still None).
    how      -- inferred as "stored" when value is the .grad of the script's x, of a tensor the calling code
                uses, or of a parameter of a module (or optimizer) it uses (model.weight.grad); otherwise name it.
    """

    def __init__(self, script: Callable[..., object], expectation: Expectation | None, function: str, source: str,
                 point: torch.Tensor, x: torch.Tensor | None, dtype: str, device: str, tolerance: Tolerance,
                 name: str, seed: int, weak_reason: str = "") -> None:
        self._script, self._expectation, self._function, self._source = script, expectation, function, source
        self._point, self._x, self.dtype, self.device = point, x, dtype, device
        self._tolerance, self._name, self._seed, self._weak_reason = tolerance, name, seed, weak_reason
        self.records: list[Record] = []

    def __call__(self, value: torch.Tensor | None, *, expected: object, what: str, how: Provenance | None = None,
                 expectation: Expectation | None = None, expected_failure: bool = False,
                 caught: Sequence[warnings.WarningMessage] = (), gradient: str = "") -> Record:
        """Record one observed value against the expected one.

        caught   -- warnings the reader captured while reading it (warnings.catch_warnings(record=True)),
                    kept verbatim on the record;
        gradient -- the derivative's formula as text, where the script has no Expectation for it.
        """
        how = how or self._infer(value, what, _caller_objects(sys._getframe(1)))
        observed = _gradient_value_any(what, value)
        wanted = None if expected is None else _as_float64(expected, what)
        if observed is not None and wanted is not None and observed.shape != wanted.shape:
            raise ShapeMismatchError(
                f"{what}: observed shape {tuple(observed.shape)}, expected shape {tuple(wanted.shape)}")
        record = self._record(what, how, expectation, expected_failure, wanted, gradient)
        missing = f"no value (None) where {format_value(record.analytical_gradient)} was expected"
        said = [f"{WARNED}{type(item.message).__name__}: {item.message}" for item in caught]
        self.records.append(_judged(record, observed, wanted, self._tolerance, self._seed, missing=missing,
                                    notes=said))
        return self.records[-1]

    def raises(self, match: str, *, expected: object, what: str, how: Provenance,
               expectation: Expectation | None = None) -> _Raises:
        """with see.raises("text of PyTorch's error", expected=..., what=...): the block must raise it.

        The error is an observed outcome, never a crash: recorded as an expected failure (a derivative
        was asked for, none came) when its text contains match; as an unexpected failure otherwise.
        """
        if how not in PROVENANCES:
            raise CheckInputError(f"how={how!r} is not a way of observing a gradient; use one of {PROVENANCES}")
        return _Raises(self, match, _as_float64(expected, what), what, how, expectation)

    def _infer(self, value: object, what: str, uses: Sequence[object]) -> Provenance:
        # x.grad still None is read from .grad too (nothing stored there yet); another tensor's None proves nothing.
        if (self._x is not None and value is self._x.grad) or is_stored_grad(value, uses):
            return "stored"
        raise CheckInputError(
            f"see({what!r}): cannot tell how this value was observed (it is not the .grad of x, nor of a tensor, "
            f"module or optimizer the code uses); name it with how='stored' (read from .grad after backward()), "
            f"'returned' (torch.autograd.grad), ... (one of {PROVENANCES})"
        )

    def _record(self, what: str, how: Provenance, expectation: Expectation | None, expected_failure: bool,
                wanted: torch.Tensor | None, gradient: str = "") -> Record:
        if any(record.check == f"{self._name}: {what}" for record in self.records):
            # The label is the record's identity (its id and anchor): two passes must not share it.
            raise CheckInputError(f"{_name(self._script)} names two passes {what!r}: give each see(...) its own what=")
        about = expectation or self._expectation
        code = {_name(self._script): source_of(self._script)}
        if about is not None:
            code.update(source_code(about))
        return Record(
            check=f"{self._name}: {what}",
            function=about.function if about else self._function,
            x=self._point.tolist(),
            input_shape=list(self._point.shape),
            dtype=self.dtype,
            device=self.device,
            how=how,
            gradient_formula=gradient or (about.gradient if about else "written beside the code, in the script"),
            derivative_source=(about.source if about else self._source),
            analytical_gradient=None if wanted is None else wanted.tolist(),
            expected_failure=expected_failure,
            code=code,
            weak_reason=self._weak_reason,
        )


class _Raises:
    def __init__(self, see: See, match: str, expected: torch.Tensor, what: str, how: Provenance,
                 expectation: Expectation | None) -> None:
        self._see, self._match, self._expected, self._what = see, match, expected, what
        self._how, self._expectation = how, expectation
        self.error = ""

    def __enter__(self) -> _Raises:
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        if error is not None and not isinstance(error, Exception):
            return False  # KeyboardInterrupt and the like are not outcomes
        self.error = "" if error is None else str(error)
        matched = error is not None and self._match in self.error
        record = self._see._record(self._what, self._how, self._expectation, matched, self._expected)
        problems = [] if matched else [f"expected an error containing {self._match!r}; "
                                       + ("none was raised" if error is None else "a different one was raised")]
        said = [] if error is None else [f"{RAISED}{type(error).__name__}: {self.error}"]
        judged = _judged(record, None, self._expected, self._see._tolerance, self._see._seed,
                         missing="no derivative was produced", problems=problems, notes=said)
        self._see.records.append(judged)
        return True


def run_script(
    script: Callable[..., object],
    *,
    x: object,
    expectation: Expectation | None = None,
    function: str = "",
    source: str = "",
    dtypes: str | Sequence[str] = ("float64",),
    devices: str | Sequence[str] | None = None,
    tolerance: Tolerance | float | Mapping[str, Tolerance | float] | None = None,
    requires_grad: bool = True,
    name: str | None = None,
    seed: int = 0,
    weak: str | Mapping[str, str] | None = None,
) -> ScriptResults:
    """Run script per device and dtype; it gets the arguments it names: x, see, dtype, device.

    x -- the input; the script gets it as a fresh tensor of the row's dtype and device, a leaf with
         requires_grad=True (requires_grad=False for data, e.g. a module's input batch).
    expectation -- f with its derivative, for the records; or function and source as text, when each
         see(...) call carries its own formula beside the code (an nn.Module's gradients, say).
    tolerance -- None for torch.testing's default per dtype, a Tolerance for every dtype, or one per dtype; a plain
         number t is atol = rtol = t (Tolerance.plain_number), for an exercise whose lesson is not the tolerance.
    name -- put before each pass in the record's label (default: the script's name).
    weak -- why a coarse allowance is acceptable here, for passes shown weak on purpose (as for checks.plan).
    """
    if not callable(script):
        raise CheckInputError(f"{script!r} is not a function: write the passes as def script(x, see): ...")
    wanted = set(inspect.signature(script).parameters)
    unknown = wanted - {"x", "see", "dtype", "device"}
    if unknown:
        raise CheckInputError(f"{_name(script)} asks for {sorted(unknown)}; a script may take x, see, dtype, device")
    if expectation is None and not (function.strip() and source.strip()):
        raise CheckInputError("run_script needs an expectation, or function= and source= saying what is derived and how")
    if expectation is not None and not isinstance(expectation, Expectation):
        raise CheckInputError("expectation must be a checks.Expectation written first")
    names = planned_dtypes(dtypes, tolerance)
    reasons = weak_reasons(weak, names)
    integer(seed, "seed")
    flag(requires_grad, "requires_grad")
    if name is not None:
        text(name, "name")
    reference = reference_input(x)
    label = name or _name(script)
    records: list[Record] = []
    for device in resolve_devices(devices):
        for dtype in names:
            torch.manual_seed(seed)
            value = reference.to(to_dtype(dtype)).to(device).detach().clone().requires_grad_(requires_grad)
            see = See(script, expectation, function, source, reference.to(to_dtype(dtype)).to(torch.float64),
                      value if requires_grad else None, dtype, device, tolerance_for(tolerance, dtype),
                      label, seed, reasons[dtype])
            arguments = {"x": value, "see": see, "dtype": to_dtype(dtype), "device": torch.device(device)}
            script(**{key: arguments[key] for key in wanted})
            if not see.records:
                raise CheckInputError(f"{_name(script)} saw nothing: call see(value, expected=..., what=...) for each pass")
            records.extend(see.records)
    return ScriptResults(records, label)


def captured(record: Record) -> str:
    """The error or warning PyTorch gave during a pass, verbatim, without the type ('' when none)."""
    for line_start in (RAISED, WARNED):
        if line_start in record.message:
            text = record.message.split(line_start, 1)[1]
            return text.split(": ", 1)[1] if ": " in text else text
    return ""


def _gradient_value_any(what: str, value: object) -> torch.Tensor | None:
    if value is None:
        return None
    if not isinstance(value, torch.Tensor):
        raise CheckInputError(f"see({what!r}) was given {type(value).__name__}, not a tensor or None")
    return value.detach().clone()


def _as_float64(value: object, what: str) -> torch.Tensor:
    try:
        # A Python number or list is read as float64 directly: as_tensor's default dtype (float32) would
        # round an expected 4.8 to 4.800000191 before it was ever compared.
        tensor = (value.detach() if isinstance(value, torch.Tensor)
                  else torch.as_tensor(value, dtype=torch.float64))
    except (TypeError, ValueError, RuntimeError) as error:
        raise CheckInputError(f"see({what!r}): expected={value!r} is not a number or tensor: {error}") from None
    return tensor.cpu().to(torch.float64)


__all__ = ["See", "captured", "infer_how", "run_code", "run_script"]
