"""Autograd's Jacobian is what f's backward returns, however it is obtained: where f has more outputs than
checked inputs it is read from the backward differentiated with respect to its output gradient, and where
it has many outputs the backward runs batched by vmap; each is compared with one plain backward of a random
output gradient, and one backward per output takes over where they differ (engineer trial 5: a scatter
that drops repeated indices had passed, and a gradient computed in numpy had failed). So in forward mode:
jacfwd's columns against one plain jvp."""

from __future__ import annotations

import pytest
import torch

from checks import assert_gradients, check_jacobian
from checks.core.autograd import DOUBLE_BACKWARD, _the_backward_s
from checks.core.forward import DUAL_NUMBERS
from checks.teaching.mutants import BatchReversed, mutant

F64 = torch.float64
DTYPES = (torch.float64, torch.float32)
NAMES = {torch.float64: "float64", torch.float32: "float32"}


class Lookup(torch.autograd.Function):
    """An embedding lookup, table[idx]; its backward scatters the output gradient back into the table."""

    @staticmethod
    def forward(ctx, table, idx):
        ctx.save_for_backward(idx)
        ctx.rows = table.shape[0]
        return table[idx]

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        return g.new_zeros((ctx.rows, *g.shape[1:])).index_add_(0, idx, g), None


class LookupDroppingRepeats(Lookup):
    """The classic scatter bug: gx[idx] += g writes a repeated index once, so its other lookups are lost.
    autograd's derivative of that write with respect to g counts every lookup: the right gradient."""

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        gx = g.new_zeros((ctx.rows, *g.shape[1:]))
        gx[idx] += g
        return gx, None


def table(dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(6, 2, dtype=dtype, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("lookups", [[2, 5, 1, 5, 3, 0, 1, 0], [2, 5, 1, 5, 0]], ids=["more-outputs", "fewer"])
def test_a_scatter_that_drops_repeated_indices_fails_whatever_the_number_of_outputs(
        dtype: torch.dtype, lookups: list[int]) -> None:
    idx = torch.tensor(lookups)
    assert check_jacobian(Lookup.apply, table(dtype), idx).outcome == "pass"
    report = check_jacobian(LookupDroppingRepeats.apply, table(dtype), idx, names=["table", "idx"])
    assert report.outcome == "fail" and "input `table` is wrong" in report.wrong_gradients()
    # The lost lookups, element by element: rows 5 (and 1, 0 where they repeat), both columns.
    repeated = {i for i in lookups if lookups.count(i) > 1}
    assert {e.index[0] for e in report.elements() if e.verdict == "fail"} == repeated


class OuterWithNumpy(torch.autograd.Function):
    """x[i]·w[j], with w's gradient computed outside autograd (numpy, as a custom kernel would): right."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x[:, None] * w[None, :]

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gw = torch.from_numpy((g.detach().numpy() * x.detach().numpy()[:, None]).sum(0))
        return (g * w).sum(1), gw


def test_a_gradient_computed_outside_autograd_is_read_as_the_backward_returns_it() -> None:
    x, w = torch.tensor([0.3, -1.2, 0.8], dtype=F64), torch.tensor([1.1, -0.4, 0.6, 2.0], dtype=F64)
    report = check_jacobian(OuterWithNumpy.apply, x, w)
    assert report.outcome == "pass", report.message()
    assert report.method != DOUBLE_BACKWARD and "differs from its own derivative" in report.note


class OuterWithAConstantTerm(torch.autograd.Function):
    """x[i]·w[j], whose x gradient adds a term not multiplied by the output gradient (an affine backward)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, w)
        return x[:, None] * w[None, :]

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None, None
        x, w = ctx.saved_tensors
        return (g * w).sum(1) + 0.5 * w.sum(), (g * x[:, None]).sum(0)


@pytest.mark.parametrize("undefined", [True, False], ids=["undefined-checked", "undefined-not-checked"])
def test_a_backward_term_that_ignores_the_output_gradient_is_a_wrong_gradient(undefined: bool) -> None:
    x, w = torch.tensor([0.3, -1.2, 0.8], dtype=F64), torch.tensor([1.1, -0.4, 0.6, 2.0], dtype=F64)
    report = check_jacobian(OuterWithAConstantTerm.apply, x, w, names=["x", "w"], check_undefined_grad=undefined)
    assert report.outcome == "fail"
    assert "input `x` is wrong" in report.wrong_gradients() and "input `w`" not in report.wrong_gradients()
    with pytest.raises(AssertionError, match="input `x` is wrong"):
        assert_gradients(OuterWithAConstantTerm.apply, x, w, names=["x", "w"], check_undefined_grad=undefined)


# sin, its backward computed in float32 (the engine casts the result back to float64).
SINE_IN_FLOAT32 = mutant(torch.sin, lambda x, g: g.float() * x.float().cos(), "SineInFloat32")


def test_batched_rows_that_a_plain_backward_does_not_reproduce_give_way_to_one_backward_per_output() -> None:
    report = check_jacobian(SINE_IN_FLOAT32, torch.linspace(-2.0, 2.0, 6, dtype=F64))
    assert report.outcome == "fail" and report.method == "torch.autograd.grad"
    assert "is_grads_batched=True differ from a plain backward by more than float64's rounding" in report.note


class CopyWithAWrongBatchedJvp(torch.autograd.Function):
    """A copy whose jvp is right called plainly, but batched by torch.func.jacfwd hands each column another's."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        return BatchReversed.apply(t)


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_jacfwd_columns_that_a_plain_jvp_does_not_reproduce_give_way_to_dual_numbers(dtype: torch.dtype) -> None:
    report = check_jacobian(CopyWithAWrongBatchedJvp.apply, torch.linspace(-1.0, 1.0, 6, dtype=dtype), mode="forward")
    assert report.outcome == "pass", report.message()
    assert report.method == DUAL_NUMBERS and "torch.func.jacfwd's columns differ from a plain jvp" in report.note


def test_a_table_is_the_backward_s_up_to_rounding_and_not_one_element_more() -> None:
    leaf = torch.linspace(-1.0, 1.0, 3, dtype=F64).requires_grad_(True)
    value = torch.outer(leaf, torch.arange(1.0, 5.0, dtype=F64)).reshape(-1)  # 12 outputs
    rows = torch.stack([torch.autograd.grad(value, leaf, e, retain_graph=True)[0] for e in torch.eye(12, dtype=F64)])
    assert _the_backward_s(rows, value, leaf)
    assert _the_backward_s(rows * (1 + 4 * torch.finfo(F64).eps), value, leaf)
    wrong = rows.clone()
    wrong[7, 1] *= 1 + 1e-9
    assert not _the_backward_s(wrong, value, leaf)


def test_a_backward_that_is_its_own_derivative_keeps_the_columns() -> None:
    # The shortcut stays where it holds: a sample of a large input pays per sampled element.
    x = torch.randn(2_000, dtype=F64, generator=torch.Generator().manual_seed(3))
    report = check_jacobian(torch.tanh, x, sample=4)
    assert report.outcome == "pass" and report.method == DOUBLE_BACKWARD and report.note == ""
