"""Bad input to the public API (checks.__all__) gets a named `checks` error, never a silently wrong result
and never an obscure traceback. One row per kind of bad input: what is called, the error type expected,
and words the message must contain (the problem named, not just "error")."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest
import torch

import checks
from checks import (
    CheckInputError,
    DeviceUnavailableError,
    DtypeError,
    NaNInputError,
    NonScalarOutputError,
    ShapeMismatchError,
    StepError,
    ToleranceChangeError,
)

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule")
SINE = checks.Expectation("sin(x)", torch.sin, "cos(x)", torch.cos, "d/dx sin x = cos x")
TOTAL = checks.Expectation("(x*x).sum()", lambda x: (x * x).sum(), "2*x", lambda x: 2 * x, "power rule")
TOL = checks.default_tolerance("float64")


def vector(*values: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def square_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum()


def expectation(**changes: object) -> Callable[[], object]:
    arguments = {"function": "x*x", "f": lambda x: x * x, "gradient": "2*x", "df": lambda x: 2 * x,
                 "source": "power rule", **changes}
    return lambda: checks.Expectation(**arguments)


def plan(x: object = 1.0, **options: object) -> Callable[[], object]:
    return lambda: checks.plan(SINE, x, **{"devices": "cpu", **options})


def numerical(x: object = 1.0, **options: object) -> Callable[[], object]:
    return lambda: checks.plan(SINE, x, **{"devices": "cpu", "how": "numerical", **options})


def tolerance(**changes: object) -> Callable[[], object]:
    return lambda: checks.Tolerance(**{"rtol": 1e-7, "atol": 1e-7, "reason": "a reason", **changes})


def changed(**changes: object) -> Callable[[], object]:
    return lambda: TOL.changed(**{"reason": "a reason", **changes})


def numerical_tolerance(**changes: object) -> Callable[[], object]:
    return lambda: checks.numerical_tolerance(**{"dtype": "float64", "method": "central", **changes})


def gradient(x: object = None, f: object = square_sum, **options: object) -> Callable[[], object]:
    return lambda: checks.estimate_gradient(f, vector(1.0, 2.0) if x is None else x, **options)


def jacobian(x: object = None, f: object = torch.sin, **options: object) -> Callable[[], object]:
    return lambda: checks.estimate_jacobian(f, vector(1.0, 2.0) if x is None else x, **options)


def check_jacobian(x: object = None, f: object = torch.sin, **options: object) -> Callable[[], object]:
    return lambda: checks.check_jacobian(f, vector(1.0, 2.0) if x is None else x, **options)


def stored_code(x: torch.Tensor) -> torch.Tensor:
    (x * x).backward()
    return x.grad


def witness(*code: object, x: object = 1.0, **options: object) -> Callable[[], object]:
    return lambda: checks.witness(SQUARE, x, *code, **{"devices": "cpu", **options})


def seen(x: torch.Tensor, see: object) -> None:
    (x * x).backward()
    see(x.grad, expected=2 * x.detach(), what="backward()")


def twice(x: torch.Tensor, see: object) -> None:
    (x * x).backward()
    see(x.grad, expected=2 * x.detach(), what="backward()")
    see(x.grad, expected=2 * x.detach(), what="backward()")


def script(script_code: object = seen, **options: object) -> Callable[[], object]:
    arguments = {"x": 1.0, "expectation": SQUARE, "devices": "cpu", **options}
    return lambda: checks.run_script(script_code, **arguments)


def executed_record() -> checks.Record:
    return checks.plan(SQUARE, 3.0, devices="cpu").run()[0]


def with_devices(value: str) -> Callable[[], object]:
    def call() -> object:
        before = os.environ.get("CHECKS_DEVICES")
        os.environ["CHECKS_DEVICES"] = value
        try:
            return checks.available_devices()
        finally:
            if before is None:
                del os.environ["CHECKS_DEVICES"]
            else:
                os.environ["CHECKS_DEVICES"] = before
    return call


E = CheckInputError
# (what, call, error type, words the message must contain (a regular expression))
CASES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    # Expectation: everything written out, f and df callables.
    ("Expectation function empty", expectation(function=""), E, "function"),
    ("Expectation function blank", expectation(function="   "), E, "function"),
    ("Expectation function None", expectation(function=None), E, "function"),
    ("Expectation function a number", expectation(function=3), E, "function"),
    ("Expectation gradient empty", expectation(gradient=""), E, "gradient"),
    ("Expectation gradient None", expectation(gradient=None), E, "gradient"),
    ("Expectation source empty", expectation(source=""), E, "source"),
    ("Expectation source None", expectation(source=None), E, "source"),
    ("Expectation f None", expectation(f=None), E, r"\bf\b"),
    ("Expectation f a number", expectation(f=3), E, r"\bf\b"),
    ("Expectation df a string", expectation(df="2*x"), E, r"\bdf\b"),
    ("Expectation df None", expectation(df=None), E, r"\bdf\b"),
    ("Expectation related a string", expectation(related="Cube"), E, "related"),
    ("Expectation related None", expectation(related=None), E, "related"),
    ("df of the wrong shape", lambda: checks.plan(checks.Expectation(
        "x.sum()", lambda x: x.sum(), "1", lambda x: torch.tensor(1.0), "sum"), [1.0, 2.0]), ShapeMismatchError,
     "shape"),
    ("df not finite", lambda: checks.plan(checks.Expectation(
        "log(x)", torch.log, "1/x", lambda x: 1 / x, "d log"), 0.0), NaNInputError, "not finite"),
    ("df returns a string", lambda: checks.plan(checks.Expectation(
        "x*x", lambda x: x * x, "2*x", lambda x: "2x", "power rule"), 1.0), E, "df"),
    ("df returns None", lambda: checks.plan(checks.Expectation(
        "x*x", lambda x: x * x, "2*x", lambda x: None, "power rule"), 1.0), E, "df"),
    # plan(): the expectation and x.
    ("plan without an Expectation", lambda: checks.plan(lambda x: x * x, 1.0), E, "Expectation"),
    ("plan x None", plan(None), E, "x=None"),
    ("plan x a string", plan("3"), E, "not a number"),
    ("plan x a dict", plan({"x": 1.0}), E, "not a number"),
    ("plan x empty list", plan([]), E, "empty"),
    ("plan x empty nested list", plan([[]]), E, "empty"),
    ("plan x empty tensor", plan(torch.zeros(0)), E, "empty"),
    ("plan x ragged", plan([[1.0, 2.0], [3.0]]), E, "not a number"),
    ("plan x NaN", plan(float("nan")), NaNInputError, "NaN"),
    ("plan x infinity", plan(float("inf")), NaNInputError, "infinity"),
    ("plan x with a NaN element", plan([1.0, float("nan")]), NaNInputError, "NaN"),
    ("plan x a bool", plan(True), E, "real numbers"),
    ("plan x complex", plan(1 + 2j), E, "real numbers"),
    ("plan x a complex tensor", plan(torch.tensor([1 + 2j])), E, "real numbers"),
    # plan(): how, dtypes, devices.
    ("plan how=()", plan(how=()), E, "no check"),
    ("plan how unknown", plan(how="grad"), E, "how"),
    ("plan how None", plan(how=None), E, "how"),
    ("plan how a number", plan(how=3), E, "how"),
    ("plan how twice", plan(how=("stored", "stored")), E, "twice"),
    ("plan dtypes=()", plan(dtypes=()), E, "no check"),
    ("plan dtypes=[]", plan(dtypes=[]), E, "no check"),
    ("plan dtypes twice", plan(dtypes=("float64", "float64")), E, "twice"),
    ("plan dtypes a misspelt name", plan(dtypes="flaot64"), DtypeError, "unknown dtype 'flaot64'"),
    ("plan dtypes an integer type", plan(dtypes="int64"), DtypeError, "cannot carry gradients"),
    ("plan dtypes bool", plan(dtypes="bool"), DtypeError, "cannot carry gradients"),
    ("plan dtypes float8_e5m2", plan(dtypes="float8_e5m2"), DtypeError, "float8"),
    ("plan dtypes float8_e4m3fn", plan(dtypes="float8_e4m3fn"), DtypeError, "float8"),
    ("plan dtypes complex64", plan(dtypes="complex64"), DtypeError, "complex"),
    ("plan dtypes complex128", plan(dtypes="complex128"), DtypeError, "complex"),
    ("plan dtypes None", plan(dtypes=None), E, "dtypes"),
    ("plan dtypes a number", plan(dtypes=3), E, "dtypes"),
    ("plan dtypes an empty name", plan(dtypes=("",)), DtypeError, "unknown dtype"),
    ("plan dtypes a torch function", plan(dtypes="sin"), DtypeError, "unknown dtype"),
    ("plan devices unknown", plan(devices="gpu"), DeviceUnavailableError, "gpu"),
    ("plan devices one missing", plan(devices=("cpu", "tpu")), DeviceUnavailableError, "tpu"),
    ("plan devices empty", plan(devices=()), DeviceUnavailableError, "no device"),
    ("plan devices a number", plan(devices=3), E, "devices"),
    # plan(): tolerance.
    # A plain number t is accepted (atol = rtol = t, recorded as the reader's): one that cannot fail is not.
    ("plan tolerance a plain number of 1 or more", plan(tolerance=1.0), ToleranceChangeError, "below 1"),
    ("plan tolerance a word", plan(tolerance="loose"), ToleranceChangeError, "written reason"),
    ("plan tolerance a misspelt dtype key", plan(tolerance={"flaot64": TOL}), ToleranceChangeError, "flaot64"),
    ("plan tolerance for a dtype not planned", plan(tolerance={"float32": TOL}), ToleranceChangeError, "float32"),
    ("plan tolerance mapping to a negative number", plan(tolerance={"float64": -1e-3}), ToleranceChangeError,
     "greater than 0"),
    ("plan tolerance estimate for autograd", plan(tolerance="estimate"), ToleranceChangeError, "richardson"),
    ("plan tolerance estimate for central", numerical(tolerance="estimate"), ToleranceChangeError, "richardson"),
    ("plan tolerance that accepts a zero gradient", lambda: checks.plan(
        SINE, 1.0, devices="cpu", tolerance=TOL.changed(atol=0.6, reason="r")), E, "cannot discriminate"),
    # plan(): the other arguments.
    ("plan expected_failure 'no'", plan(expected_failure="no"), E, "expected_failure"),
    ("plan expected_failure 1", plan(expected_failure=1), E, "expected_failure"),
    ("plan weak blank", plan(weak="  "), E, "weak"),
    ("plan weak True", plan(weak=True), E, "why a coarse allowance is acceptable"),
    ("plan weak for a dtype not planned", plan(weak={"float32": "coarse"}), E, "no float32 check is planned"),
    ("plan weak for a misspelt dtype", plan(weak={"flaot64": "coarse"}), E, "flaot64"),
    ("plan weak with a blank reason", plan(weak={"float64": ""}), E, r"weak\['float64'\] \(why"),
    ("witness weak a number", witness(stored_code, weak=1), E, "weak"),
    ("run_script weak for a dtype not planned", script(weak={"float32": "coarse"}), E, "no float32 check"),
    ("Tolerance element_atol a list", tolerance(element_atol=[1e-7]), ToleranceChangeError, "tuple"),
    ("Tolerance element_atol negative", tolerance(atol=1e-7, element_atol=(1e-7, -1.0)), ToleranceChangeError,
     "at least 0"),
    ("Tolerance element_atol whose largest is not atol", tolerance(atol=1e-7, element_atol=(1e-8, 2e-8)),
     ToleranceChangeError, "largest element's atol"),
    ("Tolerance per element for another count of elements", lambda: checks.Tolerance.per_element(
        0.0, [1e-3, 1e-3], "two elements").allowed(torch.ones(3)), ShapeMismatchError, "2 elements"),
    ("plan expected_failure None", plan(expected_failure=None), E, "expected_failure"),
    ("plan label a number", plan(label=3), E, "label"),
    ("plan seed a string", plan(seed="0"), E, "seed"),
    ("plan seed a float", plan(seed=1.5), E, "seed"),
    ("plan seed True", plan(seed=True), E, "seed"),
    ("plan seed None", plan(seed=None), E, "seed"),
    # plan(how="numerical"): method, step, levels, and tolerances that cannot tell right from wrong.
    ("plan method=()", numerical(method=()), E, "no check"),
    ("plan method unknown", numerical(method="backward"), E, "method"),
    ("plan method twice", numerical(method=("central", "central")), E, "twice"),
    ("plan method None", numerical(method=None), E, "method"),
    ("plan method complex in float16", numerical(method="complex", dtypes="float16"), DtypeError, "complex"),
    ("plan step a string", numerical(step="1e-3"), E, "step"),
    ("plan step zero", numerical(step=0.0), E, "step"),
    ("plan step negative", numerical(step=-1e-3), E, "step"),
    ("plan step infinite", numerical(step=float("inf")), E, "step"),
    ("plan step NaN", numerical(step=float("nan")), E, "step"),
    ("plan step True", numerical(step=True), E, "step"),
    ("plan step so large nothing fails", numerical(step=10.0), E, "cannot discriminate"),
    ("plan bfloat16 forward differences", numerical(method="forward", dtypes="bfloat16"), E,
     "cannot discriminate"),
    ("plan levels 1", numerical(method="richardson", levels=1), E, "levels"),
    ("plan levels 0", numerical(method="richardson", levels=0), E, "levels"),
    ("plan levels a string", numerical(method="richardson", levels="3"), E, "levels"),
    ("plan levels a float", numerical(method="richardson", levels=2.5), E, "levels"),
    ("plan levels True", numerical(method="richardson", levels=True), E, "levels"),
    ("plan levels too many", numerical(method="richardson", levels=100), E, "levels"),
    ("plan numerical check of an empty x", numerical([]), E, "empty"),
    # Plan and execute, used directly.
    ("Plan of no checks", lambda: checks.Plan([]), E, "no checks"),
    ("Plan of something else", lambda: checks.Plan(["a check"]), E, "PlannedCheck"),
    ("execute something else", lambda: checks.execute("a check"), E, "PlannedCheck"),
    ("execute None", lambda: checks.execute(None), E, "PlannedCheck"),
    ("Results.one matching none", lambda: checks.plan(SQUARE, 3.0, devices="cpu").run().one(device="gpu"), E,
     "0 records match"),
    # Tolerance.
    ("Tolerance rtol True", tolerance(rtol=True), ToleranceChangeError, "rtol"),
    ("Tolerance atol False", tolerance(atol=False), ToleranceChangeError, "atol"),
    ("Tolerance rtol infinite", tolerance(rtol=float("inf")), ToleranceChangeError, "rtol"),
    ("Tolerance atol infinite", tolerance(atol=float("inf")), ToleranceChangeError, "atol"),
    ("Tolerance rtol NaN", tolerance(rtol=float("nan")), ToleranceChangeError, "rtol"),
    ("Tolerance atol NaN", tolerance(atol=float("nan")), ToleranceChangeError, "atol"),
    ("Tolerance rtol negative", tolerance(rtol=-1e-7), ToleranceChangeError, "rtol"),
    ("Tolerance atol negative", tolerance(atol=-1e-7), ToleranceChangeError, "atol"),
    ("Tolerance rtol a string", tolerance(rtol="1e-7"), ToleranceChangeError, "rtol"),
    ("Tolerance rtol None", tolerance(rtol=None), ToleranceChangeError, "rtol"),
    ("Tolerance rtol a tensor", tolerance(rtol=torch.tensor(1e-7)), ToleranceChangeError, "rtol"),
    ("Tolerance rtol 1 accepts a zero gradient", tolerance(rtol=1.0), ToleranceChangeError, "rtol"),
    ("Tolerance reason empty", tolerance(reason=""), ToleranceChangeError, "reason"),
    ("Tolerance reason blank", tolerance(reason="  "), ToleranceChangeError, "reason"),
    ("Tolerance reason None", tolerance(reason=None), ToleranceChangeError, "reason"),
    ("Tolerance reason a number", tolerance(reason=3), ToleranceChangeError, "reason"),
    ("Tolerance.changed rtol infinite", changed(rtol=float("inf")), ToleranceChangeError, "rtol"),
    ("Tolerance.changed atol infinite", changed(atol=float("inf")), ToleranceChangeError, "atol"),
    ("Tolerance.changed rtol NaN", changed(rtol=float("nan")), ToleranceChangeError, "rtol"),
    ("Tolerance.changed rtol True", changed(rtol=True), ToleranceChangeError, "rtol"),
    ("Tolerance.changed atol a string", changed(atol="big"), ToleranceChangeError, "atol"),
    ("Tolerance.changed atol negative", changed(atol=-1.0), ToleranceChangeError, "atol"),
    ("Tolerance.changed nothing", changed(), ToleranceChangeError, "rtol or atol"),
    ("Tolerance.changed without a reason", lambda: TOL.changed(rtol=1e-3, reason=""), ToleranceChangeError,
     "reason"),
    ("Tolerance.changed reason None", lambda: TOL.changed(rtol=1e-3, reason=None), ToleranceChangeError,
     "reason"),
    ("Tolerance.from_dict missing keys", lambda: checks.Tolerance.from_dict({"rtol": 1e-7}), ToleranceChangeError,
     "atol"),
    ("Tolerance.from_dict not a dict", lambda: checks.Tolerance.from_dict("1e-7"), ToleranceChangeError,
     "dictionary"),
    # default_tolerance.
    ("default_tolerance float8_e5m2", lambda: checks.default_tolerance("float8_e5m2"), DtypeError, "float8"),
    ("default_tolerance float8_e4m3fn", lambda: checks.default_tolerance("float8_e4m3fn"), DtypeError, "float8"),
    ("default_tolerance misspelt", lambda: checks.default_tolerance("flaot64"), DtypeError, "unknown dtype"),
    ("default_tolerance int32", lambda: checks.default_tolerance("int32"), DtypeError, "cannot carry"),
    ("default_tolerance None", lambda: checks.default_tolerance(None), DtypeError, "unknown dtype"),
    ("default_tolerance a number", lambda: checks.default_tolerance(3), DtypeError, "unknown dtype"),
    # numerical_tolerance.
    ("numerical_tolerance method unknown", numerical_tolerance(method="backward"), E, "method"),
    ("numerical_tolerance step zero", numerical_tolerance(step=0.0), ToleranceChangeError, "step"),
    ("numerical_tolerance step a string", numerical_tolerance(step="x"), ToleranceChangeError, "step"),
    ("numerical_tolerance step infinite", numerical_tolerance(step=float("inf")), ToleranceChangeError, "step"),
    ("numerical_tolerance f_scale negative", numerical_tolerance(f_scale=-1.0), ToleranceChangeError, "f_scale"),
    ("numerical_tolerance f_scale NaN", numerical_tolerance(f_scale=float("nan")), ToleranceChangeError,
     "f_scale"),
    ("numerical_tolerance gradient_scale a string", numerical_tolerance(gradient_scale="1"), ToleranceChangeError,
     "gradient_scale"),
    ("numerical_tolerance derivative_scale infinite", numerical_tolerance(derivative_scale=float("inf")),
     ToleranceChangeError, "derivative_scale"),
    ("numerical_tolerance safety below 1", numerical_tolerance(safety=0.5), ToleranceChangeError, "safety"),
    ("numerical_tolerance safety infinite", numerical_tolerance(safety=float("inf")), ToleranceChangeError,
     "safety"),
    ("numerical_tolerance safety True", numerical_tolerance(safety=True), ToleranceChangeError, "safety"),
    ("numerical_tolerance levels 0", numerical_tolerance(method="richardson", levels=0), E, "levels"),
    ("numerical_tolerance levels a string", numerical_tolerance(method="richardson", levels="3"), E, "levels"),
    ("numerical_tolerance dtype float8", numerical_tolerance(dtype="float8_e5m2"), DtypeError, "float8"),
    ("numerical_tolerance dtype int64", numerical_tolerance(dtype="int64"), DtypeError, "cannot carry"),
    # estimate_tolerance.
    ("estimate_tolerance of something else", lambda: checks.estimate_tolerance("an estimate"), E, "Estimate"),
    ("estimate_tolerance of a central estimate", lambda: checks.estimate_tolerance(gradient()()),
     ToleranceChangeError, "no error estimate"),
    ("estimate_tolerance safety infinite", lambda: checks.estimate_tolerance(
        gradient(method="richardson")(), safety=float("inf")), ToleranceChangeError, "safety"),
    ("estimate_tolerance safety True", lambda: checks.estimate_tolerance(
        gradient(method="richardson")(), safety=True), ToleranceChangeError, "safety"),
    # estimate_gradient and estimate_jacobian.
    ("estimate_gradient x a list", gradient([1.0, 2.0]), E, "tensor"),
    ("estimate_gradient x an integer tensor", gradient(torch.tensor([1, 2])), DtypeError, "int64"),
    ("estimate_gradient x a bool tensor", gradient(torch.tensor([True])), DtypeError, "bool"),
    ("estimate_gradient x complex", gradient(torch.tensor([1 + 1j])), DtypeError, "complex"),
    ("estimate_gradient x float8", gradient(torch.ones(2).to(torch.float8_e5m2)), DtypeError, "float8"),
    ("estimate_gradient x NaN", gradient(vector(1.0, float("nan"))), NaNInputError, "NaN"),
    ("estimate_gradient x empty", gradient(torch.zeros(0, dtype=torch.float64)), E, "empty"),
    ("estimate_gradient x empty matrix", gradient(torch.zeros(2, 0, dtype=torch.float64)), E, "empty"),
    ("estimate_gradient method unknown", gradient(method="backward"), E, "method"),
    ("estimate_gradient step a string", gradient(step="1e-3"), E, "step"),
    ("estimate_gradient step zero", gradient(step=0), E, "step"),
    ("estimate_gradient step NaN", gradient(step=float("nan")), E, "step"),
    ("estimate_gradient step True", gradient(step=True), E, "step"),
    ("estimate_gradient step rounding to zero", gradient(vector(1.0, dtype=torch.float16), step=1e-6), StepError,
     "rounds to zero"),
    ("estimate_gradient levels 1", gradient(method="richardson", levels=1), E, "levels"),
    ("estimate_gradient levels a string", gradient(method="richardson", levels="3"), E, "levels"),
    ("estimate_gradient levels too many", gradient(method="richardson", levels=100), E, "levels"),
    ("estimate_gradient vectorize a string", gradient(vectorize="yes"), E, "vectorize"),
    ("estimate_gradient f None", gradient(f=None), E, "function"),
    ("estimate_gradient f returns a number", gradient(f=lambda x: 1.0), E, "not a tensor"),
    ("estimate_gradient f not scalar", gradient(f=torch.sin), NonScalarOutputError, "scalar"),
    ("estimate_gradient complex step in float16", gradient(vector(1.0, dtype=torch.float16), method="complex"),
     DtypeError, "complex"),
    ("estimate_gradient complex step with real f", gradient(f=lambda x: x.abs().sum(), method="complex"), E,
     "imaginary"),
    ("estimate_jacobian of 3e4 inputs", jacobian(torch.zeros(30_000, dtype=torch.float64)), E, "GB"),
    ("estimate_jacobian of 3e4 inputs, one by one",
     jacobian(torch.zeros(30_000, dtype=torch.float64), vectorize=False), E, "GB"),
    ("estimate_jacobian f returns complex for real x", jacobian(f=lambda x: x * 1j), E, "complex"),
    # check_jacobian.
    ("check_jacobian x a list", check_jacobian([1.0]), E, "tensor"),
    ("check_jacobian x float16", check_jacobian(vector(1.0, dtype=torch.float16)), DtypeError, "float16"),
    ("check_jacobian x bfloat16", check_jacobian(vector(1.0, dtype=torch.bfloat16)), DtypeError, "bfloat16"),
    ("check_jacobian x float8", check_jacobian(torch.ones(1).to(torch.float8_e4m3fn)), DtypeError, "float8"),
    ("check_jacobian x an integer tensor", check_jacobian(torch.tensor([1])), DtypeError, "int64"),
    ("check_jacobian x empty", check_jacobian(torch.zeros(0, dtype=torch.float64)), E, "empty"),
    ("check_jacobian x infinite", check_jacobian(vector(float("inf"))), NaNInputError, "infinity"),
    ("check_jacobian f not finite at x", check_jacobian(vector(0.0), f=torch.log), NaNInputError, "not finite"),
    ("check_jacobian f a number", check_jacobian(f=3), E, "function"),
    ("check_jacobian f returns an integer tensor", check_jacobian(f=lambda x: x.long()), DtypeError, "int64"),
    ("check_jacobian mode unknown", check_jacobian(mode="backward"), E, "mode"),
    ("check_jacobian names of the wrong count", check_jacobian(names=("x", "w")), E, "name"),
    ("check_jacobian of 3e4 inputs", check_jacobian(torch.zeros(30_000, dtype=torch.float64)), E, "GB"),
    ("plan f that works in place", lambda: checks.plan(checks.Expectation(
        "(2x)^2", lambda x: (x.mul_(2) ** 2).sum(), "8x", lambda x: 8 * x, "chain rule"), [1.0, 2.0],
        devices="cpu").run(), E, "in place"),
    ("check_jacobian atol negative", check_jacobian(atol=-1e-6), E, "atol"),
    ("check_jacobian atol True", check_jacobian(atol=True), E, "atol"),
    ("check_jacobian atol infinite", check_jacobian(atol=float("inf")), E, "atol"),
    ("check_jacobian rtol 1", check_jacobian(rtol=1.0), E, "rtol"),
    ("check_jacobian rtol a string", check_jacobian(rtol="1e-3"), E, "rtol"),
    ("check_jacobian order 3", check_jacobian(order=3), E, "order"),
    ("check_jacobian order a float", check_jacobian(order=2.0), E, "order"),
    ("check_jacobian sample 0", check_jacobian(sample=0), E, "sample"),
    ("check_jacobian sample a fraction", check_jacobian(sample=0.5), E, "sample"),
    ("check_jacobian seed negative", check_jacobian(seed=-1), E, "seed"),
    ("check_jacobian nondet_tol negative", check_jacobian(nondet_tol=-1e-9), E, "nondet_tol"),
    ("check_jacobian check_batched_grad 'yes'", check_jacobian(check_batched_grad="yes"), E, "check_batched_grad"),
    ("check_jacobian check_undefined_grad 1", check_jacobian(check_undefined_grad=1), E, "check_undefined_grad"),
    ("check_jacobian outputs change type", check_jacobian(
        f=lambda x: x if bool(x.sum() == 3.0) else x.long()), E, "keep their types"),
    ("check_module inputs 'no'", lambda: checks.check_module(
        torch.nn.Linear(1, 1).double(), lambda y: y.sum(), vector(1.0), inputs="no"), E, "inputs"),
    # Records.
    ("Record.from_dict empty", lambda: checks.Record.from_dict({}), E, "check"),
    ("Record.from_dict not a dict", lambda: checks.Record.from_dict("a record"), E, "dictionary"),
    ("Record.from_json not JSON", lambda: checks.Record.from_json("{"), E, "JSON"),
    ("load_records not JSON", lambda: checks.load_records("not json"), E, "JSON"),
    ("load_records not a list", lambda: checks.load_records('{"a": 1}'), E, "list"),
    ("load_records a list of numbers", lambda: checks.load_records("[1]"), E, "dictionary"),
    ("dump_records of something else", lambda: checks.dump_records(["a record"]), E, "Record"),
    ("dump_records of one record, not a list", lambda: checks.dump_records(executed_record()), E, "Record"),
    # The witness API: the reader's own code, run per device and dtype.
    ("witness without code", witness(), E, "at least one code function"),
    ("witness code not a function", witness("x.grad"), E, "not a function"),
    ("witness how unknown", witness(stored_code, how="grad"), E, "how"),
    ("witness pair with an unknown how", witness((stored_code, "grad")), E, "how"),
    ("witness dtypes=()", witness(stored_code, dtypes=()), E, "no check"),
    ("witness dtypes twice", witness(stored_code, dtypes=("float32", "float32")), E, "twice"),
    ("witness dtypes float8", witness(stored_code, dtypes="float8_e5m2"), DtypeError, "float8"),
    ("witness tolerance a plain number that is not finite", witness(stored_code, tolerance=float("nan")),
     ToleranceChangeError, "finite"),
    ("witness tolerance a misspelt dtype key", witness(stored_code, tolerance={"flaot64": TOL}),
     ToleranceChangeError, "flaot64"),
    ("witness expected_failure 'no'", witness(stored_code, expected_failure="no"), E, "expected_failure"),
    ("witness x empty", witness(stored_code, x=[]), E, "empty"),
    ("witness devices unknown", witness(stored_code, devices="tpu"), DeviceUnavailableError, "tpu"),
    ("Plan.run with how but no code", lambda: checks.plan(SQUARE, 1.0, devices="cpu").run(how="stored"), E,
     "pass the code"),
    ("run_script script not a function", script(script_code="passes"), E, "not a function"),
    ("run_script script asks for an unknown argument", script(script_code=lambda x, see, model: None), E,
     "model"),
    ("run_script without an expectation or function", script(expectation=None), E, "function= and source="),
    ("run_script expectation not an Expectation", script(expectation="x*x"), E, "Expectation"),
    ("run_script that sees nothing", script(script_code=lambda x, see: None), E, "saw nothing"),
    ("run_script dtypes=()", script(dtypes=()), E, "no check"),
    ("run_script dtypes twice", script(dtypes=("float64", "float64")), E, "twice"),
    ("run_script dtypes complex", script(dtypes="complex128"), DtypeError, "complex"),
    ("run_script dtypes float8", script(dtypes="float8_e4m3fn"), DtypeError, "float8"),
    ("run_script tolerance True", script(tolerance=True), ToleranceChangeError, "written reason"),
    ("run_script tolerance for a dtype not planned", script(tolerance={"float32": TOL}), ToleranceChangeError,
     "float32"),
    ("run_script seed a string", script(seed="0"), E, "seed"),
    ("run_script requires_grad 'yes'", script(requires_grad="yes"), E, "requires_grad"),
    ("run_script name a number", script(name=3), E, "name"),
    ("run_script x empty", script(x=[]), E, "empty"),
    ("run_script devices unknown", script(devices="tpu"), DeviceUnavailableError, "tpu"),
    ("see with a value that is not a tensor", script(script_code=lambda x, see: see(
        "2x", expected=2 * x.detach(), what="a string", how="stored")), E, "not a tensor"),
    ("see expected not a number", script(script_code=lambda x, see: see(
        x.detach(), expected="two x", what="a bad expectation", how="stored")), E, "not a number"),
    ("see the same pass twice", script(script_code=twice), E, "two passes"),
    ("provenance_frame of something else", lambda: checks.provenance_frame(["a record"]), E, "Record"),
    ("provenance_frame of nothing", lambda: checks.provenance_frame([]), E, "no records"),
    ("provenance_table of a number", lambda: checks.provenance_table(3), E, "Record"),
    # Devices from the environment.
    ("CHECKS_DEVICES unknown", with_devices("tpu"), DeviceUnavailableError, "CHECKS_DEVICES"),
    ("CHECKS_DEVICES names none", with_devices(" , "), DeviceUnavailableError, "no device"),
]


def test_there_are_at_least_150_kinds_of_bad_input() -> None:
    assert len(CASES) >= 150
    assert len({name for name, *_ in CASES}) == len(CASES), "each row names a different kind"


@pytest.mark.parametrize(("name", "call", "error", "words"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_gets_a_named_error(name: str, call: Callable[[], object], error: type[Exception],
                                      words: str) -> None:
    with pytest.raises(CheckInputError) as caught:
        call()
    assert isinstance(caught.value, error), f"{type(caught.value).__name__}: {caught.value}"
    assert re.search(words, str(caught.value)), f"{words!r} not in: {caught.value}"


# Silently wrong before: now right, and checked by what the reader gets back.

def test_a_df_that_works_in_place_changes_neither_the_callers_x_nor_the_record() -> None:
    in_place = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: x.mul_(2), "power rule, in place")
    x = vector(3.0)
    record = checks.plan(in_place, x, devices="cpu").run().one()
    assert x.tolist() == [3.0]
    assert record.x == [3.0] and record.analytical_gradient == [6.0] and record.passed


def test_a_zero_gradient_that_a_bfloat16_richardson_allowance_would_accept_is_a_failure() -> None:
    wrong_zero = checks.Expectation("sin(x)", torch.sin, "0", torch.zeros_like, "a missing derivative, on purpose")
    record = checks.plan(wrong_zero, 1.0, devices="cpu", how="numerical", method="richardson",
                         dtypes="bfloat16").run().one()
    # Richardson's step now suits its levels, so this allowance (about 0.5) no longer reaches the estimate:
    # a plain mismatch. The guard for an allowance that would accept the wrong zero is tested below.
    assert record.verdict == "fail"
    # The same estimate in float32 discriminates, and fails as any wrong derivative does.
    finer = checks.plan(wrong_zero, 1.0, devices="cpu", how="numerical", method="richardson",
                        dtypes="float32").run().one()
    assert finer.verdict == "fail" and finer.message.startswith("Gradients are not close!")


def test_a_true_zero_gradient_estimated_numerically_still_passes() -> None:
    cube = checks.Expectation("(x**3).sum()", lambda x: (x**3).sum(), "3*x**2", lambda x: 3 * x**2, "power rule")
    for dtype in ("bfloat16", "float64"):
        record = checks.plan(cube, [0.0, 1.0], devices="cpu", how="numerical", method="richardson",
                             dtypes=dtype).run().one()
        assert record.passed, record.message


def test_an_allowance_that_would_accept_a_wrong_zero_is_named() -> None:
    from checks.teaching.execute import undiscriminating

    wide = checks.default_tolerance("bfloat16").changed(atol=0.6, reason="as wide as a coarse estimate's")
    # Expected 0, estimated 0.52: beyond the estimate's own error (allowance / 10), within the allowance.
    assert undiscriminating(torch.tensor([0.0]), torch.tensor([0.52]), wide).startswith("Cannot discriminate")
    # Expected 0.54 with an allowance of 0.6: a zero gradient would pass too.
    assert undiscriminating(torch.tensor([0.54]), torch.tensor([0.52]), wide).startswith("Cannot discriminate")
    narrow = checks.default_tolerance("float32")
    assert undiscriminating(torch.tensor([0.54]), torch.tensor([0.54]), narrow) == ""
