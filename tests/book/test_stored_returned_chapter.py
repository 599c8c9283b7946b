"""The stored-vs-returned chapter, read from the built HTML: the PyTorch of each pass, its table, the
captured errors and warning, and the defects a reader found there, kept fixed."""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup

from ..helpers import embedded_records, main_text, page, table_of_class, visible_code, without_exercises

CHAPTER = "book/stored-vs-returned.html"
SECOND_BACKWARD = "Trying to backward through the graph a second time"
SCRIPT_EXPECTED = "expected (from the analytical derivative)"


@pytest.fixture(scope="module")
def chapter(book_html: Path) -> BeautifulSoup:
    return page(book_html, CHAPTER)


def plain_text(soup: BeautifulSoup) -> str:
    # Sphinx turns ' into ’ in prose; compare against PyTorch's own ASCII text.
    text = unicodedata.normalize("NFKC", main_text(soup)).replace("’", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split())


FIRST_PASS = {
    "accumulation": "1. autograd.grad returns f'(x)",
    "same_graph_twice": "1. backward() stores f'(x)",
    "zero_grad_resets": "two backward() calls: 2 f'(x)",
}


def pass_tables(soup: BeautifulSoup) -> list[list[dict[str, str]]]:
    """The tables of passes (class checks-passes) as rows of {heading: cell text}; how each value was
    observed (under what was read) as "observed how", and dtype and device apart."""
    found = []
    for table in soup.select("table.checks-passes"):
        headings = [th.get_text(strip=True) for th in table.select("thead th")]
        rows = []
        for tr in table.select("tbody tr"):
            row = {}
            for heading, td in zip(headings, tr.find_all("td")):
                read = td.select_one('[data-field="check"]')
                row[heading] = (read or td).get_text(strip=True)
                if read is not None:
                    row["observed how"] = td.select_one('[data-field="how"]').get_text(strip=True)
            row["dtype"], row["device"] = row["dtype · device"].split(" · ")
            rows.append(row)
        found.append(rows)
    return found


def cpu_rows(soup: BeautifulSoup, script: str) -> list[dict[str, str]]:
    """The CPU rows of the table of script's passes, found by its first pass."""
    for rows in pass_tables(soup):
        if rows and rows[0].get("what was read") == FIRST_PASS[script]:
            return [row for row in rows if row["device"] == "cpu"]
    raise AssertionError(f"no table of {script} passes")


def failure_box(soup: BeautifulSoup, title_part: str) -> BeautifulSoup:
    boxes = [box for box in soup.select("div.checks-failure")
             if title_part in box.select_one(".checks-failure-title").get_text()]
    assert len(boxes) == 1, [box.select_one(".checks-failure-title").get_text() for box in soup.select("div.checks-failure")]
    return boxes[0]


def definition(box: BeautifulSoup, term: str) -> str:
    return next(dt.find_next_sibling("dd").get_text(strip=True) for dt in box.select("dt") if dt.get_text() == term)


def test_every_pass_is_visible_plain_pytorch_and_no_step_language(chapter: BeautifulSoup) -> None:
    code = visible_code(chapter)
    for call in ("requires_grad", ".backward()", "torch.autograd.grad(", "x.grad = None", "retain_graph=True",
                 "create_graph=True", "h.retain_grad()", "allow_unused=True", "materialize_grads=True",
                 "optimizer.zero_grad()", "zero_grad(set_to_none=False)"):
        assert call in code, call
    assert "Step(" not in code and "checks.passes" not in code


def test_accumulation_reads_6_12_and_the_reset_6_and_says_expected_is_accumulated(chapter: BeautifulSoup) -> None:
    rows = cpu_rows(chapter, "accumulation")
    assert [row["observed"] for row in rows] == ["6", "none", "6", "12", "6", "6", "6"]
    assert [row[SCRIPT_EXPECTED] for row in rows] == ["6", "none", "6", "12", "6", "6", "6"]
    assert [row["observed how"] for row in rows][:3] == [
        "returned by autograd.grad", "read from .grad: none there", "stored in .grad"]
    assert all(row["verdict"] == "pass" and row["dtype"] == "float64" for row in rows)
    assert [key for key in rows[0] if key != "observed how"][:3] == ["verdict", "what was read", SCRIPT_EXPECTED]
    text = plain_text(chapter)
    assert "no reset, left 12 in x.grad" in text and "After the reset, backward() stored 6 again" in text
    assert "returned 6 while x.grad kept 6" in text
    assert "for x.grad that is the accumulated sum" in text


def test_same_graph_twice_states_one_expected_value_for_pass_2(chapter: BeautifulSoup) -> None:
    rows = cpu_rows(chapter, "same_graph_twice")
    refused, after = rows[1], rows[2]
    assert refused["what was read"].startswith("2. backward() on the walked graph")
    assert refused["observed how"] == "backward() raised RuntimeError: nothing stored"  # no backward ran to the end
    assert (refused[SCRIPT_EXPECTED], refused["observed"], refused["verdict"]) == ("6", "none", "fail (expected failure)")
    assert (after[SCRIPT_EXPECTED], after["observed"]) == ("6", "6")
    box = failure_box(chapter, "2. backward() on the walked graph")
    assert definition(box, "expected") == "6"  # the table, the box and the next row agree
    assert SECOND_BACKWARD in box.get_text()
    assert [row["observed"] for row in rows] == ["6", "none", "6", "12", "18"]
    assert "PyTorch said: " + SECOND_BACKWARD in plain_text(chapter)


def test_non_leaf_rows_keep_x_3_and_the_warning_is_quoted_whole(chapter: BeautifulSoup) -> None:
    x = torch.tensor(3.0, requires_grad=True)
    h = x * x
    (h * h).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert h.grad is None
    warning = " ".join(str(caught[0].message).split())
    quotes = [" ".join(q.get_text().split()) for q in chapter.select("blockquote.checks-quote")]
    assert warning in quotes  # word for word, to its last character
    records = [r for r in embedded_records(chapter) if "h.grad" in r["check"]]
    assert records and all(r["x"] == 3 for r in records)
    text = plain_text(chapter)
    assert "h.grad was none although the derivative is 18" in text and "h.grad held 18" in text


def test_create_graph_false_failure_box_shows_the_code_that_ran(chapter: BeautifulSoup) -> None:
    box = failure_box(chapter, "returned without create_graph")
    code = box.select_one("p.checks-code-name").find_next("pre").get_text()
    assert code.startswith("def second_derivative(x, see):")
    assert "torch.autograd.grad(dy_dx, x)" in code and "create_graph=True" in code
    assert "does not require grad and does not have a grad_fn" in box.get_text()
    text = plain_text(chapter)
    assert "torch.autograd.grad returned 27 , and differentiating that returned tensor gave 18" in text


def test_unused_inputs_and_zero_grad(chapter: BeautifulSoup) -> None:
    text = plain_text(chapter)
    assert "allow_unused=True the value returned for" in text and "was none ; with materialize_grads=True it was 0" in text
    rows = cpu_rows(chapter, "zero_grad_resets")
    assert [row["observed"] for row in rows] == ["12", "none", "6", "0", "6"]
    assert all(row["verdict"] == "pass" for row in rows)


def test_provenance_summary_and_embedded_records(chapter: BeautifulSoup) -> None:
    chapter = without_exercises(chapter)  # the summary covers the chapter's checks, not the exercises'
    summary = table_of_class(chapter, "checks-own")
    assert "where the derivative came from" in summary[0]
    records = embedded_records(chapter)
    assert len(summary) == len(records)  # every value checked on the page, each embedded once
    assert {r["how"] for r in records} == {"stored", "returned", "create_graph"}
    assert len({r["id"] for r in records}) == len(records)
    assert all(r["executed"] and r["code"] for r in records)
    assert not [r["check"] for r in records if r["verdict"] == "fail" and not r["expected_failure"]]
