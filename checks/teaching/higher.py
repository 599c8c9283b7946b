"""Checks beyond a first derivative: Jacobians, Hessians and second derivatives, as records.

A Jacobian or Hessian is held to a matrix written by hand before anything runs (an AnalyticalMatrix), and
each way of obtaining it (torch.func.jacrev, jacfwd, hessian, autograd.grad with create_graph=True, a
Richardson estimate) becomes one checks.Record, so the book's ledger sees it like any gradient check.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from ..core.checker import check_jacobian
from ..core.compare import compare, detectable
from ..core.dtypes import dtype_name
from ..core.errors import CheckInputError, NonScalarOutputError, ShapeMismatchError
from ..core.numerical import Estimate, estimate_jacobian
from ..core.tolerances import Tolerance, default_tolerance, estimate_tolerance
from .environment import device_name, environment
from .expectations import reference_input
from .planning import weak_reasons
from .records import Provenance, Record, collect
from .source import source_of

Function = Callable[[torch.Tensor], torch.Tensor]
# Ways of obtaining a matrix of derivatives, and how each is recorded: the provenance names the transform
# (reverse mode, forward mode, hessian, autograd.grad with create_graph=True) or a numerical estimate.
WAYS: dict[str, Provenance] = {
    "jacrev": "jacrev",
    "jacfwd": "jacfwd",
    "hessian": "hessian",
    "create_graph": "create_graph",
    "richardson": "numerical",
}
WAY_WORDS = {
    "jacrev": "torch.func.jacrev",
    "jacfwd": "torch.func.jacfwd",
    "hessian": "torch.func.hessian",
    "create_graph": "autograd.grad with create_graph=True, then per row",
    "richardson": "Richardson estimate",
}


@dataclass(frozen=True)
class AnalyticalMatrix:
    """A Jacobian (or, for a scalar f, a Hessian) written by hand: f, the matrix as text and as code."""

    function: str
    f: Function
    matrix: str
    d: Function  # x -> the matrix (outputs, inputs) in float64
    source: str
    order: int = 1  # 1: Jacobian of f; 2: Hessian of a scalar f

    def __post_init__(self) -> None:
        if self.order not in (1, 2):
            raise CheckInputError(f"order={self.order!r}: an AnalyticalMatrix is a Jacobian (1) or a Hessian (2)")
        for name in ("function", "matrix", "source"):
            if not str(getattr(self, name)).strip():
                raise CheckInputError(f"an analytical matrix needs its {name} written out; it is empty")

    def expected(self, x: torch.Tensor) -> torch.Tensor:
        """The matrix at x (float64, CPU), refused unless it is (outputs, inputs): (f(x).numel(), x.numel())."""
        if x.numel() == 0:
            raise CheckInputError("x is empty: there is no matrix of derivatives to check")
        with torch.no_grad():
            outputs = x.numel() if self.order == 2 else torch.as_tensor(self.f(x.clone())).numel()
        value = torch.as_tensor(self.d(x), dtype=torch.float64).detach().cpu()
        if value.shape != (outputs, x.numel()):
            raise ShapeMismatchError(
                f"the analytical {'Hessian' if self.order == 2 else 'Jacobian'} {self.matrix!r} has shape "
                f"{tuple(value.shape)}; it should be (outputs, inputs) = {(outputs, x.numel())}"
            )
        return value


def observe_matrix(expectation: AnalyticalMatrix, x: torch.Tensor, way: str) -> tuple[torch.Tensor, Estimate | None]:
    """The matrix by one way, as (outputs, inputs) float64 on the CPU; the estimate for a numerical way."""
    f = expectation.f
    if way not in WAYS:
        raise CheckInputError(f"way={way!r} is not a way of obtaining derivatives; use one of {tuple(WAYS)}")
    second = expectation.order == 2
    if second and way in ("jacrev", "jacfwd"):
        raise CheckInputError(f"{way} gives a Jacobian; for the Hessian of {expectation.function} use 'hessian', "
                              f"'create_graph' or 'richardson'")
    if not second and way in ("hessian", "create_graph"):
        raise CheckInputError(f"{way} gives second derivatives; {expectation.function} has a Jacobian check (order 1)")
    estimate = None
    if way == "jacrev":
        value = torch.func.jacrev(f)(x)
    elif way == "jacfwd":
        value = torch.func.jacfwd(f)(x)
    elif way == "hessian":
        value = torch.func.hessian(f)(x)
    elif way == "create_graph":
        value = create_graph_hessian(f, x)
    else:
        # The Hessian is the Jacobian of the gradient: differencing autograd's gradient checks the second
        # derivative given the first (a second difference of f itself would lose twice the digits).
        target = torch.func.grad(f) if second else f
        estimate = estimate_jacobian(target, x, "richardson")
        value = estimate.values
    return value.detach().reshape(-1, x.numel()).to(torch.float64).cpu(), estimate


def create_graph_hessian(f: Function, x: torch.Tensor) -> torch.Tensor:
    """Second derivatives the way training code gets them: torch.autograd.grad with create_graph=True, then
    torch.autograd.grad of each element of that gradient, with retain_graph=True so that its graph can be
    walked once per row. An element the gradient does not depend on gets 0 from PyTorch itself
    (materialize_grads=True); a gradient with no graph at all (a backward that detached x) makes PyTorch
    raise "element 0 of tensors does not require grad", and that error is what this raises too."""
    leaf = x.detach().clone().requires_grad_(True)
    y = f(leaf)
    if y.numel() != 1:
        raise NonScalarOutputError(f"a Hessian needs a scalar f; f(x) has shape {tuple(y.shape)}")
    (gradient,) = torch.autograd.grad(y, leaf, create_graph=True)
    rows = [torch.autograd.grad(element, leaf, retain_graph=True, materialize_grads=True)[0]
            for element in gradient.reshape(-1)]
    return torch.stack([row.reshape(-1) for row in rows])


def gradient_of(f: Function) -> Function:
    """x -> autograd's gradient of a scalar f at x, kept differentiable (create_graph=True).

    Its Jacobian is f's Hessian through double backward, the path create_graph training code takes; so
    check_jacobian(gradient_of(f), x) checks second derivatives the way gradgradcheck does. Grad mode is
    switched on inside, because numerical estimators evaluate under torch.no_grad().
    """

    def gradient(x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            leaf = x if x.requires_grad else x.detach().clone().requires_grad_(True)
            y = f(leaf)
            if y.numel() != 1:
                raise NonScalarOutputError(f"a gradient needs a scalar f; f(x) has shape {tuple(y.shape)}")
            (value,) = torch.autograd.grad(y, leaf, create_graph=True)
        return value

    return gradient


def matrix_record(
    expectation: AnalyticalMatrix,
    x: object,
    way: str,
    *,
    dtype: str | torch.dtype = "float64",
    device: str = "cpu",
    tolerance: Tolerance | None = None,
    expected_failure: bool = False,
    label: str | None = None,
    weak: str | None = None,
) -> Record:
    """Run one way of obtaining the matrix on device and dtype and record it against the analytical one.

    tolerance -- None: torch.testing's default for autograd's ways; for the Richardson estimate, the one
    its own error estimate supports (estimate_tolerance).
    weak -- why a coarse allowance is acceptable here, for a check shown weak on purpose (as for checks.plan).
    """
    reference = reference_input(x)
    expected = expectation.expected(reference)
    resolved = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    point = reference.to(device=device, dtype=resolved)
    try:
        observed, estimate = observe_matrix(expectation, point, way)
    except RuntimeError as error:
        # A first derivative with no graph has no second derivative: PyTorch's refusal is the observation.
        if way != "create_graph" or "does not require grad" not in str(error):
            raise
        observed, estimate, refusal = None, None, f"PyTorch raised RuntimeError: {error}"
    else:
        refusal = ""
        if observed.shape != expected.shape:
            raise ShapeMismatchError(f"{WAY_WORDS[way]} gave shape {tuple(observed.shape)}; the analytical "
                                     f"{expectation.matrix!r} has shape {tuple(expected.shape)}")
    name = dtype_name(resolved)
    reason = weak_reasons(weak, [name])[name]
    if tolerance is None:
        tolerance = estimate_tolerance(estimate) if estimate is not None else default_tolerance(name)
    comparison = None if observed is None else compare(observed, expected, tolerance)
    caught = detectable(expected, tolerance)  # what the allowance could catch, compared or not
    what = "Hessian" if expectation.order == 2 else "Jacobian"
    summary = estimate.summary() if estimate is not None else {}
    return collect(Record(
        check=label or f"{what} of {expectation.function} by {WAY_WORDS[way]}",
        function=expectation.function,
        x=reference.tolist(),
        input_shape=list(reference.shape),
        dtype=name,
        device=device,
        how=WAYS[way],
        gradient_formula=expectation.matrix,
        derivative_source=expectation.source,
        analytical_gradient=expected.tolist(),
        observed_gradient=None if observed is None else observed.tolist(),
        executed=True,
        **({} if comparison is None else {"abs_error": comparison.abs_error, "rel_error": comparison.rel_error,
                                          "worst_index": list(comparison.worst_index),
                                          "mismatched": comparison.mismatched}),
        detectable_relative_error=caught.relative_error,
        detectable_index=None if caught.index is None else list(caught.index),
        weak_reason=reason,
        tolerance=tolerance.to_dict(),
        verdict="pass" if comparison is not None and comparison.passed else "fail",
        expected_failure=expected_failure,
        message=comparison.message if comparison is not None else (
            f"{refusal}\nThe first derivative returned with create_graph=True has no graph (its backward does not "
            f"depend on x differentiably), so there is no second derivative to compare."),
        device_name=device_name(device),
        environment=environment(0),
        method="richardson" if estimate is not None else "",
        step=summary.get("step"),
        evaluations=summary.get("evaluations"),
        error_estimate=summary.get("error_estimate"),
        code={"f": source_of(expectation.f), "matrix": source_of(expectation.d)},
    ))


@dataclass(frozen=True)
class TorchCheckRun:
    """What gradcheck or gradgradcheck said about f at x, and how long it took."""

    check: str
    dtype: str
    passed: bool
    message: str
    seconds: float


def run_torch_check(f: Function, x: torch.Tensor, check: str = "gradgradcheck") -> TorchCheckRun:
    """torch.autograd.gradcheck or gradgradcheck with their defaults; a mismatch is an outcome, not a crash."""
    runner = {"gradcheck": torch.autograd.gradcheck, "gradgradcheck": torch.autograd.gradgradcheck}.get(check)
    if runner is None:
        raise CheckInputError(f"check={check!r}; use 'gradcheck' or 'gradgradcheck'")
    point = x.detach().clone().requires_grad_(True)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the float64 warning is not the subject here
        try:
            passed, message = bool(runner(f, (point,))), f"{check} returned True"
        except GradcheckError as error:
            passed, message = False, str(error).strip().splitlines()[0]
    return TorchCheckRun(check, dtype_name(x.dtype), passed, message, time.perf_counter() - start)


SECOND_DERIVATIVE_CHECKS = ("gradcheck", "gradgradcheck", "this checker on the create_graph gradient")


def second_derivative_checks(functions: Mapping[str, Function], x: torch.Tensor):
    """gradcheck, gradgradcheck and check_jacobian(gradient_of(f)) on each named f at x.

    A pandas DataFrame, one row per function and check (SECOND_DERIVATIVE_CHECKS): function, check,
    passed, message. The first derivative alone (gradcheck) cannot see a wrong second derivative.
    """
    import pandas as pd

    rows = []
    for name, f in functions.items():
        for check in SECOND_DERIVATIVE_CHECKS[:2]:
            outcome = run_torch_check(f, x, check)
            rows.append({"function": name, "check": check, "passed": outcome.passed, "message": outcome.message})
        ours = check_jacobian(gradient_of(f), x)
        rows.append({"function": name, "check": SECOND_DERIVATIVE_CHECKS[2], "passed": ours.passed,
                     "message": ours.summary()})
    return pd.DataFrame(rows)


def device_discrepancy(records: Sequence[Record]) -> dict[tuple[str, str], float]:
    """Largest |observed on a device - observed on the CPU| per (check, dtype), over non-CPU devices."""
    cpu = {(r.check, r.dtype): torch.tensor(r.observed_gradient) for r in records if r.device == "cpu"}
    found: dict[tuple[str, str], float] = {}
    for record in records:
        key = (record.check, record.dtype)
        if record.device != "cpu" and key in cpu:
            gap = float((torch.tensor(record.observed_gradient) - cpu[key]).abs().max())
            found[key] = max(found.get(key, 0.0), gap)
    return found
