"""The chapters that teach the autograd API, read from the built HTML: the plain PyTorch is visible, the
seed's plan record is shown literally, and checks witnesses that code (first chapter and the module chapter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import embedded_records, main_text, page, table_of_class, tables, visible_code
from ..toc import REFERENCE, toc_files

PLAN_RECORD = '{"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": null, "executed": false}'
RUN_RECORD = '{"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": 6, "executed": true}'


def outputs(book_html: Path, name: str) -> list[str]:
    return [cell.get_text().strip() for cell in page(book_html, name).select("div.cell_output")]


def test_first_chapter_shows_the_plain_autograd_calls(book_html: Path) -> None:
    code = visible_code(page(book_html, "book/small-function.html"))
    for call in ("x = torch.tensor(3.0, requires_grad=True)", "y.backward()", "x.grad", "torch.autograd.grad(y, x)",
                 "x.grad = None", "def stored(x):", "def returned(x):", "square_plan.run(stored, returned)"):
        assert call in code, call


def test_first_chapter_shows_the_seed_plan_record_literally_then_the_same_record_run(book_html: Path) -> None:
    shown = outputs(book_html, "book/small-function.html")
    assert PLAN_RECORD in shown and RUN_RECORD in shown
    assert shown.index(PLAN_RECORD) < shown.index(RUN_RECORD)
    assert shown.count(PLAN_RECORD) == 1


def test_first_chapter_compares_at_the_input_each_dtype_holds(book_html: Path) -> None:
    soup = page(book_html, "book/small-function.html")
    rounded = next(rows for rows in tables(soup) if any(row["dtype"] == "float16" for row in rows))
    half = next(row for row in rounded if row["dtype"] == "float16" and row["device"] == "cpu")
    assert (half["input x"], half["expected (analytical)"], half["observed"]) == ("0.7001953125", "1.400390625", "1.400390625")
    single = next(row for row in rounded if row["dtype"] == "float32" and row["device"] == "cpu")
    assert single["input x"] == "0.6999999881" and single["verdict"] == "pass"
    assert "In float16, 0.7 becomes 0.7001953125" in main_text(soup)


def test_module_chapter_reads_weight_and_bias_grad_after_backward_with_zero_grad(book_html: Path) -> None:
    soup = page(book_html, "book/modules.html")
    code = visible_code(soup)
    for call in ("nn.Linear(3, 1)", "loss.backward()", "model.weight.grad", "model.bias.grad",
                 "optimizer.zero_grad()", "model.zero_grad()", "def by_hand(model, X, Y):"):
        assert call in code, call
    rows = table_of_class(soup, "checks-passes")
    assert {row["dtype · device"].split(" · ")[0] for row in rows} == {"float32", "float64"}
    assert all(row["verdict"] == "pass" for row in rows)
    weights = [row for row in rows if "step 2: weight.grad" in row["what was read"]]
    assert weights and all(row["observed"].startswith("[[") for row in weights)
    records = embedded_records(soup)
    assert records and all(r["how"] == "stored" and r["executed"] for r in records)
    assert "def training(x, see):" in records[0]["code"]["training"]
    text = main_text(soup)
    assert "it held after one backward()" in text  # an observed single value, not the expectation halved


@pytest.mark.parametrize("chapter", [name for name in toc_files() if name not in ("book/intro", *REFERENCE)])
def test_no_chapter_shows_the_retired_step_language(book_html: Path, chapter: str) -> None:
    code = visible_code(page(book_html, chapter + ".html"))
    assert "Step(" not in code and "run_passes" not in code
