"""What torch.func computed is recorded as such: the function and the input it was computed of, and which
transform (jacrev, jacfwd, hessian, jvp, vjp), read off the reader's code as for backward() and autograd.grad."""

from __future__ import annotations

import torch

import checks
import checks.teaching.provenance
from checks.teaching import records

from .test_folded_errors import forgot


def last() -> records.Record:
    return records.collected()[-1]


def cube(x: torch.Tensor) -> torch.Tensor:
    return x**3


def test_a_jacobian_of_torch_func_names_its_function_input_and_mode() -> None:
    x = torch.tensor([1.0, 2.0])
    J = torch.func.jacrev(cube)(x)
    checks.expect(J, [[3.0, 0.0], [0.0, 12.0]], "func: jacrev of the cube")
    assert (last().how, last().function, last().x) == ("jacrev", "cube(x)", [1.0, 2.0])
    H = torch.func.hessian(lambda t: cube(t).sum())(x)
    checks.expect(H, [[6.0, 0.0], [0.0, 12.0]], "func: hessian of the cube's sum")
    assert (last().how, last().x) == ("hessian", [1.0, 2.0])


def test_products_of_torch_func_name_their_function_and_input() -> None:
    x = torch.tensor([1.0, 2.0])
    u = torch.tensor([1.0, 0.0])
    _, jvp = torch.func.jvp(cube, (x,), (u,))
    checks.expect(jvp, [3.0, 0.0], "func: jvp of the cube")
    assert (last().how, last().function, last().x) == ("jvp", "cube(x)", [1.0, 2.0])
    _, vjp_fn = torch.func.vjp(cube, x)
    (vjp,) = vjp_fn(u)
    checks.expect(vjp, [3.0, 0.0], "func: vjp of the cube")
    assert (last().how, last().function, last().x) == ("vjp", "cube(x)", [1.0, 2.0])


def test_a_function_that_is_not_from_torch_func_stays_the_forward() -> None:
    x = torch.tensor([1.0, 2.0])
    double = lambda t: 2 * t  # noqa: E731 (a plain function the reader calls)
    y = double(x)
    checks.expect(y, [2.0, 4.0], "func: a plain call")
    assert (last().how, last().x) == ("forward", [])  # no transform, and no input read off the code


def test_gradcheck_that_raises_is_named_as_the_statement_that_raised() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with checks.raises(RuntimeError, "func: gradcheck of a backward that forgot grad"):
        torch.autograd.gradcheck(forgot, (x,))
    assert last().verdict == "pass" and last().how == "gradcheck"
    assert "torch.autograd.gradcheck raised GradcheckError" in checks.teaching.provenance.raised_words(
        last().how, "GradcheckError")
