"""The checker library's reports become records (checks.teaching.library) through checks.core.observers:
the reader's call is not wrapped, the library imports nothing of the book, and calls the teaching side makes
itself are left to it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import checks
import checks.teaching  # subscribes the library's observer
from checks.core import observers
from checks.teaching import library, sensitivity
from checks.teaching.mutants import correct_cases
from checks.teaching.records import collected


def new_records(before: list) -> list:
    seen = {id(record) for record in before}
    return [record for record in collected() if id(record) not in seen]


def test_the_library_imports_nothing_of_the_book() -> None:
    for path in (Path(checks.__file__).parent / "core").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module is None or not node.module.startswith(("teaching", "sphinx")), path
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
                assert not any(name.startswith(("checks.teaching", "checks.sphinx")) for name in names), path


def test_importing_the_teaching_side_subscribes_once() -> None:
    library.subscribe()
    assert observers.observers.count(library.observe) == 1


def test_a_passing_call_becomes_one_record_with_its_call_and_worst_element() -> None:
    before = collected()
    x = torch.tensor([0.5, 1.5], dtype=torch.float64)
    report = checks.check_jacobian(torch.sin, x)
    (record,) = new_records(before)
    assert record.verdict == report.outcome == "pass" and record.status == "pass"
    assert record.code == {"call": "checks.check_jacobian(torch.sin, x)"}
    assert record.function == "torch.sin" and record.checker == "check_jacobian"
    assert (record.dtype, record.device, record.input_shape) == ("float64", "cpu", [2])
    i, j = record.worst_index
    assert record.analytical_gradient == float(report.numerical[i, j])
    assert record.observed_gradient == float(report.autograd[i, j])
    assert record.abs_error <= record.tolerance["element_atol"][0]
    assert record.detectable_relative_error == report.detectable_relative_error


def test_an_inconclusive_call_is_an_inconclusive_record_and_a_problem_unless_declared() -> None:
    before = collected()
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    checks.check_jacobian(torch.abs, x)
    library.declare("check_jacobian(torch.relu, x)", "inconclusive")
    checks.check_jacobian(torch.relu, x)
    undeclared, declared = new_records(before)
    assert undeclared.verdict == declared.verdict == "inconclusive"
    assert undeclared.status == "unexpected inconclusive"
    assert declared.status == "expected inconclusive" and declared.expected_inconclusive
    # The decisive element is the one at the kink, x = 0.
    assert declared.worst_index == [1, 1]


def test_a_failing_assert_gradients_is_recorded_before_it_raises() -> None:
    class Doubled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, grad):
            return grad * 0.0

    before = collected()
    library.declare("checks.assert_gradients(Doubled.apply", "fail")
    try:
        checks.assert_gradients(Doubled.apply, torch.tensor([1.0, 2.0], dtype=torch.float64))
    except checks.GradientMismatchError:
        pass
    (record,) = new_records(before)
    assert record.checker == "assert_gradients" and record.verdict == "fail"
    assert record.status == "expected failure" and record.mismatched == 2


def test_calls_in_a_loop_get_a_record_each() -> None:
    before = collected()
    for value in (0.5, 1.0):
        checks.check_jacobian(torch.exp, torch.tensor([value], dtype=torch.float64))
    first, second = new_records(before)
    assert first.id != second.id and second.check.endswith("(call 2)")


def test_the_mutant_suite_records_its_runs_as_measurements_not_the_library_calls_inside() -> None:
    before = collected()
    runs = sensitivity.evaluate(correct_cases()[:1], dtypes=(torch.float64,), checkers=("this checker",
                                                                                        "gradcheck (slow)"))
    made = new_records(before)
    assert [record.checker for record in made] == ["this checker", "gradcheck (slow)"]
    assert all(record.status == "measured" and record.measurement for record in made)
    assert [record.verdict for record in made] == [run.outcome for run in runs]


def test_a_chapters_gradcheck_calls_are_recorded_once_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in library.WATCHED:  # torch's own functions again after this test
        monkeypatch.setattr(torch.autograd, name, getattr(torch.autograd, name))
    library.watch_gradcheck()
    library.watch_gradcheck()  # once is enough: not wrapped twice
    assert torch.autograd.gradcheck._checks_watched and not hasattr(torch.autograd.gradcheck.__wrapped__,
                                                                     "_checks_watched")
    from torch.autograd.gradcheck import GradcheckError

    class Halved(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, grad):
            return grad

    before = collected()
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.sin, (x,))
    library.declare("Halved.apply", "fail")
    try:
        torch.autograd.gradcheck(Halved.apply, (x,), atol=1e-6)
    except GradcheckError:
        pass
    passed, failed = new_records(before)
    assert (passed.verdict, passed.status, passed.checker) == ("pass", "pass", "gradcheck")
    assert passed.code == {"call": "torch.autograd.gradcheck(torch.sin, (x,))"}
    assert passed.tolerance["atol"] == 1e-5 and passed.how == "gradcheck"
    assert (failed.verdict, failed.status) == ("fail", "expected failure")
    assert failed.tolerance["atol"] == 1e-6 and "Jacobian mismatch" in failed.message
    # The teaching side's own gradcheck runs (the mutant suite's) are left to it.
    before = collected()
    sensitivity.evaluate(correct_cases()[:1], dtypes=(torch.float64,), checkers=("gradcheck (slow)",))
    assert [record.checker for record in new_records(before)] == ["gradcheck (slow)"]
