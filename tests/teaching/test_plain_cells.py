"""Plain cells: checks.expect and checks.raises beside the reader's PyTorch, their provenance and feedback, and
checks.each_cell re-running every cell per dtype in shadow namespaces (an IPython shell in this process)."""

from __future__ import annotations

import io
import math
import sys

import pytest
import torch

import checks
from checks.core.errors import CheckInputError
from checks.teaching import cells, records
from checks.teaching.rows import Rows, in_colour, line, rows_html


def last() -> records.Record:
    return records.collected()[-1]


def test_a_pass_prints_one_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor(3.0, requires_grad=True)
    y = x * x
    y.backward()
    checks.expect(x.grad, 6.0, "plain: d/dx x·x at 3")
    assert capsys.readouterr().out == "✓ pass  plain: d/dx x·x at 3: expected 6, observed 6 (float32, cpu)\n"
    record = last()
    assert (record.verdict, record.how, record.dtype, record.analytical_gradient, record.observed_gradient) == (
        "pass", "stored", "float32", 6.0, 6.0)
    assert record.gradient_formula == "6.0" and "checks.expect(x.grad, 6.0" in record.code["cell"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_printed_line_colours_its_verdict_where_it_shows_in_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.tensor(2.0, requires_grad=True)
    (x * torch.sin(x)).backward()
    checks.expect(x.grad, lambda x: x * torch.cos(x), "plain: colours, a demonstration", at=x, expected_failure="a demo")
    demonstration = last()
    checks.expect(x.grad, 0.0, "plain: colours, a problem")
    problem = last()
    checks.expect(x.grad, x.grad.item(), "plain: colours, a pass")
    passed = last()
    # The mark and verdict in the outcome's colour (ANSI codes), the words the same as the plain line's.
    assert line(passed, colour=True) == line(passed).replace("✓ pass", "\033[32m✓ pass\033[0m", 1)
    assert line(problem, colour=True).startswith("\033[31m✗ fail\033[0m  plain: colours, a problem: expected 0")
    assert line(demonstration, colour=True).startswith("\033[38;5;130m✗ fail, as declared: a demo\033[0m  ")
    # In colour in a terminal and in a notebook (an IPython kernel's stream), never into a file or a pipe.
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert in_colour(_Tty()) and not in_colour(io.StringIO())
    kernel_stream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})()
    assert in_colour(kernel_stream)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not in_colour(_Tty()) and not in_colour(kernel_stream)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr("sys.stdout", _Tty())
    checks.expect(x.grad, x.grad.item(), "plain: colours, printed")
    assert sys.stdout.getvalue().startswith("\033[32m✓ pass\033[0m  plain: colours, printed: expected ")


def test_a_function_expectation_is_evaluated_in_float64_at_the_input_the_dtype_holds() -> None:
    x = torch.tensor(0.7, requires_grad=True)
    (x * x).backward()
    checks.expect(x.grad, lambda x: 2 * x, "plain: 2x at 0.7", at=x)
    record = last()
    held = float(torch.tensor(0.7, dtype=torch.float32))
    assert record.x == held != 0.7 and record.analytical_gradient == 2 * held and record.verdict == "pass"
    # Built inside the function with the default dtype, it is still float64: evaluated under float64.
    checks.expect(x.grad, lambda x: torch.tensor(2.0) * x, "plain: 2x built inside", at=x)
    assert last().analytical_gradient == 2 * held


def test_a_record_names_the_function_and_input_the_code_differentiated() -> None:
    x = torch.tensor(3.0, requires_grad=True)
    y = x * x
    y.backward()
    checks.expect(x.grad, 6.0, "plain: subject of a stored gradient")
    assert (last().function, last().x) == ("x * x", 3.0)
    x.grad = None
    z = torch.sigmoid(x)
    z.sum().backward()
    checks.expect(x.grad, lambda x: torch.sigmoid(x) * (1 - torch.sigmoid(x)), "plain: subject written out", at=x)
    assert (last().function, last().x) == ("torch.sigmoid(x).sum()", 3.0)
    (g,) = torch.autograd.grad(x ** 3, x)
    checks.expect(g, 27.0, "plain: subject of a returned gradient")
    assert (last().function, last().x, last().how) == ("x ** 3", 3.0, "returned")
    # A module's parameter: the loss written out; the record's x is the batch at= gives first.
    model = torch.nn.Linear(2, 1, bias=False)
    X, Y = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5]])
    loss = ((model(X) - Y) ** 2).sum()
    loss.backward()
    checks.expect(model.weight.grad, lambda m, X, Y: 2 * (m(X) - Y).T @ X, "plain: subject of a parameter",
                  at=(model, X, Y))
    assert (last().function, last().x, last().verdict) == ("((model(X) - Y) ** 2).sum()", [[1.0, 2.0]], "pass")
    # Without at=, the input is still the data the loss reads, not the parameter's random values.
    model.zero_grad()
    ((model(X) - Y) ** 2).sum().backward()
    checks.expect(model.weight.grad, (2 * (model(X) - Y).T @ X).tolist(), "plain: parameter read without at=")
    assert (last().function, last().x) == ("((model(X) - Y) ** 2).sum()", [[1.0, 2.0]])
    # Not a gradient: the record names the value's own expression, and no input.
    checks.expect(x.is_leaf, True, "plain: not a gradient")
    assert (last().function, last().x) == ("x.is_leaf", [])


def test_a_blank_left_for_the_reader_says_what_to_fill_in_and_records_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor(2.0, requires_grad=True)
    (x * torch.sin(x)).backward()
    before = len(records.collected())
    checks.expect(x.grad, lambda x: ..., "plain: a blank function", at=x)
    checks.expect(x.grad, ..., "plain: a blank value")
    said = capsys.readouterr().out
    assert said.count("fill in the blank (...)") == 2 and "'plain: a blank value'" in said
    assert len(records.collected()) == before


def test_a_float32_tensor_as_expected_is_refused_with_the_rule() -> None:
    x = torch.tensor(3.0, requires_grad=True)
    (x * x).backward()
    with pytest.raises(CheckInputError, match="evaluated in float64 on the CPU.*lambda x"):
        checks.expect(x.grad, 2 * x, "plain: refused")
    checks.expect(x.grad, torch.tensor(6.0, dtype=torch.float64), "plain: float64 tensor")
    assert last().verdict == "pass"


def test_a_check_can_fail_and_never_passes_nan() -> None:
    checks.expect(torch.tensor(float("nan")), 1.0, "plain: nan observed")
    assert last().verdict == "fail"
    checks.expect(torch.tensor([1.0, 2.0]), [1.0, 2.0, 3.0], "plain: shape")
    assert last().verdict == "fail" and "shape" in last().message
    checks.expect(torch.tensor(0.0), float("nan"), "plain: undefined derivative", inconclusive="a kink")
    assert last().verdict == "inconclusive" and "Declared: a kink" in last().message
    checks.expect(None, None, "plain: x.grad still None")
    assert last().verdict == "pass"
    checks.expect(torch.tensor(1.0), None, "plain: a value where None was expected")
    assert last().verdict == "fail"


def test_bad_input_is_named() -> None:
    with pytest.raises(CheckInputError, match="label"):
        checks.expect(torch.tensor(1.0), 1.0, "")
    with pytest.raises(CheckInputError, match="unpack it"):
        checks.expect((torch.tensor(1.0),), 1.0, "plain: tuple")
    with pytest.raises(CheckInputError, match="exception class"):
        checks.raises("RuntimeError")


def test_provenance_of_values() -> None:
    x = torch.tensor(3.0, requires_grad=True)
    y = x * x
    (dy_dx,) = torch.autograd.grad(y, x)
    checks.expect(dy_dx, 6.0, "plain: returned")
    assert last().how == "returned"
    checks.expect(x.grad, None, "plain: nothing stored")
    assert last().how == "stored"
    checks.expect(x.is_leaf, True, "plain: a leaf")
    assert last().how == "forward" and last().verdict == "pass"
    z = x * 2
    checks.expect(z, 6.0, "plain: the forward's value")
    assert last().how == "forward"


@pytest.mark.parametrize(("code", "how", "words"), [
    ("x = torch.tensor([1, 2], requires_grad=True)", "constructor", "the constructor raised RuntimeError"),
    ("x -= 0.1", "in-place", "an in-place statement raised RuntimeError"),
    ("y.backward()\ny.backward()", "stored", "backward() raised RuntimeError"),
    ("torch.autograd.grad(y, x)\ntorch.autograd.grad(y, x)", "returned", "torch.autograd.grad raised RuntimeError"),
    ("torch.tensor([1.0]).backward()", "stored", "backward() raised RuntimeError"),
    ("torch.ones(2, requires_grad=True) @ torch.ones(3)", "forward", "the forward raised RuntimeError"),
    ("torch.autograd.gradcheck(torch.relu, (torch.zeros(1, dtype=torch.float64, requires_grad=True),))",
     "gradcheck", "torch.autograd.gradcheck raised GradcheckError"),
    ("y.numpy()", "conversion", "the conversion raised RuntimeError"),
    ("z = (x * 2).cpu().numpy() + 1", "conversion", "the conversion raised RuntimeError"),
    ("checks.estimate_gradient(lambda t: t, torch.tensor([1, 2]))", "checks", "the checks call raised DtypeError"),
])
def test_raises_says_which_statement_raised(code: str, how: str, words: str, tmp_path) -> None:
    path = tmp_path / "cell.py"
    path.write_text("import torch, checks\nx = torch.tensor(3.0, requires_grad=True)\ny = x * x\n"
                    "with checks.raises(Exception):\n" + "".join(f"    {item}\n" for item in code.splitlines()))
    exec(compile(path.read_text(), str(path), "exec"), {})
    record = last()
    assert (record.verdict, record.how) == ("pass", how), record.message
    assert words in line(record)


def test_raises_in_a_function_of_the_readers_code_names_the_statement_inside_it() -> None:
    def step(x):
        x -= 0.1 * x.grad

    x = torch.tensor(3.0, requires_grad=True)
    (x * x).backward()
    with checks.raises(RuntimeError, "plain: a step on a leaf"):
        step(x)
    assert last().how == "in-place" and last().function == "x -= 0.1 * x.grad"


def test_raises_fails_without_the_error_and_on_another_one() -> None:
    with checks.raises(RuntimeError, "plain: nothing raised"):
        torch.tensor(1.0) + 1
    assert last().verdict == "fail" and "no error was raised" in last().message
    with checks.raises(RuntimeError, "plain: another error"):
        raise ValueError("not this one")
    assert last().verdict == "fail" and "ValueError" in last().message
    with checks.raises(RuntimeError, "plain: match", match="second time"):
        x = torch.tensor(3.0, requires_grad=True)
        y = x * x
        y.backward()
        y.backward()
    assert last().verdict == "pass"


@pytest.mark.parametrize(("observed", "expected", "said"), [
    (12.0, 6.0, "2× the expected: a missing factor 2 in the expectation, or .grad accumulated over 2 backward()"),
    (-6.0, 6.0, "sign flipped"),
    (3.0, 6.0, "1/2 of the expected: an extra factor 2"),
    (4.0, 6.0, ""),
])
def test_a_failure_names_the_slip_the_numbers_show(observed: float, expected: float, said: str) -> None:
    x = torch.tensor(3.0, requires_grad=True)
    (observed / 6 * x * x).backward()
    checks.expect(x.grad, expected, "plain: slip")
    found = [text for text in last().message.splitlines() if text.startswith("Diagnosis: ")]
    assert (said in found[0]) if said else not found, last().message


def test_all_zeros_points_at_the_graph_for_autograd_and_at_a_flat_f_for_a_quotient() -> None:
    x = torch.tensor([0.2, 1.3], requires_grad=True)
    torch.round(x).sum().backward()
    checks.expect(x.grad, [1.0, 1.0], "plain: zeros stored", expected_failure="a demo")
    assert "did the graph reach x" in last().message
    h = 1e-3
    with torch.no_grad():
        slope = (torch.round(x + h) - torch.round(x - h)) / (2 * h)
    checks.expect(slope, [1.0, 1.0], "plain: zeros computed", expected_failure="a demo")
    assert last().how == "forward"
    assert "f did not change" in last().message and "graph" not in last().message


def test_a_missing_term_is_named_and_a_declared_failure_is_a_demonstration() -> None:
    x = torch.tensor(2.0, requires_grad=True)
    (x * torch.sin(x)).backward()
    checks.expect(x.grad, lambda x: x * torch.cos(x), "plain: product rule", at=x, expected_failure="a demo")
    record = last()
    assert record.verdict == "fail" and record.expected_failure
    assert "observed − expected = sin(x) at x: a missing term sin(x)?" in record.message
    assert math.isclose(record.observed_gradient - record.analytical_gradient, math.sin(2.0), rel_tol=1e-6)
    shown = rows_html([record])
    assert "as declared" in shown and "<details" in shown and "a missing term sin(x)" in shown


def test_a_failure_shows_pytorchs_message_in_view_and_folds_the_rest() -> None:
    with checks.raises(ValueError, "plain: wrong type"):
        torch.tensor(1.0, requires_grad=True).backward(torch.ones(3, 3))
    shown = rows_html([last()])
    view, folded = shown.split('<details class="checks-failure-details">', 1)
    assert "RuntimeError" in view and "Environment" not in view and "Environment" in folded


def test_recorded_gives_a_check_back_for_glue() -> None:
    checks.expect(torch.tensor(2.0), 2.0, "plain: glued")
    assert checks.recorded("plain: glued", dtype="float32").observed_gradient == 2.0
    assert [r.check for r in checks.records_of("plain: glued")] == ["plain: glued"]
    with pytest.raises(CheckInputError, match="no check 'plain: absent'"):
        checks.recorded("plain: absent")


# Re-execution -------------------------------------------------------------------------------------------


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    instance = InteractiveShell.instance()
    instance.user_ns.clear()
    instance.init_user_ns()
    instance.run_cell("import torch\nimport checks")
    yield instance
    cells.stop()


def run(shell, source: str) -> None:
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec


def test_each_cell_runs_in_every_dtype_and_shadows_keep_their_own_tensors(shell, capsys) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    run(shell, "x = torch.tensor(0.7, requires_grad=True)\ny = x * x")
    run(shell, "y.backward()\nchecks.expect(x.grad, lambda x: 2 * x, 'cells: 2x at 0.7', at=x)")
    rows = checks.records_of("cells: 2x at 0.7")
    assert sorted(r.dtype for r in rows) == ["float32", "float64"] and all(r.verdict == "pass" for r in rows)
    assert {r.dtype: r.x for r in rows} == {"float32": float(torch.tensor(0.7)), "float64": 0.7}
    # The reader's run is float32, as at a prompt; the shadow's x is its own float64 tensor.
    assert shell.user_ns["x"].dtype == torch.float32
    assert cells._active.shadows[0].namespace["x"].dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32
    shown = capsys.readouterr().out
    assert "(float32, cpu)" in shown and "(float64, cpu)" in shown


def test_rows_of_one_cell_are_shown_together_after_it(shell, capsys) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    capsys.readouterr()
    run(shell, "x = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()\n"
               "checks.expect(x.grad, 6.0, 'cells: a')\nchecks.expect(x.grad, 6.0, 'cells: b')")
    lines = capsys.readouterr().out.strip().splitlines()
    assert [(text.split(": ")[1], text[text.rindex("("):]) for text in lines] == [
        ("a", "(float32, cpu)"), ("a", "(float64, cpu)"), ("b", "(float32, cpu)"), ("b", "(float64, cpu)")]


def test_a_value_of_a_fixed_dtype_is_one_row_however_many_runs_made_it(shell, capsys) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    capsys.readouterr()
    run(shell, "x = torch.tensor(3.0, dtype=torch.float32, requires_grad=True)\n(x * x).backward()\n"
               "checks.expect(x.grad, 6.0, 'cells: fixed float32')")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("(float32, cpu)"), lines
    assert [record.dtype for record in checks.records_of("cells: fixed float32")] == ["float32"]


def test_an_error_in_a_shadow_fails_the_cell_and_names_the_dtype(shell) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    result = shell.run_cell("assert torch.get_default_dtype() == torch.float32, 'not float32'")
    assert not result.success
    assert "in float64 on cpu" in "".join(getattr(result.error_in_exec, "__notes__", []))


def test_each_cell_refuses_tensors_made_before_it(shell) -> None:
    run(shell, "x = torch.ones(2)")
    result = shell.run_cell("checks.each_cell(dtypes=('float32', 'float64'))")
    assert isinstance(result.error_in_exec, CheckInputError) and "x exist" in str(result.error_in_exec)
    shell.run_cell("del x")
    result = shell.run_cell("checks.each_cell(dtypes=('float64',))")
    assert isinstance(result.error_in_exec, CheckInputError) and "float32 on the cpu" in str(result.error_in_exec)


def test_shadows_draw_the_same_random_numbers_as_the_reader(shell) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    run(shell, "torch.manual_seed(0)\nw = torch.randn(3)")
    run(shell, "v = torch.randn(3)")
    shadow = cells._active.shadows[0].namespace
    for name in ("w", "v"):
        assert torch.allclose(shadow[name].float(), shell.user_ns[name], atol=1e-6)
    assert not torch.equal(shell.user_ns["w"], shell.user_ns["v"])


def test_rows_read_as_text_outside_a_page() -> None:
    checks.expect(torch.tensor(2.0), 2.0, "plain: text")
    assert repr(Rows([last()])) == "✓ pass  plain: text: expected 2, observed 2 (float32, cpu)"
    assert "object at 0x" not in repr(Rows([last()]))


def test_an_expectation_of_a_module_is_evaluated_on_a_float64_copy() -> None:
    torch.manual_seed(0)
    model, X, Y = torch.nn.Linear(3, 1), torch.randn(4, 3), torch.randn(4, 1)
    torch.nn.MSELoss()(model(X), Y).backward()

    def dL_db(model, X, Y):
        assert model.bias.dtype == X.dtype == torch.float64
        return 2 / len(X) * (model(X) - Y).sum(dim=0)

    checks.expect(model.bias.grad, dL_db, "module: dL/db", at=(model, X, Y))
    record = last()
    assert (record.verdict, record.how, record.gradient_formula) == ("pass", "stored", "dL_db at (model, X, Y)")
    assert model.bias.dtype == torch.float32  # the reader's layer is untouched


def test_at_a_plain_prompt_without_source_the_call_that_raised_is_still_named() -> None:
    import subprocess
    import sys

    pasted = ("import torch, checks\nx = torch.tensor(3.0, requires_grad=True)\n(g,) = torch.autograd.grad(x**3, x)\n"
              "with checks.raises(RuntimeError, 'no graph'):\n    torch.autograd.grad(g, x)\n\n"
              "y = x * x\ny.backward()\nwith checks.raises(RuntimeError, 'twice'):\n    y.backward()\n")
    result = subprocess.run([sys.executable, "-"], input=pasted, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and len(lines) == 2, result.stderr
    assert "observed torch.autograd.grad raised RuntimeError" in lines[0]
    assert "observed backward() raised RuntimeError" in lines[1]


def test_each_cell_seeds_the_page_so_records_reproduce(shell) -> None:
    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    run(shell, "checks.expect(torch.rand(()), 2.0, 'cells: seeded', tolerance=None)")
    rows = checks.records_of("cells: seeded")
    assert {row.environment["seed"] for row in rows} == {0}
    assert rows[-1].observed_gradient == torch.rand((), generator=torch.Generator().manual_seed(0)).item()


def test_a_value_the_code_computed_names_what_it_was_computed_from() -> None:
    x = torch.tensor(1.0)
    h = 1e-3
    estimate = (torch.exp(x + h) - torch.exp(x)) / h
    checks.expect(estimate, torch.exp, "plain: a forward difference of exp", at=x, how="numerical",
                  tolerance=checks.numerical_tolerance(x.dtype, "forward", step=h, f_scale=3.0))
    record = last()
    assert (record.function, record.x, record.how, record.verdict) == (
        "(torch.exp(x + h) - torch.exp(x)) / h", 1.0, "numerical", "pass"), record.message


def test_an_estimate_is_checked_as_numerical_with_how_it_was_made() -> None:
    x = torch.tensor(0.4, dtype=torch.float64)
    estimate = checks.estimate_gradient(lambda x: torch.sin(10 * x), x, "richardson")
    checks.expect(estimate, lambda x: 10 * torch.cos(10 * x), "plain: Richardson of sin 10x", at=x,
                  tolerance="estimate", weak="coarse on purpose")
    record = last()
    assert (record.verdict, record.how, record.method, record.evaluations, record.weak_reason) == (
        "pass", "numerical", "richardson", 6, "coarse on purpose"), record.message
    assert len(record.step) == 3 and record.error_estimate > 0
    assert record.tolerance["reason"].startswith("from the estimate's own error estimate")
    # Shown with its result: the steps, the evaluations of f and the error estimate.
    assert f"h from {record.step[0]:.2g} to {record.step[-1]:.2g}, 6 evaluations of f, error estimate" in rows_html([record])
    # An allowance as large as the expected value cannot fail a wrong gradient: recorded as a failure.
    huge = checks.Tolerance(rtol=0.0, atol=100.0, reason="far too large")
    checks.expect(estimate, lambda x: 10 * torch.cos(10 * x), "plain: an allowance that cannot fail", at=x,
                  tolerance=huge)
    assert last().verdict == "fail" and last().message.startswith("Cannot discriminate")
    with pytest.raises(CheckInputError, match="only \"estimate\""):
        checks.expect(x, 1.0, "plain: a tolerance by name on a tensor", tolerance="estimate")
    with pytest.raises(CheckInputError, match="weak= is the reason"):
        checks.expect(x, 0.4, "plain: weak without a reason", weak=True)  # type: ignore[arg-type]


def test_a_weak_pass_says_so_beside_its_verdict() -> None:
    x = torch.tensor([0.1, 1.2, -0.7, 2.5])
    estimate = checks.estimate_gradient(lambda x: torch.logsumexp(x, 0), x, "central")
    coarse = checks.Tolerance(rtol=0.0, atol=0.01, reason="coarse on purpose")
    checks.expect(estimate, lambda x: torch.softmax(x, 0), "plain: a coarse allowance", at=x, tolerance=coarse,
                  weak="a demonstration of a coarse allowance")
    record = last()
    assert record.verdict == "pass" and record.weak and record.detectable_relative_error > 0.1
    assert "— weak: its allowance would pass a gradient up to" in line(record)
    page = rows_html([record])
    assert "checks-weak-note" in page and "Declared weak: a demonstration of a coarse allowance" in page


def test_an_estimate_of_a_defined_function_names_what_the_function_returns() -> None:
    def f(x):
        """e^(10x)"""
        return torch.exp(10 * x)

    x = torch.tensor(0.5, dtype=torch.float64)
    estimate = checks.estimate_gradient(f, x, "richardson")
    checks.expect(estimate, lambda x: 10 * torch.exp(10 * x), "plain: an estimate of a defined f", at=x,
                  tolerance="estimate")
    assert last().function == "torch.exp(10 * x)"


def test_a_raise_row_has_the_dtype_of_the_tensors_its_statement_read(tmp_path) -> None:
    """torch.relu(z) on a complex128 z is a complex128 row in a float32 run; a constructor reads no tensor
    and keeps the run's default dtype."""
    path = tmp_path / "cell.py"
    path.write_text("import torch, checks\n"
                    "z = torch.tensor([1 + 2j], dtype=torch.complex128)\n"
                    "with checks.raises(NotImplementedError, 'plain: relu of complex'):\n"
                    "    torch.relu(z)\n"
                    "with checks.raises(RuntimeError, 'plain: integer leaf'):\n"
                    "    n = torch.tensor(3, requires_grad=True)\n")
    exec(compile(path.read_text(), str(path), "exec"), {})
    relu, integer = records.collected()[-2:]
    assert (relu.verdict, relu.dtype, integer.verdict, integer.dtype) == (
        "pass", "complex128", "pass", str(torch.get_default_dtype()).removeprefix("torch."))


def test_other_runs_that_read_as_the_reader_s_are_folded_and_any_difference_stays_in_view(shell) -> None:
    from bs4 import BeautifulSoup

    from checks.teaching.rows import rows_html

    run(shell, "checks.each_cell(dtypes=('float32', 'float64'))")
    run(shell, "x = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()\n"
               "checks.expect(x.grad, 6.0, 'fold: same')\n"
               "checks.expect(torch.tensor(0.1).item(), 0.1, 'fold: differs')\n"
               "checks.expect(x.grad, 7.0, 'fold: fails', expected_failure='on purpose')")
    reader = ("float32", "cpu")
    records = [*checks.records_of("fold: same"), *checks.records_of("fold: differs"), *checks.records_of("fold: fails")]
    soup = BeautifulSoup(rows_html(records, reader), "html.parser")
    folded = {row["id"] for row in soup.select("tr.checks-run-folded")}
    same = {r.dtype: r.id for r in checks.records_of("fold: same")}
    # Only the float64 row of the check whose runs read alike is folded: 0.1 reads otherwise in float32,
    # and a failure is never folded.
    assert folded == {same["float64"]}
    assert soup.select_one("div.checks-table-box > details.checks-runs summary").get_text() == \
        "1 more row (float64 · cpu), reading as the float32 row of the same check: the same values, a pass"
    # Without the reader's run named, every row is in view.
    assert not BeautifulSoup(rows_html(records), "html.parser").select("tr.checks-run-folded")


def test_raises_reads_a_tensor_through_its_cast_in_the_casts_dtype() -> None:
    x = torch.tensor([1.0, 2.0])  # float32
    wanted = torch.float64
    for label, statement in [("plain: cast double", lambda: torch.linalg.inv(x.double().reshape(1, 2))),
                             ("plain: cast to", lambda: torch.linalg.inv(x.to(torch.float64).reshape(1, 2))),
                             ("plain: cast to a name", lambda: torch.linalg.inv(x.to(wanted).reshape(1, 2))),
                             ("plain: cast dtype=", lambda: torch.linalg.inv(x.to(dtype=torch.float64)[None]))]:
        with checks.raises(RuntimeError, label):
            statement()
        assert last().dtype == "float64", (label, last().dtype)
    with checks.raises(RuntimeError, "plain: no cast"):
        torch.linalg.inv(x.reshape(1, 2))
    assert last().dtype == "float32"
    with checks.raises(RuntimeError, "plain: cast by a type's name"):  # not a device: read as unknown
        torch.linalg.inv(x.type("torch.DoubleTensor").reshape(1, 2))
    assert last().verdict == "pass"
