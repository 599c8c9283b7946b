"""A correct gradient never fails on another machine: rounding in f, amplified k times, is injected
(checks.teaching.mutants.noisy: f × (1 + u·k·ε), u uniform in [-1, 1] afresh per evaluation, seeded), and a
correct backward must come out pass or inconclusive, never fail, while wrong backwards are still failed where
the noise is small. benchmarks/noise.py runs the full sweep (more seeds, every k, all of op_db) and prints it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from checks import check_jacobian
from checks.core.message import AMPLIFIED
from checks.teaching.mutants import correct_cases, hard_cases, noisy, scaled_cases, structural_cases

DTYPES = [torch.float64, torch.float32]
NAMES = {torch.float64: "float64", torch.float32: "float32"}
KS = (10.0, 1e3, 1e6)
SEEDS = range(3)
# A spread of op_db: elementwise, reductions, normalisations, matrix products and decompositions, two inputs.
OP_DB_SUBSET = {
    "atan2", "cdist", "cumprod", "matmul", "softmax", "nn.functional.layer_norm", "pow", "polar", "logsumexp",
    "sigmoid", "nn.functional.softplus", "prod", "linalg.det", "linalg.eigh", "linalg.inv", "linalg.solve",
    "linalg.pinv.singular", "linalg.svd", "special.log_ndtr",
}


def outcomes(f, inputs: list[torch.Tensor], ks=KS, seeds=SEEDS) -> dict[tuple[float, int], str]:
    return {(k, seed): check_jacobian(noisy(f, k, seed), *inputs).outcome for k in ks for seed in seeds}


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_no_correct_op_of_the_suite_fails_under_noise(dtype: torch.dtype) -> None:
    failed = [(case.name, k, seed) for case in correct_cases()
              for (k, seed), outcome in outcomes(case.f, [case.input(dtype)]).items() if outcome == "fail"]
    assert failed == []


@pytest.fixture(scope="module")
def op_db_samples():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "op_db.py"
    spec = importlib.util.spec_from_file_location("op_db_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    samples = list(module.samples(None, OP_DB_SUBSET))
    assert {name for name, _, _ in samples} >= OP_DB_SUBSET
    return samples


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_no_op_db_sample_fails_under_noise(op_db_samples, dtype: torch.dtype) -> None:
    failed = [(name, k, seed) for name, f, inputs in op_db_samples
              for (k, seed), outcome in outcomes(f, [t.to(dtype) for t in inputs], seeds=range(2)).items()
              if outcome == "fail"]
    assert failed == []


def test_the_hard_cases_correct_backwards_never_fail_and_wrong_ones_never_pass_under_noise() -> None:
    for case in hard_cases():
        found = outcomes(case.right, [case.input()], ks=(10.0, 1e2, 1e3, 1e4, 1e5, 1e6))
        assert "fail" not in found.values(), (case.name, found)
        wrong = outcomes(case.wrong, [case.input()], ks=(0.0, 10.0, 1e3))
        assert "pass" not in wrong.values(), (case.name, wrong)
        if case.dtype == torch.float64:  # resolved well enough in float64 to be failed, not only not passed
            assert set(wrong.values()) == {"fail"}, (case.name, wrong)


def test_the_near_singular_inverse_is_inconclusive_not_failed_at_any_noise() -> None:
    # cond ≈ 4e6 already amplifies this machine's rounding ≈ 1e6 times; more noise changes nothing.
    (case, *_) = [case for case in hard_cases() if case.name.startswith("inv(")]
    report = check_jacobian(case.right, case.input())
    assert report.outcome == "inconclusive" and report.amplification > 1e3
    assert "amplifies its own rounding" in report.message()
    assert set(outcomes(case.right, [case.input()], ks=(0.0, 1e2, 1e4, 1e6)).values()) == {"inconclusive"}


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
def test_wrong_backwards_are_still_failed_under_small_noise(dtype: torch.dtype) -> None:
    # Ten times this machine's rounding: every structural bug, and every relative error of 1 % or more, fails;
    # in float64 every mutant of the suite does (down to a relative error of 1e-7).
    mutants = [case for case in [*scaled_cases(), *structural_cases()]
               if dtype == torch.float64 or case.delta is None or case.delta >= 1e-2]
    missed = [(case.name, seed) for case in mutants
              for (_, seed), outcome in outcomes(case.f, [case.input(dtype)], ks=(10.0,), seeds=range(2)).items()
              if outcome != "fail"]
    assert missed == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f", [torch.nn.functional.silu, torch.sigmoid, torch.tanh, torch.exp], ids=lambda f: f.__name__)
def test_an_accurately_computed_f_is_not_diagnosed_with_amplified_rounding(f, dtype: torch.dtype) -> None:
    """A few roundings measured at x are no diagnosis: the message speaks of amplification only above
    checks.core.message.AMPLIFIED (the near-singular inverse above has it)."""
    report = check_jacobian(f, torch.linspace(-3.0, 3.0, 64, dtype=torch.float64).to(dtype))
    assert report.amplification <= AMPLIFIED and "amplifies its own rounding" not in report.message()
