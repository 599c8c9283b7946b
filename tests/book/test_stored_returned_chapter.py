"""The stored-vs-returned chapter, read from the built HTML: the plain PyTorch of each pass, its rows (each
with expected, observed, dtype and device, and what produced or raised the value), and the defects a reader
found there, kept fixed."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from ..helpers import embedded_records, main_text, page, tables, visible_code, without_exercises

CHAPTER = "book/stored-vs-returned.html"
SECOND_BACKWARD = "Trying to backward through the graph a second time"


@pytest.fixture(scope="module")
def chapter(book_html: Path) -> BeautifulSoup:
    return page(book_html, CHAPTER)


def plain_text(soup: BeautifulSoup) -> str:
    # Sphinx turns ' into ’ in prose; compare against PyTorch's own ASCII text.
    text = unicodedata.normalize("NFKC", main_text(soup)).replace("’", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split())


def rows(soup: BeautifulSoup) -> dict[str, list[dict[str, str]]]:
    """Every row of the page's check tables, by the check's label."""
    found: dict[str, list[dict[str, str]]] = {}
    for table in tables(soup):
        for row in table:
            found.setdefault(row["check"], []).append(row)
    return found


def cpu32(soup: BeautifulSoup, label: str) -> dict[str, str]:
    return next(row for row in rows(soup)[label] if (row["dtype"], row["device"]) == ("float32", "cpu"))


def test_every_pass_is_visible_plain_pytorch_and_no_script(chapter: BeautifulSoup) -> None:
    code = visible_code(chapter)
    for call in ("requires_grad", ".backward()", "torch.autograd.grad(", "x.grad = None", "retain_graph=True",
                 "create_graph=True", "h.retain_grad()", "allow_unused=True", "materialize_grads=True",
                 "optimizer.zero_grad()", "zero_grad(set_to_none=False)", "with checks.raises(RuntimeError"):
        assert call in code, call
    assert "see" not in code.split() and "run_script" not in code and "def accumulation" not in code


def test_every_row_shows_expected_observed_dtype_and_device(chapter: BeautifulSoup) -> None:
    for label, found in rows(chapter).items():
        assert {row["dtype"] for row in found} >= {"float32", "float64"}, label
        assert all(row["expected (analytical)"] and row["observed"] and row["verdict"] == "pass" for row in found), label


def test_accumulation_reads_6_12_and_the_reset_6(chapter: BeautifulSoup) -> None:
    expected = {"1. autograd.grad returns f'(3)": ("6", "returned by autograd.grad"),
                "2. backward() stores f'(3)": ("6", "stored in .grad"),
                "3. a second backward() adds: 2 f'(3)": ("12", "stored in .grad"),
                "4. after x.grad = None, backward(): f'(3)": ("6", "stored in .grad"),
                "5. x.grad after autograd.grad: still f'(3)": ("6", "stored in .grad")}
    for label, (value, how) in expected.items():
        row = cpu32(chapter, label)
        assert (row["observed"], row["expected (analytical)"], row["observed how"]) == (value, value, how), label
    text = plain_text(chapter)
    assert "The second backward() left 12 in x.grad" in text and "After the reset, backward() stored 6 again" in text


def test_provenance_of_raised_rows_names_the_call_that_raised(chapter: BeautifulSoup) -> None:
    walked = cpu32(chapter, "backward() on a walked graph")
    assert walked["observed how"] == "backward() raised RuntimeError: nothing stored" and SECOND_BACKWARD in walked["observed"]
    second = cpu32(chapter, "f''(3) without create_graph")
    assert second["observed how"] == "torch.autograd.grad raised RuntimeError: nothing returned"
    assert "does not require grad and does not have a grad_fn" in second["observed"]
    unused = cpu32(chapter, "∂f/∂u asked plainly")
    assert unused["observed how"] == "torch.autograd.grad raised RuntimeError: nothing returned"
    records = {(r["check"], r["dtype"]): r for r in embedded_records(chapter)}
    assert records[("backward() on a walked graph", "float32")]["how"] == "stored"
    assert records[("f''(3) without create_graph", "float32")]["how"] == "returned"
    assert records[("f'(3) = 3·3², with create_graph=True", "float32")]["how"] == "create_graph"


def test_non_leaf_none_and_retain_grad(chapter: BeautifulSoup) -> None:
    none = cpu32(chapter, "h.grad, h = x*x not a leaf: None")
    assert (none["observed"], none["observed how"], none["shape"]) == ("None", "read from .grad: none there", "none")
    assert cpu32(chapter, "h.grad after h.retain_grad(): 2h = 18")["observed"] == "18"
    assert "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed" in plain_text(chapter)


def test_unused_inputs_and_zero_grad(chapter: BeautifulSoup) -> None:
    assert cpu32(chapter, "∂f/∂u with allow_unused=True: None")["observed"] == "None"
    assert cpu32(chapter, "∂f/∂u with materialize_grads=True: 0")["observed"] == "0"
    assert cpu32(chapter, "after optimizer.zero_grad(): None")["observed"] == "None"
    assert cpu32(chapter, "after zero_grad(set_to_none=False): 0")["observed"] == "0"


def test_provenance_summary_counts_are_the_records(chapter: BeautifulSoup) -> None:
    records = [r for r in embedded_records(without_exercises(chapter)) if (r["dtype"], r["device"]) == ("float32", "cpu")]
    raised = [r for r in records if "PyTorch raised" in r["message"]]
    stored = [r for r in records if r["how"] == "stored" and r not in raised]
    returned = [r for r in records if r["how"] in ("returned", "create_graph") and r not in raised]
    text = plain_text(chapter)
    assert (f"Of the {len(records)} checks above" in text and f"{len(stored)} read a value that backward() stored"
            in text and f"{len(returned)} read one that torch.autograd.grad returned" in text
            and f"{len(raised)} expected PyTorch to raise" in text)
    assert len({r["id"] for r in embedded_records(chapter)}) == len(embedded_records(chapter))
