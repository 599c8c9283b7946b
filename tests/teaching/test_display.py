"""Check tables as a reader meets them: verdict first, long vectors folded, mismatches by index."""

from __future__ import annotations

import dataclasses

import torch
from bs4 import BeautifulSoup

import checks
from checks.teaching.display import ENDS, LISTED_MISMATCHES, environment_items, records_html

from ..helpers import tables

# sin's derivative, wrong by 1e-3 from x = 1 on: float32's tolerance catches exactly those elements.
X = torch.linspace(0, 2, 30, dtype=torch.float64)
NUDGED = checks.Expectation("sin(x).sum()", lambda x: torch.sin(x).sum(), "cos(x) + 1e-3 [x > 1]",
                            lambda x: torch.cos(x) + (x > 1) * 1e-3, "a nudge, on purpose")
WRONG_AT = [index for index, value in enumerate(X.tolist()) if value > 1]


def failed_record() -> checks.Record:
    return checks.plan(NUDGED, X, dtypes="float32", devices="cpu", how="stored", expected_failure=True).run().one()


def test_the_verdict_comes_first_with_its_word_and_shape_dtype_device_share_a_cell() -> None:
    soup = BeautifulSoup(records_html([failed_record()]), "html.parser")
    headings = [th.get_text() for th in soup.select("table.checks-table thead th")]
    assert headings[0] == "verdict" and "shape · dtype · device" in headings
    assert len(headings) <= 7
    verdict = soup.select_one("tbody tr td")
    assert "checks-verdict" in verdict["class"] and verdict.get_text() == "✗ fail (expected failure)"
    assert verdict.select_one("[data-field=verdict]").get_text() == "fail (expected failure)"
    row = tables(soup)[0][0]
    assert (row["shape"], row["dtype"], row["device"]) == ("(30,)", "float32", "cpu")


def test_a_long_vector_is_folded_with_its_ends_its_count_and_its_mismatches_by_index() -> None:
    record = failed_record()
    soup = BeautifulSoup(records_html([record]), "html.parser")
    cell = soup.select_one("td.checks-observed_gradient")
    summary = cell.select_one("details.checks-vector summary").get_text(" ", strip=True)
    assert summary.count(",") == 2 * ENDS and "…" in summary and "30 values" in summary  # ENDS, …, ENDS
    # Every mismatched element is marked in the whole vector, and the first few are listed with their index.
    whole = cell.select_one("details.checks-vector")
    assert len(whole.find_all("mark", recursive=False)) == len(WRONG_AT) == record.mismatched
    listed = [item.get_text() for item in cell.select("ul.checks-mismatches li")]
    assert listed[0].startswith(f"[{WRONG_AT[0]}] ") and "(expected " in listed[0]
    assert len(listed) == LISTED_MISMATCHES + 1 and listed[-1] == f"and {len(WRONG_AT) - LISTED_MISMATCHES} more"
    # The whole value is still there for a reader of the HTML (and for the tests' table reader).
    assert tables(soup)[0][0]["observed"].count(",") == 29


def test_the_rest_of_a_record_is_folded_under_its_check() -> None:
    soup = BeautifulSoup(records_html([failed_record()], (*checks.teaching.display.COLUMNS, *checks.teaching.display.NUMERICAL_COLUMNS)),
                         "html.parser")
    more = soup.select_one("td.checks-check details.checks-more")
    assert more is not None and "open" not in more.attrs
    text = more.get_text(" ", strip=True)
    assert "input x" in text and "method" in text and "torch.testing.assert_close default for float32" in text


def test_a_failure_names_only_the_environment_that_differs_from_the_page() -> None:
    record = failed_record()
    assert set(environment_items(record)) == {"device", "dtype", "seed"}
    elsewhere = dataclasses.replace(record, environment={**record.environment, "torch": "1.0.0"})
    assert environment_items(elsewhere)["torch"] == "1.0.0"


def test_every_cell_of_a_check_table_carries_its_column_heading_for_the_phone_layout() -> None:
    soup = BeautifulSoup(records_html([failed_record()]), "html.parser")
    box = soup.select_one("div.checks-table-box")
    assert box is not None and box.select_one("table.checks-table") is not None
    headings = [th.get_text() for th in soup.select("thead th")]
    labels = [td["data-label"] for td in soup.select("tbody tr td")]
    assert labels == headings


def test_a_numerical_record_shows_how_its_estimate_was_made_whatever_the_table_asked_for() -> None:
    sine = checks.Expectation("sin(x)", torch.sin, "cos(x)", torch.cos, "d/dx sin x = cos x")
    record = checks.plan(sine, 1.0, how="numerical", devices="cpu").run().one()
    more = BeautifulSoup(records_html([record]), "html.parser").select_one("details.checks-more")
    fields = {span["data-field"]: span.get_text() for span in more.select("[data-field]")}
    assert {"method", "step", "evaluations", "error_estimate"} <= set(fields)
    assert fields["method"] == "central" and fields["evaluations"] == "2"


def test_a_failure_box_keeps_its_code_lines_as_written() -> None:
    soup = BeautifulSoup(records_html([failed_record()]), "html.parser")
    code = soup.select("div.checks-failure pre.checks-code")
    assert code and all("\n    " in block.get_text() or "lambda" in block.get_text() for block in code)


def test_the_verdict_and_the_failure_record_keep_their_look_without_the_books_stylesheet() -> None:
    """A notebook (JupyterLab, Colab) has no checks.css: the verdict's mark and colour, and the failure
    record's label-beside-value layout, are in the markup itself."""
    soup = BeautifulSoup(records_html([failed_record()]), "html.parser")
    verdict = soup.select_one("td.checks-verdict")
    assert verdict.select_one(".checks-verdict-mark").get_text().strip() == "✗"
    assert "checks-expected-failure" in verdict["style"] and "#" in verdict["style"]  # a colour where no variable is
    passed = BeautifulSoup(records_html([checks.plan(checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: 2 * x, "power rule"),
                                                     3.0, dtypes="float64", devices="cpu", how="stored").run().one()]),
                           "html.parser").select_one("td.checks-verdict")
    assert passed.select_one(".checks-verdict-mark").get_text().strip() == "✓" and "checks-pass" in passed["style"]
    for definitions in soup.select("div.checks-failure dl"):
        assert "display: grid" in definitions["style"]
        assert all("float: none" in item["style"] for item in definitions.select("dt, dd"))
    assert all("word-break: normal" in pre["style"] for pre in soup.select("div.checks-failure pre"))
