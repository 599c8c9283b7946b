"""checks.witness and checks.run_script: the reader's own PyTorch, run per dtype and device, and recorded."""

from __future__ import annotations

import json

import pytest
import torch

import checks
from checks.teaching.display import cell_text, records_html

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule: d/dx x² = 2x")
SECOND_BACKWARD = "Trying to backward through the graph a second time"


def stored(x):
    y = x * x
    y.backward()
    return x.grad


def returned(x):
    y = x * x
    (dy_dx,) = torch.autograd.grad(y, x)
    return dy_dx


def test_plan_shows_the_seed_record_literally_before_and_after_running() -> None:
    square_plan = checks.plan(SQUARE, x=3, dtypes=("float32", "float64"), devices="cpu")
    before = square_plan.one(dtype="float64").record().summary()
    assert repr(before) == ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": null, '
                            '"executed": false}')
    after = square_plan.run(stored).one(dtype="float64").summary()
    assert json.loads(repr(after)) == {"function": "x*x", "x": 3, "analytical_gradient": 6,
                                       "observed_gradient": 6, "executed": True}


def test_each_function_runs_on_a_fresh_leaf_per_dtype_and_its_source_is_recorded() -> None:
    seen = []

    def probe(x):
        seen.append((x.is_leaf, x.requires_grad, x.grad, x.dtype, id(x)))
        y = x * x
        y.backward()
        return x.grad

    results = checks.witness(SQUARE, 3.0, probe, stored, dtypes=("float32", "float64"), devices="cpu")
    assert len(results) == 4 and results.passed
    assert [(leaf, grad, none) for leaf, grad, none, _, _ in seen] == [(True, True, None)] * 2
    assert [dtype for *_, dtype, _ in seen] == [torch.float32, torch.float64]
    record = results.one(dtype="float32", check="x*x at x=3, by probe(x)")
    assert record.how == "stored" and record.observed_gradient == 6.0
    assert "seen.append" in record.code["probe"] and record.code["df"] == "lambda x: 2 * x"
    assert len({r.id for r in results}) == 4


@pytest.mark.parametrize(("source", "how"), [
    ("def g(x):\n    (d,) = torch.autograd.grad(x * x, x)\n    return d", "returned"),
    ("def g(x):\n    (d,) = torch.autograd.grad(x * x, x, create_graph=True)\n    return d", "create_graph"),
    ("def g(x):\n    return torch.func.jacrev(lambda t: t * t)(x)", "jacrev"),
    ("def g(x):\n    return torch.func.jacfwd(lambda t: t * t)(x)", "jacfwd"),
    ("def g(x):\n    _, pullback = torch.func.vjp(lambda t: t * t, x)\n    return pullback(torch.ones_like(x))[0]",
     "vjp"),
    ("def g(x):\n    return torch.func.jvp(lambda t: t * t, (x,), (torch.ones_like(x),))[1]", "jvp"),
])
def test_how_is_inferred_from_the_call_in_the_source(source: str, how: str, tmp_path) -> None:
    path = tmp_path / "code.py"
    path.write_text("import torch\n" + source + "\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    record = checks.witness(SQUARE, 3.0, namespace["g"], devices="cpu")[0]
    assert record.how == how and record.passed
    assert record.code["g"] == source


def test_how_that_cannot_be_inferred_is_refused_and_can_be_named() -> None:
    def central(x):  # a finite difference: no autograd call, nothing to infer from
        h = 1e-6
        with torch.no_grad():
            return (SQUARE.f(x + h) - SQUARE.f(x - h)) / (2 * h)

    with pytest.raises(checks.CheckInputError, match=r"cannot tell how central\(x\) observed"):
        checks.witness(SQUARE, 3.0, central, devices="cpu")
    numerical = checks.plan(SQUARE, 3.0, how="numerical", devices="cpu")
    record = numerical.run((central, "numerical"))[0]
    assert record.how == "numerical" and record.passed
    assert record.tolerance == numerical[0].tolerance.to_dict()  # the plan's numerical allowance, not autograd's
    both = checks.witness(SQUARE, 3.0, stored, (central, "numerical"), devices="cpu", step=1e-6)
    assert both.one(how="stored").tolerance == checks.default_tolerance("float64").to_dict()


def test_a_numerical_witness_records_the_step_its_code_used_or_none() -> None:
    h = 1e-6

    def central(x):
        with torch.no_grad():
            return (SQUARE.f(x + h) - SQUARE.f(x - h)) / (2 * h)

    # checks cannot read the step off the code: without step= or a tolerance, it says so instead of
    # deriving an allowance at a step of its own.
    with pytest.raises(checks.CheckInputError, match="cannot see the step your numerical code used"):
        checks.witness(SQUARE, 3.0, central, how="numerical", devices="cpu")
    record = checks.witness(SQUARE, 3.0, central, how="numerical", devices="cpu", step=h).one()
    assert record.step == h and record.method == "central" and record.passed
    assert f"h = {h:.3g}" in record.tolerance["reason"] and "the step your code used" in record.tolerance["reason"]
    assert record.tolerance == checks.numerical_tolerance("float64", "central", step=h, f_scale=9.0,
                                                          gradient_scale=6.0, derivative_scale=6.0).to_dict() | {
        "reason": record.tolerance["reason"]}
    given = checks.default_tolerance("float64").changed(atol=1e-8, reason="a bound written by hand")
    without = checks.witness(SQUARE, 3.0, central, how="numerical", devices="cpu", tolerance=given).one()
    assert without.step is None and without.tolerance["atol"] == 1e-8
    with pytest.raises(checks.CheckInputError, match="no code here is named how='numerical'"):
        checks.witness(SQUARE, 3.0, stored, devices="cpu", step=h)


def test_a_step_rule_gives_each_dtype_its_own_step_and_allowance() -> None:
    def step_for(x):
        return torch.finfo(x.dtype).eps ** (1 / 3) * 3.0

    def central(x):
        h = step_for(x)
        with torch.no_grad():
            return (SQUARE.f(x + h) - SQUARE.f(x - h)) / (2 * h)

    results = checks.witness(SQUARE, 3.0, central, how="numerical", devices="cpu", step=step_for,
                             dtypes=("float32", "float64"))
    for dtype in (torch.float32, torch.float64):
        record = results.one(dtype=str(dtype).removeprefix("torch."))
        assert record.step == step_for(torch.zeros((), dtype=dtype)) and record.passed
        assert f"h = {record.step:.3g}" in record.tolerance["reason"]
    with pytest.raises(checks.CheckInputError, match="step rule returned for x in float64.*greater than 0"):
        checks.witness(SQUARE, 3.0, central, how="numerical", devices="cpu", step=lambda x: -1.0)


def test_a_comment_naming_autograd_grad_says_nothing_about_how() -> None:
    def backward_then_copy(x):
        y = x * x
        y.backward()  # unlike torch.autograd.grad(y, x), this writes into x.grad
        return x.grad.clone()

    with pytest.raises(checks.CheckInputError, match="cannot tell how"):
        checks.witness(SQUARE, 3.0, backward_then_copy, devices="cpu")
    assert checks.witness(SQUARE, 3.0, (backward_then_copy, "stored"), devices="cpu")[0].passed


def test_expected_gradient_is_taken_at_the_input_rounded_to_each_dtype() -> None:
    results = checks.witness(SQUARE, 0.7, stored, dtypes=("float16", "float32", "float64"), devices="cpu")
    for record in results:
        rounded = torch.tensor(0.7, dtype=getattr(torch, record.dtype)).item()
        assert record.x == rounded and record.analytical_gradient == 2 * rounded
        assert record.passed, record.message
    assert results.one(dtype="float16").x != 0.7


@pytest.mark.parametrize(("code", "problem"), [
    (lambda x: torch.autograd.grad(x * x, x), r"returned a tuple of 1 tensor.*\(dy_dx,\) = torch.autograd.grad"),
    (lambda x: 6.0, "returned float, not a tensor"),
    (lambda x: torch.autograd.grad((x * x).sum(), x)[0].reshape(1, 1), r"shape \(1, 1\), but x has shape \(\)"),
])
def test_bad_code_functions_get_a_clear_error_naming_them(code, problem: str) -> None:
    with pytest.raises(checks.CheckInputError, match=problem) as caught:
        checks.witness(SQUARE, 3.0, (code, "returned"), devices="cpu")
    assert "<lambda>(x)" in str(caught.value)


def test_a_none_gradient_is_recorded_as_a_failure_with_a_clear_message() -> None:
    def forgot_backward(x):
        y = x * x  # noqa: F841 (the bug on show: no y.backward())
        return x.grad

    def forgot_backward_but_called_it_elsewhere(x):
        x * x
        _ = "y.backward()"  # a string is not a call: nothing to infer from
        return x.grad

    record = checks.witness(SQUARE, 3.0, (forgot_backward, "stored"), devices="cpu")[0]
    assert record.executed and record.verdict == "fail" and record.observed_gradient is None
    assert "forgot_backward(x) returned None" in record.message and "did it call backward()" in record.message
    with pytest.raises(checks.CheckInputError, match="cannot tell how"):
        checks.witness(SQUARE, 3.0, forgot_backward_but_called_it_elsewhere, devices="cpu")


def test_a_wrong_value_is_a_failed_record_with_the_code_in_the_failure_box() -> None:
    def doubled(x):
        y = x * x
        y.backward()
        y = x * x
        y.backward()  # a second backward() adds: 12, not 6
        return x.grad

    results = checks.witness(SQUARE, 3.0, doubled, devices="cpu")
    record = results[0]
    assert (record.verdict, record.observed_gradient, record.analytical_gradient) == ("fail", 12.0, 6.0)
    assert "Gradients are not close!" in record.message
    assert "a second backward() adds" in records_html(list(results))


def accumulation(x, see):
    y = x * x
    (dy_dx,) = torch.autograd.grad(y, x)
    see(dy_dx, expected=SQUARE.df(x), what="autograd.grad returns f'(x)", how="returned")
    see(x.grad, expected=None, what="x.grad is still None")
    y = x * x
    y.backward()
    see(x.grad, expected=SQUARE.df(x), what="backward() stores f'(x)")
    y = x * x
    y.backward()
    see(x.grad, expected=2 * SQUARE.df(x), what="a second backward() adds")
    with see.raises(SECOND_BACKWARD, expected=SQUARE.df(x), what="the same graph again", how="stored"):
        y.backward()
    see(x.grad, expected=2 * SQUARE.df(x), what="x.grad is unchanged by the failed pass")
    x.grad = None
    see(x.grad, expected=None, what="after x.grad = None")


def test_a_script_of_passes_on_one_leaf_records_accumulation_and_a_captured_error() -> None:
    results = checks.run_script(accumulation, x=3.0, expectation=SQUARE, devices="cpu")
    assert [r.check.removeprefix("accumulation: ") for r in results][:3] == [
        "autograd.grad returns f'(x)", "x.grad is still None", "backward() stores f'(x)"]
    assert [r.observed_gradient for r in results] == [6.0, None, 6.0, 12.0, None, 12.0, None]
    assert [r.analytical_gradient for r in results] == [6.0, None, 6.0, 12.0, 6.0, 12.0, None]
    assert [r.how for r in results] == ["returned", "stored", "stored", "stored", "stored", "stored", "stored"]
    raised = results[4]
    assert raised.verdict == "fail" and raised.expected_failure and SECOND_BACKWARD in raised.message
    assert all(r.passed for i, r in enumerate(results) if i != 4)
    assert "see(x.grad, expected=2 * SQUARE.df(x)" in raised.code["accumulation"]
    html = results._repr_html_()
    assert "expected (from the analytical derivative)" in html
    assert '<span data-field="check">a second backward() adds</span>' in html  # the script's name is not repeated
    assert "checks-failure" in html and "application/vnd.checks.records+json" in html
    assert results.one(what="a second backward() adds").observed_gradient == 12.0


def test_an_expected_python_number_is_read_in_float64_not_rounded_to_float32() -> None:
    def step(x, see):
        with torch.no_grad():
            x -= 0.6  # one step of a hand-written update: x = 2.4
        (x * x).backward()
        see(x.grad, expected=2 * (3.0 - 0.6), what="2x at 2.4, written as a Python number")

    record = checks.run_script(step, x=3.0, expectation=SQUARE, devices="cpu")[0]
    assert record.analytical_gradient == 2 * (3.0 - 0.6)  # 4.8 in float64, not float32's 4.800000190734863
    assert record.abs_error <= 1e-15 and record.passed


def test_an_error_that_does_not_come_or_differs_is_an_unexpected_failure() -> None:
    def no_error(x, see):
        y = x.sum()  # a sum saves no tensors: its graph can be walked twice
        y.backward()
        with see.raises(SECOND_BACKWARD, expected=torch.ones_like(x), what="sum walked twice", how="stored"):
            y.backward()

    def other_error(x, see):
        with see.raises(SECOND_BACKWARD, expected=torch.ones_like(x), what="wrong shape", how="stored"):
            x.sum().backward(torch.ones(3))

    quiet = checks.run_script(no_error, x=[3.0], expectation=SQUARE, devices="cpu")[0]
    assert quiet.verdict == "fail" and not quiet.expected_failure and "none was raised" in quiet.message
    other = checks.run_script(other_error, x=[3.0], expectation=SQUARE, devices="cpu")[0]
    assert other.verdict == "fail" and not other.expected_failure and "Mismatch in shape" in other.message


def test_script_arguments_and_refusals() -> None:
    def module_step(x, see, dtype, device):
        model = torch.nn.Linear(1, 1, bias=False, dtype=dtype, device=device)
        loss = model(x).sum()
        loss.backward()
        see(model.weight.grad, expected=x.sum().reshape(1, 1), what="weight.grad", how="stored")

    results = checks.run_script(module_step, x=[[1.0], [2.0]], function="sum(Wx)", source="d/dW sum(Wx) = sum(x)",
                                requires_grad=False, dtypes=("float32", "float64"), devices="cpu")
    assert [r.observed_gradient for r in results] == [[[3.0]], [[3.0]]] and results.passed
    assert results[0].gradient_formula and results[0].function == "sum(Wx)"

    def unnamed(x, see):
        see(x.detach() * 2, expected=SQUARE.df(x), what="a copy")

    with pytest.raises(checks.CheckInputError, match="cannot tell how this value was observed"):
        checks.run_script(unnamed, x=3.0, expectation=SQUARE, devices="cpu")
    with pytest.raises(checks.CheckInputError, match="a script may take x, see, dtype, device"):
        checks.run_script(lambda model, see: None, x=3.0, expectation=SQUARE)
    def twice_the_same(x, see):
        see(x.grad, expected=None, what="x.grad")
        see(x.grad, expected=None, what="x.grad")

    with pytest.raises(checks.CheckInputError, match="names two passes 'x.grad'"):
        checks.run_script(twice_the_same, x=3.0, expectation=SQUARE, devices="cpu")
    with pytest.raises(checks.CheckInputError, match="saw nothing"):
        checks.run_script(lambda x, see: None, x=3.0, expectation=SQUARE, devices="cpu")
    with pytest.raises(checks.CheckInputError, match="function= and source="):
        checks.run_script(accumulation, x=3.0)


def test_a_warning_caught_by_the_reader_is_kept_whole_and_read_back() -> None:
    import warnings

    def non_leaf(x, see):
        h = x * x
        (h * h).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            h_grad = h.grad
        see(h_grad, expected=2 * h, what="h.grad", how="stored", expected_failure=True, caught=caught)

    record = checks.run_script(non_leaf, x=3.0, expectation=SQUARE, devices="cpu")[0]
    assert record.verdict == "fail" and record.expected_failure and record.observed_gradient is None
    said = checks.captured(record)
    assert said.startswith("The .grad attribute of a Tensor that is not a leaf Tensor") and said.endswith(".)")
    assert checks.captured(checks.witness(SQUARE, 3.0, stored, devices="cpu")[0]) == ""


def test_plans_without_code_refuse_what_only_code_can_observe() -> None:
    with pytest.raises(checks.CheckInputError, match=r"observed by your code, not by checks"):
        checks.plan(SQUARE, 3.0, how="jacfwd", devices="cpu").run()
    with pytest.raises(checks.CheckInputError, match="pass the code too"):
        checks.plan(SQUARE, 3.0, devices="cpu").run(how="returned")
    with pytest.raises(checks.CheckInputError, match="is not a way of observing"):
        checks.witness(SQUARE, 3.0, (stored, "by hand"), devices="cpu")


def test_a_script_takes_a_tolerance_per_dtype() -> None:
    loose = checks.default_tolerance("float32").changed(rtol=1e-3, reason="a test of the per-dtype mapping")
    results = checks.run_script(accumulation, x=3.0, expectation=SQUARE, devices="cpu",
                                dtypes=("float32", "float64"), tolerance={"float32": loose})
    assert {r.tolerance["rtol"] for r in results if r.dtype == "float32"} == {1e-3}
    assert {r.tolerance["rtol"] for r in results if r.dtype == "float64"} == {1e-7}


def test_each_pass_row_carries_its_record_id_for_the_ledger_link() -> None:
    results = checks.run_script(accumulation, x=3.0, expectation=SQUARE, devices="cpu")
    html = results._repr_html_()
    assert all(f'<tr id="{record.id}" ' in html for record in results)
    assert len({record.id for record in results}) == len(results)


def test_provenance_table_and_plain_refuse_what_they_cannot_show() -> None:
    with pytest.raises(checks.CheckInputError, match="nothing to show"):
        checks.provenance_table([])
    with pytest.raises(checks.CheckInputError, match="a sequence of Records"):
        checks.provenance_table([{"how": "stored"}])
    with pytest.raises(checks.CheckInputError, match="glues one number"):
        checks.plain([1.0, 2.0])
    results = checks.witness(SQUARE, 3.0, stored, returned, devices="cpu")
    words = list(checks.provenance_frame(list(results))["where the derivative came from"])
    assert words == ["stored in .grad", "returned by autograd.grad"]
    assert checks.plain(results[0].observed_gradient) == 6.0 and checks.plain(None) == "none"


def test_a_quote_keeps_pytorch_s_text_and_its_line_breaks() -> None:
    # gradcheck writes a Jacobian one row per line; the quotation wraps long words but keeps those lines.
    message = "Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor([[0.5]])\n<analytical>"
    html = checks.Quote(message)._repr_html_()
    assert "white-space: pre-wrap" in html and "overflow-wrap: anywhere" in html
    assert "tensor([[0.5]])\n&lt;analytical&gt;</blockquote>" in html
    assert repr(checks.Quote(message)) == message


# model.weight.grad is stored: a parameter's .grad of a module the code uses ----------------------------------

LAYER = torch.nn.Linear(2, 1, bias=False).double()


def weight_gradient(x, see):
    model = torch.nn.Linear(2, 1, bias=False).to(x)
    (model(x) ** 2).sum().backward()
    W = model.weight.detach().double()
    expected = 2 * (x.double() @ W.T).T @ x.double()
    see(model.weight.grad, expected=expected, what="weight.grad", gradient="2 (XWᵀ)ᵀX")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
    see(grads[0], expected=expected, what="the optimizer's parameter's .grad", gradient="2 (XWᵀ)ᵀX")


def test_a_module_s_parameter_grad_is_recognised_as_stored() -> None:
    results = checks.run_script(weight_gradient, x=[[1.0, 2.0]], requires_grad=False, devices="cpu",
                                function="(model(x)**2).sum()", source="chain rule")
    assert [record.how for record in results] == ["stored", "stored"] and results.passed


def test_a_copy_of_a_grad_is_not_recognised_as_stored() -> None:
    def copied(x, see):
        model = torch.nn.Linear(2, 1, bias=False).to(x)
        model(x).sum().backward()
        see(model.weight.grad.clone(), expected=x.double(), what="a copy of weight.grad", gradient="X")

    with pytest.raises(checks.CheckInputError, match="cannot tell how"):
        checks.run_script(copied, x=[[1.0, 2.0]], requires_grad=False, devices="cpu", function="f", source="s")


def test_a_gradient_function_returning_a_global_module_s_parameter_grad_is_stored() -> None:
    def weight_grad(x):
        LAYER.weight.grad = None
        (LAYER(torch.ones(1, 2, dtype=x.dtype)) * x).sum().backward()
        return LAYER.weight.grad

    # d/dW_j of (W·ones) Σ_k x_k is Σ_k x_k for each j: [[2, 2]] at x = [[1, 1]], the weight's shape.
    weighted = checks.Expectation("(LAYER(ones) * x).sum(), by the weight", lambda x: x.sum(), "x.sum() per weight",
                                  lambda x: torch.full_like(x, float(x.sum())), "W·ones is linear in each W_j")
    record = checks.witness(weighted, [[1.0, 1.0]], weight_grad, devices="cpu").one()
    assert record.how == "stored" and record.passed and record.observed_gradient == [[2.0, 2.0]]


# How a row was observed is read for what happened -------------------------------------------------------------

def raising(x, see):
    y = x * x
    y.backward()
    with see.raises("Trying to backward through the graph a second time", expected=SQUARE.df(x), how="stored",
                    what="the walked graph again"):
        y.backward()
    x.grad = None
    see(x.grad, expected=None, what="after the reset")


def test_a_pass_whose_backward_raised_is_not_labelled_stored_by_backward() -> None:
    results = checks.run_script(raising, x=3.0, expectation=SQUARE, devices="cpu")
    words = [cell_text("how", record) for record in results]
    assert words == ["backward() raised RuntimeError: nothing stored", "read from .grad: none there"]


# A plain number as a tolerance --------------------------------------------------------------------------------

def test_a_plain_number_is_atol_and_rtol_and_says_it_came_from_the_reader() -> None:
    def off_by(delta):
        def observed(x):
            return torch.full_like(x, 6.0 + delta)
        return observed

    # At x = 3 the expected 6 allows t·(1 + 6) = 7e-6 with t = 1e-6.
    inside = checks.witness(SQUARE, 3.0, (off_by(6.9e-6), "returned"), tolerance=1e-6, devices="cpu").one()
    outside = checks.witness(SQUARE, 3.0, (off_by(7.1e-6), "returned"), tolerance=1e-6, devices="cpu",
                             expected_failure=True).one()
    assert inside.passed and not outside.passed
    assert inside.tolerance["rtol"] == inside.tolerance["atol"] == 1e-6 and inside.tolerance["plain"] is True
    assert inside.tolerance["reason"].startswith("a plain number given by the reader")
    assert cell_text("tolerance", inside) == "plain number 1e-06 (atol = rtol)"
    assert checks.Tolerance.from_dict(inside.tolerance).plain
    # A chapter's change of it carries a written reason: no longer the reader's plain number.
    changed = checks.Tolerance.plain_number(1e-6).changed(rtol=1e-5, reason="why")
    assert not changed.plain and "plain" not in changed.to_dict()
