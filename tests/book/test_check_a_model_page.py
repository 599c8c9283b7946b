"""The chapter "Check a whole model", pinned by what its checks did (the ledger's records), not by its words:
dropout in train mode leaves the check unable to judge, eval mode and a fixed mask pass, float64 vouches for
far more than float32, relu's kinks are inconclusive, sample= costs less, and the planted bug fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..helpers import verify

PAGE = "book/check-a-model.html"


@pytest.fixture(scope="module")
def calls(book_html: Path) -> dict[str, dict]:
    """The chapter's library calls (check_module, assert_module_gradients), by the call's text."""
    found = {item["check"]: item for item in ledger.load(book_html)
             if item["page"] == PAGE and item["checker"] in ("check_module", "assert_module_gradients")}
    assert found, f"{PAGE}: no check_module record in the ledger"
    return found


def _evaluations(item: dict) -> int:
    return int(re.search(r"(\d+) evaluations of f", item["message"]).group(1))


def test_dropout_in_train_mode_is_never_a_pass(calls: dict[str, dict]) -> None:
    train = calls["checks.assert_module_gradients(model, loss, x)"]
    assert train["dtype"] == "float32" and train["verdict"] == "inconclusive"
    assert train["expected_inconclusive"] and train["status"] != "pass"


def test_eval_mode_passes_and_float64_vouches_for_far_more(calls: dict[str, dict]) -> None:
    f32, f64 = calls["checks.check_module(model, loss, x)"], calls["checks.check_module(model64, loss, x64)"]
    assert (f32["dtype"], f64["dtype"]) == ("float32", "float64")
    assert f32["verdict"] == f64["verdict"] == "pass"
    # float32's pass is declared weak: its allowance would pass a gradient more than 1 % wrong somewhere.
    assert f32["weak_reason"] and f32["detectable_relative_error"] > 0.01
    assert f64["detectable_relative_error"] < 1e-4 < f32["detectable_relative_error"]


def test_train_mode_with_a_fixed_mask_passes_in_float64(calls: dict[str, dict]) -> None:
    fixed = calls["checks.check_module(trained, loss, x64)"]
    assert fixed["dtype"] == "float64" and fixed["verdict"] == "pass"


def test_relu_is_inconclusive_at_kinks_where_tanh_passes(calls: dict[str, dict]) -> None:
    relu = calls["checks.assert_module_gradients(wide_model(nn.ReLU()), wide_loss, X)"]
    assert relu["dtype"] == "float64" and relu["verdict"] == "inconclusive" and relu["expected_inconclusive"]
    assert "kink:" in relu["message"] and "Mismatched" not in relu["message"]
    assert calls["checks.check_module(tanh_model, wide_loss, X)"]["verdict"] == "pass"


def test_a_sample_costs_fewer_evaluations_than_the_full_check(calls: dict[str, dict]) -> None:
    full = calls["checks.check_module(tanh_model, wide_loss, X)"]
    sampled = calls["checks.check_module(tanh_model, wide_loss, X, sample=16)"]
    assert sampled["verdict"] == "pass"
    assert _evaluations(sampled) < _evaluations(full)


def test_the_buggy_softsign_fails_before_it_and_not_after(calls: dict[str, dict]) -> None:
    buggy = calls["checks.assert_module_gradients(buggy, loss, x64)"]
    assert buggy["verdict"] == "fail" and buggy["expected_failure"]
    wrong = re.search(r"the gradients? with respect to inputs? (.*) (?:is|are) wrong", buggy["message"]).group(1)
    named = set(re.findall(r"`([^`]+)`", wrong))
    assert named == {"0.weight", "0.bias", "1.weight", "1.bias", "input"}


def test_the_chapter_leaves_the_ledger_clean(book_html: Path) -> None:
    verified = verify(book_html)
    assert verified.returncode == 0 and "check-a-model" not in verified.stdout.split("declared")[0], verified.stdout
