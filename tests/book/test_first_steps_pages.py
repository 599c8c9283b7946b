"""The chapters that teach the autograd API, read from the built HTML: the plain PyTorch is visible, the
seed's plan record is shown literally, and checks witnesses that code (first chapter and the module chapter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..helpers import embedded_records, main_text, page, tables, visible_code, without_exercises
from ..toc import REFERENCE, toc_files

def test_first_chapter_shows_the_plain_autograd_calls(book_html: Path) -> None:
    code = visible_code(page(book_html, "book/small-function.html"))
    for call in ("x = torch.tensor(3.0, requires_grad=True)", "y.backward()", "x.grad", "torch.autograd.grad(y, x)",
                 "x.grad = None", 'checks.expect(x.grad, 6.0, "d/dx x·x = 2x at 3, stored")',
                 "with checks.raises(RuntimeError):"):
        assert call in code, call
    assert "def stored(x)" not in code and "checks.plan" not in code


def test_first_chapter_compares_at_the_input_each_dtype_holds(book_html: Path) -> None:
    soup = page(book_html, "book/small-function.html")
    rows = next(rows for rows in tables(soup) if rows and rows[0]["check"] == "d/dx x·x = 2x at 0.7")
    single = next(row for row in rows if row["dtype"] == "float32" and row["device"] == "cpu")
    assert (single["expected (analytical)"], single["observed"], single["verdict"]) == (
        "1.399999976", "1.399999976", "pass")
    double = next(row for row in rows if row["dtype"] == "float64" and row["device"] == "cpu")
    assert double["expected (analytical)"] == "1.4"
    assert "In float32, 0.7 becomes 0.6999999881" in main_text(soup)


def test_module_chapter_reads_weight_and_bias_grad_after_backward_with_zero_grad(book_html: Path) -> None:
    soup = page(book_html, "book/modules.html")
    code = visible_code(soup)
    for call in ("nn.Linear(3, 1)", "loss.backward()", "model.weight.grad", "model.bias.grad",
                 "optimizer.zero_grad()", "model.zero_grad()", "def dL_dW(model, X, Y):"):
        assert call in code, call
    assert "def training(x, see)" not in code and "run_script" not in code
    rows = [row for table in tables(without_exercises(soup)) for row in table]
    assert {row["dtype"] for row in rows} == {"float32", "float64"}
    weights = [row for row in rows if row["check"] == "step 2: dL/dW"]
    assert len(weights) == 2 and all(row["observed"].startswith("[[") and row["verdict"] == "pass" for row in weights)
    assert all(row["shape"] == "(1, 3)" for row in weights)
    records = embedded_records(soup)
    assert records and all(r["how"] == "stored" and r["executed"] for r in records)


@pytest.mark.parametrize("chapter", [name for name in toc_files() if name not in ("book/intro", *REFERENCE)])
def test_no_chapter_shows_the_retired_step_language(book_html: Path, chapter: str) -> None:
    code = visible_code(page(book_html, chapter + ".html"))
    assert "Step(" not in code and "run_passes" not in code
