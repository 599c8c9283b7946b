"""checks.passes: scripted passes on one leaf, each judged against the analytical prediction."""

from __future__ import annotations

import pytest
import torch

import checks
from checks.passes import NON_LEAF_WARNING, SECOND_BACKWARD, Step, plain

SQUARE = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule: d/dx x² = 2x")
CUBE = checks.Expectation("x**3", lambda x: x**3, "3*x**2", lambda x: 3 * x**2, "power rule")
CUBE_SLOPE = checks.Expectation("3*x**2", lambda x: 3 * x**2, "6*x", lambda x: 6 * x, "power rule")


def run(steps: list[Step], **options) -> checks.PassTable:
    return checks.run_passes(SQUARE, 3.0, steps, devices="cpu", **options)


def test_backward_accumulates_six_then_twelve_and_a_reset_gives_six_again() -> None:
    passes = run([Step("backward"), Step("backward"), Step("backward", reset="x.grad = None")])
    assert [plain(p.grad) for p in passes] == [6.0, 12.0, 6.0]
    assert [plain(p.expected.grad) for p in passes] == [6.0, 12.0, 6.0]
    assert all(p.record.how == "stored" and p.record.verdict == "pass" for p in passes)
    assert plain(passes.one(3).after_reset) == "none"
    record = passes.one(2).record
    assert (record.analytical_gradient, record.observed_gradient) == (12.0, 12.0)
    assert (record.input_shape, record.dtype, record.device) == ([], "float64", "cpu")
    assert record.executed and record.tolerance["reason"]


def test_a_graph_that_saves_nothing_walks_twice_and_the_wrong_prediction_is_an_unexpected_failure() -> None:
    # The prediction assumes f saves tensors; a sum saves none, so PyTorch walks its graph again.
    total = checks.Expectation("x.sum()", lambda x: x.sum(), "ones_like(x)", torch.ones_like, "sum rule")
    passes = checks.run_passes(total, [3.0], [Step("backward"), Step("backward", fresh_forward=False)], devices="cpu")
    surprise = passes.one(2)
    assert surprise.expected.error == SECOND_BACKWARD and surprise.error is None
    assert surprise.record.observed_gradient == [2.0] == surprise.record.analytical_gradient
    # The derivative is right, but what was predicted (the error, x.grad left at 1) did not happen.
    assert surprise.record.verdict == "fail" and not surprise.record.expected_failure
    assert "none was raised" in surprise.record.message and "x.grad is [2], expected [1]" in surprise.record.message


def test_autograd_grad_returns_six_and_leaves_grad_none_then_untouched() -> None:
    passes = run([Step("grad"), Step("backward"), Step("grad")])
    first, _, last = passes
    assert plain(first.returned) == 6.0 and first.grad is None
    assert first.record.how == "returned" and first.record.observed_gradient == 6.0
    assert plain(last.returned) == 6.0 and plain(last.grad) == 6.0
    assert all(p.record.passed for p in passes)


def test_second_backward_through_a_freed_graph_is_a_captured_error() -> None:
    passes = run([Step("backward"), Step("backward", fresh_forward=False), Step("backward")])
    failed = passes.one(2)
    assert failed.error is not None and SECOND_BACKWARD in failed.error
    assert failed.expected.error == SECOND_BACKWARD
    assert plain(failed.grad) == 6.0  # nothing was added before the error
    assert failed.record.verdict == "fail" and failed.record.expected_failure
    assert failed.record.observed_gradient is None and SECOND_BACKWARD in failed.record.message
    # The table keeps a row short with the error's first clause; the record keeps the whole text.
    assert failed.row()["error raised"] == SECOND_BACKWARD + " …"
    assert "retain_graph=True" in failed.error and "retain_graph=True" in failed.record.message
    assert plain(passes.one(3).grad) == 12.0 and passes.one(3).record.passed


def test_retain_graph_lets_the_same_graph_be_walked_again() -> None:
    passes = run([Step("backward", retain_graph=True), Step("backward", fresh_forward=False)])
    assert [plain(p.grad) for p in passes] == [6.0, 12.0]
    assert all(p.error is None and p.record.passed for p in passes)


def test_non_leaf_grad_is_none_with_the_real_warning_and_retain_grad_stores_it() -> None:
    of_h = checks.Expectation("h*h", lambda h: h * h, "2*h", lambda h: 2 * h, "power rule")
    records, warning = checks.non_leaf_passes(of_h, lambda x: x * x, "x*x", 3.0)
    without, retained = records
    assert NON_LEAF_WARNING in warning and "retain_grad()" in warning
    assert without.observed_gradient is None and without.analytical_gradient == 18.0
    assert without.verdict == "fail" and without.expected_failure
    assert retained.observed_gradient == 18.0 and retained.passed and not retained.expected_failure
    assert without.x == 9.0 and without.how == retained.how == "stored"


def test_non_leaf_refuses_an_inner_function_that_returns_a_leaf() -> None:
    with pytest.raises(checks.CheckInputError, match="non-leaf"):
        checks.non_leaf_passes(SQUARE, lambda x: x.detach(), "x.detach()", 3.0)


def test_cube_gives_27_then_18_with_create_graph_and_an_error_without() -> None:
    first, second, without = checks.second_derivative_passes(CUBE, CUBE_SLOPE, 3.0)
    assert (first.observed_gradient, second.observed_gradient) == (27.0, 18.0)
    assert first.passed and second.passed and first.how == second.how == "returned"
    assert without.observed_gradient is None and without.expected_failure
    assert "does not require grad" in without.message


def test_second_derivative_refuses_a_second_expectation_that_is_not_the_first_derivative() -> None:
    with pytest.raises(checks.CheckInputError, match="first derivative"):
        checks.second_derivative_passes(CUBE, SQUARE, 3.0)


def test_allow_unused_returns_none_and_materialize_grads_returns_zeros() -> None:
    records = checks.unused_input_passes(SQUARE, 3.0, 1.0)
    by = {record.check.split(", ")[-1] + " " + record.check.split()[0]: record for record in records}
    assert by["plain d/du"].observed_gradient is None and "not have been used" in by["plain d/du"].message
    assert by["allow_unused=True d/dx"].observed_gradient == 6.0 and by["allow_unused=True d/dx"].passed
    assert by["allow_unused=True d/du"].observed_gradient is None and by["allow_unused=True d/du"].expected_failure
    assert by["materialize_grads=True d/du"].observed_gradient == 0.0 and by["materialize_grads=True d/du"].passed
    assert by["materialize_grads=True d/du"].analytical_gradient == 0.0


def test_zero_grad_of_module_and_optimizer_sets_none_and_set_to_none_false_zeros() -> None:
    passes = run([
        Step("backward"),
        Step("backward", reset="module.zero_grad()"),
        Step("backward", reset="optimizer.zero_grad()"),
        Step("backward", reset="optimizer.zero_grad(set_to_none=False)"),
    ])
    assert [plain(p.after_reset) for p in list(passes)[1:]] == ["none", "none", 0.0]
    assert [plain(p.grad) for p in passes] == [6.0, 6.0, 6.0, 6.0]
    assert all(p.record.passed for p in passes)


def test_table_has_the_separate_expected_and_observed_columns_and_embeds_records() -> None:
    passes = run([Step("grad"), Step("backward", reset="x.grad = None")])
    frame = passes.frame()
    assert list(frame.columns)[:6] == ["pass", "what was done", "expected .grad", "observed .grad",
                                       "expected returned", "observed returned"]
    assert {"shape", "dtype", "device"} <= set(frame.columns)
    assert frame["expected .grad after reset"].tolist() == ["no reset", "none"]
    html = passes._repr_html_()
    assert 'class="dataframe checks-passes"' in html and "application/vnd.checks.records+json" in html


def test_named_scripts_give_their_passes_distinct_record_ids() -> None:
    one, other = (run([Step("backward")], name=name)[0].record for name in ("first script", "second script"))
    assert one.check.startswith("first script: ") and one.id != other.id


def test_provenance_table_says_where_each_derivative_came_from() -> None:
    frame = checks.provenance_frame(run([Step("grad"), Step("backward")]).records)
    assert frame["where the derivative came from"].str.split(":").str[0].tolist() == ["returned", "stored"]
    assert {"shape", "dtype", "device"} <= set(frame.columns)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Step("forward"), "not a pass"),
        (lambda: Step("backward", reset="zero it"), "not a reset"),
        (lambda: run([]), "at least one pass"),
        (lambda: run([Step("backward", fresh_forward=False)]), "no forward has run"),
        (lambda: checks.run_passes("x*x", 3.0, [Step("backward")]), "Expectation"),
        (lambda: run([Step("backward")], dtype="int64"), "int64"),
        (lambda: checks.run_passes(SQUARE, float("nan"), [Step("backward")]), "NaN"),
        (lambda: checks.run_passes(SQUARE, [1.0, 2.0], [Step("backward")]), "scalar output"),
        (lambda: plain(torch.ones(2)), "one number"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(call, match) -> None:
    with pytest.raises(checks.CheckInputError, match=match):
        call()


def test_quote_shows_the_message_verbatim_escaped_and_wrapping() -> None:
    quote = checks.passes.Quote("see <github.com/pytorch/pytorch/pull/30531> & retry")
    assert repr(quote) == "see <github.com/pytorch/pytorch/pull/30531> & retry"
    assert "&lt;github.com/pytorch/pytorch/pull/30531&gt; &amp; retry" in quote._repr_html_()
    assert "overflow-wrap: anywhere" in quote._repr_html_()
