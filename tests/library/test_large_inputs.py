"""Large checks: the search holds only the elements at which f changed (an elementwise f's diagonal), evaluates
in chunks, and still judges every element, the flat ones included. (Cost is measured by benchmarks/scale.py,
never asserted here.)"""

from __future__ import annotations

import pytest
import torch

from checks import check_jacobian
from checks.teaching.mutants import mutant

N = 2048  # four chunks of columns in the first batch of steps, in float64


def silu_derivative(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_an_elementwise_check_of_many_elements_passes_with_an_exact_zero_off_the_diagonal(dtype) -> None:
    x = torch.linspace(-3.0, 3.0, N, dtype=torch.float64).to(dtype)
    report = check_jacobian(torch.nn.functional.silu, x)
    assert report.outcome in (("pass",) if dtype == torch.float64 else ("pass", "inconclusive")), report.summary()
    assert report.outcome != "fail"
    diagonal = torch.eye(N, dtype=torch.bool)
    assert bool((report.numerical[~diagonal] == 0).all())
    expected = silu_derivative(x.to(torch.float64))
    judged = report.converged.diagonal()
    tolerance = {"rtol": 1e-9, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-3, "atol": 1e-4}
    assert torch.allclose(report.numerical.diagonal()[judged], expected[judged], **tolerance)
    # The flat elements are judged by their allowance, not passed by default: every one in float64 (in
    # float32 those between two derivatives near 0, where silu' changes sign, are too uncertain).
    if dtype == torch.float64:
        assert bool(report.converged[~diagonal].all())


def test_one_wrong_element_among_many_is_failed_and_named() -> None:
    def backward(x, g):
        gradient = g * silu_derivative(x)
        gradient[1234] *= 1 + 1e-6
        return gradient

    x = torch.linspace(-3.0, 3.0, N, dtype=torch.float64)
    report = check_jacobian(mutant(torch.nn.functional.silu, backward, "Silu"), x)
    assert report.outcome == "fail"
    assert report.mismatch.nonzero().tolist() == [[1234, 1234]]


def test_a_gradient_leaking_into_the_flat_elements_is_failed() -> None:
    # A backward that adds 1e-9 of every other element's gradient: wrong where f does not depend on x_j at all
    # (an element the search never held until the mismatch).
    def backward(x, g):
        return g * silu_derivative(x) + 1e-9 * (g.sum() - g)

    x = torch.linspace(-3.0, 3.0, 512, dtype=torch.float64)
    report = check_jacobian(mutant(torch.nn.functional.silu, backward, "Leak"), x)
    assert report.outcome == "fail"
    off = ~torch.eye(512, dtype=torch.bool)
    assert bool(report.mismatch[off].all()) and not bool(report.mismatch[~off].any())


def test_the_points_reused_from_chunk_to_chunk_hold_what_each_evaluation_needs(monkeypatch) -> None:
    # The block of points is kept between chunks with only the perturbed entries put back: an f that returns
    # its input (the values share the points' memory) or changes it in place must not leak into the next chunk.
    import checks.core.estimate as estimate

    monkeypatch.setattr(estimate, "CHUNK_BYTES", 2 * 64 * 8 * 8)  # eight columns a chunk: many chunks
    x = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    identity = check_jacobian(lambda t: t, x)
    assert identity.outcome == "pass"
    assert torch.allclose(identity.numerical, torch.eye(64, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    changed = check_jacobian(lambda t: t.mul_(2) ** 2, x)
    assert not changed.mismatch.any()  # every chunk's estimate is of 4t², as autograd's Jacobian
    assert torch.allclose(changed.numerical, torch.diag(8 * x), rtol=1e-9, atol=1e-12)
