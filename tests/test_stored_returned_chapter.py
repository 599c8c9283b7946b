"""The stored-vs-returned chapter, read from the built HTML: pass tables, captured errors, embedded records."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from checks.passes import NON_LEAF_WARNING, SECOND_BACKWARD

from .helpers import embedded_records, main_text, page, tables

CHAPTER = "book/stored-vs-returned.html"


@pytest.fixture(scope="module")
def chapter(book_html: Path) -> BeautifulSoup:
    return page(book_html, CHAPTER)


def pass_tables(soup: BeautifulSoup) -> list[list[dict[str, str]]]:
    """The chapter's pass tables (pandas HTML, class checks-passes) as rows of {heading: cell text}."""
    found = []
    for table in soup.select("table.checks-passes"):
        headings = [th.get_text(strip=True) for th in table.select("thead th")]
        found.append([dict(zip(headings, (td.get_text(strip=True) for td in tr.find_all("td"))))
                      for tr in table.select("tbody tr")])
    return found


def plain_text(soup: BeautifulSoup) -> str:
    # Sphinx turns ' into ’ in prose; compare against PyTorch's own ASCII text.
    text = unicodedata.normalize("NFKC", main_text(soup)).replace("’", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split())


def cpu(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [row for row in rows if row["device"] == "cpu"]


def test_accumulation_table_shows_6_12_and_the_reset_6_as_observed(chapter: BeautifulSoup) -> None:
    accumulation = cpu(pass_tables(chapter)[0])
    assert [row["pass"] for row in accumulation] == ["1", "2", "3", "4", "5"]
    assert [row["observed .grad"] for row in accumulation] == ["none", "6", "12", "6", "6"]
    assert [row["expected .grad"] for row in accumulation] == ["none", "6", "12", "6", "6"]
    assert [row["observed returned"] for row in accumulation] == ["6", "none", "none", "none", "6"]
    assert "reset: x.grad = None" in accumulation[3]["what was done"]
    assert accumulation[3]["observed .grad after reset"] == "none"
    assert all(row["verdict"] == "pass" and row["shape"] == "()" and row["dtype"] == "float64" for row in accumulation)


def test_prose_glues_the_accumulated_12_and_the_reset_6(chapter: BeautifulSoup) -> None:
    text = plain_text(chapter)
    assert "no reset, left 12 in x.grad" in text
    assert "After the reset, backward() stored 6 again" in text
    assert "returned 6 while x.grad kept 6" in text


def test_second_backward_error_is_captured_from_torch(chapter: BeautifulSoup) -> None:
    twice = cpu(pass_tables(chapter)[1])
    failed = twice[1]
    assert failed["what was done"] == "same graph, no new forward, backward()"
    assert failed["error raised"].startswith(SECOND_BACKWARD)
    assert failed["observed .grad"] == "6" and failed["verdict"] == "fail (expected failure)"
    assert [row["observed .grad"] for row in twice] == ["6", "6", "12", "18", "24"]
    assert "PyTorch said: " + SECOND_BACKWARD in plain_text(chapter)


def test_non_leaf_warning_text_and_retain_grad(chapter: BeautifulSoup) -> None:
    text = plain_text(chapter)
    assert NON_LEAF_WARNING in text and "use .retain_grad() on the non-leaf Tensor" in text
    assert "h.grad was none although the derivative is 18" in text
    assert "After h.retain_grad() , h.grad held 18" in text
    retained = [row for table in tables(chapter) for row in table if "after h.retain_grad()" in row["check"]]
    assert [row["observed"] for row in retained] == ["18"]


def test_create_graph_and_unused_inputs(chapter: BeautifulSoup) -> None:
    text = plain_text(chapter)
    assert "torch.autograd.grad returned 27 , and differentiating that returned tensor gave 18" in text
    assert "does not require grad and does not have a grad_fn" in text
    assert "allow_unused=True the value returned for" in text and "was none ; with materialize_grads=True it was 0" in text


def test_zero_grad_sets_none_and_set_to_none_false_zeros(chapter: BeautifulSoup) -> None:
    resets = cpu(pass_tables(chapter)[2])
    assert [row["observed .grad after reset"] for row in resets] == ["no reset", "no reset", "none", "none", "0"]
    assert [row["observed .grad"] for row in resets] == ["6", "12", "6", "6", "6"]


def test_summary_table_and_embedded_records_include_stored_and_returned(chapter: BeautifulSoup) -> None:
    summary = pass_tables(chapter)[-1]
    assert {row["where the derivative came from"].split(":")[0] for row in summary} == {"stored", "returned"}
    records = embedded_records(chapter)
    assert {record["how"] for record in records} == {"stored", "returned"}
    assert len(summary) == len(records)  # every derivative checked on the page, each embedded once
    assert len({record["id"] for record in records}) == len(records)  # each check has its own anchor
    assert all(record["executed"] and {"input_shape", "dtype", "device"} <= record.keys() for record in records)
    assert not [r["check"] for r in records if r["verdict"] == "fail" and not r["expected_failure"]]
    twelve = [r for r in records if r["how"] == "stored" and "pass 3" in r["check"] and r["function"] == "x*x"]
    assert any(r["observed_gradient"] == 12 and r["analytical_gradient"] == 12 for r in twelve)
