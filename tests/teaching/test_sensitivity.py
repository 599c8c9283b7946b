"""gradcheck tuned with hindsight (checks.teaching.sensitivity.tune_gradcheck): the search judges every
setting as gradcheck itself would, and picks the best one."""

from __future__ import annotations

import warnings

import pytest
import torch

from checks.core.errors import CheckInputError
from checks.teaching import mutants, sensitivity
from checks.teaching.sensitivity import Setting, evaluate, summary, tune_gradcheck

EPS = (1e-6, 1e-3)
ATOL = (0.0, 1e-9, 1e-5)
RTOL = (0.0, 1e-7, 1e-3)


def small_suite() -> list[mutants.Case]:
    correct = [case for case in mutants.correct_cases() if case.name in ("sin", "exp", "cumprod", "softmax")]
    return [*correct, *mutants.scaled_cases((1e-2, 1e-4, 1e-6))[:6], *mutants.structural_cases()[-2:]]


def gradcheck_flags(case: mutants.Case, dtype: torch.dtype, setting: Setting) -> bool:
    x = case.input(dtype).requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32 inputs warn; that is what is measured
        return not torch.autograd.gradcheck(case.f, (x,), raise_exception=False, **vars(setting))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_search_picks_the_best_setting_as_gradcheck_itself_judges_it(dtype: torch.dtype) -> None:
    cases = small_suite()
    tuning = tune_gradcheck(cases, dtype, eps=EPS, atol=ATOL, rtol=RTOL)
    scores = {}
    for eps in EPS:
        for atol in ATOL:
            for rtol in RTOL:
                setting = Setting(eps, atol, rtol)
                flags = [gradcheck_flags(case, dtype, setting) for case in cases]
                scores[setting] = (sum(f for f, c in zip(flags, cases) if not c.wrong),
                                   sum(f for f, c in zip(flags, cases) if c.wrong))
    best_alarms = min(alarms for alarms, _ in scores.values())
    best_detections = max(found for alarms, found in scores.values() if alarms == best_alarms)
    assert scores[tuning.setting] == (tuning.false_alarms, tuning.detections) == (best_alarms, best_detections)
    assert tuning.settings_tried == len(EPS) * len(ATOL) * len(RTOL)
    assert tuning.correct + tuning.mutants == len(cases) and tuning.evaluations > 0 and tuning.margin > 1


def test_the_tuned_checkers_run_gradcheck_at_the_setting_found() -> None:
    cases = small_suite()
    tunings = {name: tune_gradcheck(cases, getattr(torch, name), eps=EPS, atol=ATOL, rtol=RTOL)
               for name in ("float64", "float32")}
    table = summary(evaluate(cases, tuned={name: t.setting for name, t in tunings.items()},
                             checkers=("gradcheck (slow, tuned)", "this checker")))
    for name, tuning in tunings.items():
        row = table[(table["dtype"] == name) & (table["checker"] == "gradcheck (slow, tuned)")].iloc[0]
        assert (row["false alarms"], row["detections"]) == (tuning.false_alarms, tuning.detections)


def test_a_tuned_checker_without_its_setting_is_refused() -> None:
    with pytest.raises(CheckInputError, match="needs gradcheck's setting for float64"):
        evaluate(small_suite()[:1], dtypes=(torch.float64,), checkers=("gradcheck (slow, tuned)",))
    with pytest.raises(CheckInputError, match="is not one of"):
        evaluate(small_suite()[:1], checkers=("gradcheck (tuned)",))
    # Without settings, the default list leaves the tuned checkers out instead of failing.
    assert {o.checker for o in evaluate(small_suite()[:1], dtypes=(torch.float64,))} == \
        set(sensitivity.CHECKERS) - set(sensitivity.TUNED)


def test_structural_verdicts_are_words_not_booleans() -> None:
    table = sensitivity.structural(evaluate(mutants.structural_cases()[:2], dtypes=(torch.float64,),
                                            checkers=("gradcheck (slow)", "this checker")))
    assert set(table.to_numpy().ravel()) <= {"flagged", "passed", "inconclusive"}
    assert list(table.columns) == ["gradcheck (slow)", "this checker"]
