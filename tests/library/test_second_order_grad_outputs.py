"""Second order with the caller's output gradient (gradgradcheck's grad_outputs), and what an engineer does to
accept inconclusive elements in a test (the README's recipe)."""

from __future__ import annotations

import re

import pytest
import torch

import checks
from checks import InconclusiveGradientError, assert_gradients, check_jacobian
from checks.core.errors import CheckInputError, DtypeError, NaNInputError
from checks.teaching.mutants import mutant

from ..toc import ROOT

F64 = torch.float64
X = torch.tensor([0.5, -1.0, 2.0], dtype=F64)
V = torch.tensor([1.0, -2.0, 0.5], dtype=F64)


def test_the_given_output_gradient_weighs_the_second_derivatives() -> None:
    """vjp(x, v) = 3x²·v for x³: its Jacobian with respect to x is diag(6x·v) with the v given, not a drawn one."""
    report = check_jacobian(lambda t: t**3, X, order=2, grad_outputs=V)
    assert report.outcome == "pass"
    n = X.numel()
    torch.testing.assert_close(report.autograd[:, :n], torch.diag(6 * X * V))
    torch.testing.assert_close(report.numerical[:, :n], torch.diag(6 * X * V), rtol=1e-7, atol=1e-9)
    drawn = check_jacobian(lambda t: t**3, X, order=2)
    assert not torch.allclose(drawn.autograd[:, :n], report.autograd[:, :n])


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_one_gradient_per_output_in_either_dtype_and_for_a_complex_output(dtype: torch.dtype) -> None:
    x = X.to(dtype)
    assert check_jacobian(lambda t: (t**3, t.sin()), x, order=2, grad_outputs=(V, -V)).outcome == "pass"
    z = torch.tensor([0.5 + 1j, -1.0 + 0.2j], dtype=torch.complex128 if dtype == F64 else torch.complex64)
    given = torch.tensor([1 + 1j, 2 - 1j], dtype=z.dtype)
    assert check_jacobian(lambda t: t * t, z, order=2, grad_outputs=given).outcome == "pass"


@pytest.mark.parametrize(("options", "error", "words"), [
    ({"grad_outputs": V}, CheckInputError, "pass order=2"),
    ({"order": 2, "grad_outputs": (V, V)}, CheckInputError, "holds 2 tensor(s), but f has 1"),
    ({"order": 2, "grad_outputs": V[:2]}, CheckInputError, "has shape (2,), but the output it weighs has shape (3,)"),
    ({"order": 2, "grad_outputs": V.long()}, DtypeError, "dtype int64"),
    ({"order": 2, "grad_outputs": V.to(torch.complex128)}, DtypeError, "must be real floating-point"),
    ({"order": 2, "grad_outputs": V * float("nan")}, NaNInputError, "not finite"),
    ({"order": 2, "grad_outputs": [1.0, 2.0, 3.0]}, CheckInputError, "got list of float"),
])
def test_a_wrong_output_gradient_is_named(options: dict, error: type, words: str) -> None:
    with pytest.raises(error, match="grad_outputs") as raised:
        check_jacobian(lambda t: t**3, X, **options)
    assert words in str(raised.value)


def readme_recipe() -> str:
    """The README's code that accepts inconclusive elements in a test (it uses f and x)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    (recipe,) = [block for block in blocks if "outcome" in block]
    return recipe


def test_the_readme_recipe_accepts_inconclusive_elements_and_still_fails_a_wrong_gradient() -> None:
    """Where only a kink leaves elements unjudged, the README's recipe passes (assert_gradients raises); a
    wrong gradient at the same point still fails it."""
    at_kink = torch.tensor([-1.0, 0.0, 2.0], dtype=F64)
    with pytest.raises(InconclusiveGradientError):
        assert_gradients(torch.relu, at_kink)
    namespace = {"checks": checks, "f": torch.relu, "x": at_kink}
    exec(readme_recipe(), namespace)
    report = namespace["report"]
    assert len(report.elements("inconclusive")) == 1 and len(report.elements("pass")) == 8  # of 3 × 3
    doubled = mutant(torch.relu, lambda x, grad: 2 * grad * (x > 0), "Doubled")
    with pytest.raises(AssertionError, match="wrong"):
        exec(readme_recipe(), {"checks": checks, "f": doubled, "x": at_kink})
