"""The built book, read from its HTML: executed numbers in separate columns, and no error on any page."""

from __future__ import annotations

from pathlib import Path

from ..helpers import embedded_records, main_text, page, tables


def test_index_opens_on_the_introduction(book_html: Path) -> None:
    index = (book_html / "index.html").read_text(encoding="utf-8")
    assert "book/intro.html" in index
    assert "How to read a check table" in main_text(page(book_html, "book/intro.html"))


def test_first_chapter_shows_expected_and_observed_six_in_separate_columns(book_html: Path) -> None:
    soup = page(book_html, "book/small-function.html")
    stored, returned, *_ = tables(soup)
    for rows, label, how in ((stored, "d/dx x·x = 2x at 3, stored", "stored in .grad"),
                             (returned, "d/dx x·x = 2x at 3, returned", "returned by autograd.grad")):
        assert {row["dtype"] for row in rows} >= {"float32", "float64"}
        for row in rows:
            assert (row["check"], row["observed how"], row["verdict"]) == (label, how, "pass")
            assert row["expected (analytical)"] == "6" == row["observed"] and row["shape"] == "()"


def test_vector_sum_keeps_its_shape(book_html: Path) -> None:
    soup = page(book_html, "book/small-function.html")
    rows = next(rows for rows in tables(soup) if rows and rows[0]["check"] == "d/dx_i (x_1 + x_2 + x_3) = 1")
    assert all(row["observed"] == "[1, 1, 1]" == row["expected (analytical)"] for row in rows)


def test_prose_numbers_are_glued_from_execution(book_html: Path) -> None:
    text = main_text(page(book_html, "book/small-function.html"))
    assert "We expected 6 , and in float32, the run you see, backward() stored 6 : pass" in text
    assert "in float32 backward() stored [1.0, 1.0, 1.0]" in text


def test_results_embed_executed_records_with_the_required_shape(book_html: Path) -> None:
    records = embedded_records(page(book_html, "book/small-function.html"))
    square = [r for r in records if r["check"].startswith("d/dx x·x = 2x at 3")]
    assert len(square) >= 4 and all(r["executed"] and r["analytical_gradient"] == 6 for r in square)
    assert all(r["observed_gradient"] == 6 for r in square)
    assert all({"input_shape", "dtype", "device", "how", "tolerance", "verdict"} <= r.keys() for r in records)


def test_no_page_shows_an_execution_error(book_html: Path) -> None:
    pages = sorted(book_html.rglob("*.html"))
    assert pages
    for path in pages:
        text = path.read_text(encoding="utf-8")
        for marker in ("Traceback (most recent call last)", "output traceback", "cell_execution_error"):
            assert marker not in text, f"{path.relative_to(book_html)} shows {marker!r}"
    assert not (book_html / "reports").exists() or not any((book_html / "reports").iterdir())
