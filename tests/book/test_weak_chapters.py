"""What each check of the built book could have caught, read from ledger.json and the HTML: every record
carries its detectable error, weak passes are marked on their pages with the reason, the ledger shows the
figure, and the decision guide and the finite-difference chapter pass no percents-wrong gradient silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from checks.sphinx import ledger
from checks.teaching.display import percent
from checks.teaching.records import WEAK_ABOVE

from ..helpers import embedded_records, main_text, page, verify, weak_note, without_exercises


def checks_of(book_html: Path) -> list[dict]:
    return ledger.load(book_html)  # its non-finite numbers read back as floats


def _has_a_non_zero_expected_element(value: object) -> bool:
    if value is None:
        return False
    if isinstance(value, dict):  # folded (checks.teaching.records.fold)
        return value["min"] != 0 or value["max"] != 0
    # An infinite expected value (x.grad of sqrt at 0) has no relative error to detect.
    expected = torch.tensor(value, dtype=torch.float64)
    return bool(((expected != 0) & torch.isfinite(expected)).any())


def test_every_executed_record_in_the_ledger_says_what_it_could_have_caught(book_html: Path) -> None:
    items = checks_of(book_html)
    assert items and all("detectable_relative_error" in item for item in items)
    # An inconclusive check judged nothing, so there is nothing it could have caught.
    missing = [item["id"] for item in items if _has_a_non_zero_expected_element(item["analytical_gradient"])
               and item["detectable_relative_error"] is None and item["verdict"] != "inconclusive"]
    assert not missing, missing
    assert all(item["detectable_relative_error"] is None or item["detectable_relative_error"] > 0 for item in items)


def test_every_weak_pass_is_marked_in_its_row_with_its_reason_beside_it(book_html: Path) -> None:
    weak = [item for item in checks_of(book_html) if ledger.weak_of(item)]
    assert weak, "the book shows weak passes on purpose (finite differences, decision guide)"
    for item in weak:
        assert item["weak"] is True and item["weak_reason"], item["id"]
        if not item["anchor"]:
            continue
        soup = page(book_html, item["page"])
        row = soup.select_one(f"tr#{item['anchor']}")
        assert row is not None and "checks-weak" in row["class"], item["id"]
        link = row.select_one("td.checks-verdict a.checks-weak-note")
        assert link is not None and link.get_text() == "weak", item["id"]
        note, declared = weak_note(soup, row)
        assert f"up to {100 * item['detectable_relative_error']:.3g} % wrong" in note
        assert declared == f"Declared weak: {item['weak_reason']}"
        # An older table folds the same words into the row's details too; a plain cell's rows have the note.
        more = row.select_one("details.checks-more")
        assert more is None or "its allowance would pass a gradient up to" in more.get_text(" ", strip=True)
    # No row that is not weak is marked so.
    for name in {item["page"] for item in checks_of(book_html)}:
        soup = page(book_html, name)
        marked = {row.get("id") for row in soup.select("table.checks-table:not(.checks-ledger) tr.checks-weak")}
        assert marked <= {item["anchor"] for item in weak}, name


def test_the_ledger_page_shows_each_checks_detectable_error_and_whether_it_is_weak(book_html: Path) -> None:
    soup = page(book_html, "book/ledger.html")
    headings = [th.get_text() for th in soup.select("table.checks-ledger thead th")]
    rows = soup.select("table.checks-ledger tbody tr")
    items = ledger.ordered([item for item in checks_of(book_html) if not item["measurement"]])  # a study is tallied apart
    assert len(rows) == len(items)
    for row, item in zip(rows, items):
        cells = dict(zip(headings, row.select("td")))
        value = item["detectable_relative_error"]
        shown = cells["detects"].get_text(" ", strip=True)
        assert shown.startswith("none" if value is None else f"{value:.2g}"), (item["id"], shown)
        assert cells["weak"].get_text() == ledger.WEAK_WORDS[ledger.weak_of(item), bool(item.get("weak_reason"))]
    text = " ".join(main_text(soup).split())
    assert "The detects column says what each check could have caught" in text
    assert f"also have passed a gradient more than {percent(WEAK_ABOVE)} wrong is weak" in text


def test_the_introduction_says_what_weak_means_with_the_threshold_the_package_applies(book_html: Path) -> None:
    text = " ".join(main_text(page(book_html, "book/intro.html")).split())
    assert f"a pass marked weak has an allowance that would also pass a gradient more than {percent(WEAK_ABOVE)} wrong" \
        in text


def test_python_dash_m_checks_lists_the_books_weak_passes_all_declared(book_html: Path) -> None:
    result = verify(book_html)
    assert result.returncode == 0, result.stdout + result.stderr
    weak = [item for item in checks_of(book_html) if ledger.weak_of(item)]
    assert f"{len(weak)} weak passes (allowing a gradient more than 1 % wrong): {len(weak)} declared, 0 undeclared" \
        in result.stdout
    assert result.stdout.count("- declared weak: ") == len(weak)


@pytest.mark.parametrize("chapter", ["decision-guide", "finite-differences"])
def test_no_pass_in_the_numerical_chapters_hides_a_percents_wrong_gradient_unmarked(book_html: Path,
                                                                                     chapter: str) -> None:
    soup = page(book_html, f"book/{chapter}.html")
    for record in embedded_records(soup):
        # A raise (checks.raises) compares no values: it has no detectable error.
        if record["verdict"] == "pass" and (record["detectable_relative_error"] or 0) > WEAK_ABOVE:
            row = soup.select_one(f"tr#{record['id']}")
            assert "checks-weak" in row["class"] and record["weak_reason"], record["id"]


def test_decision_guide_says_what_option_bs_pass_on_sin_10x_could_have_caught(book_html: Path) -> None:
    soup = without_exercises(page(book_html, "book/decision-guide.html"))
    records = embedded_records(soup)
    curvy = next(r for r in records if r["check"] == "B: sin(10x)" and r["dtype"] == "float32"
                 and r["device"] == "cpu")
    assert curvy["verdict"] == "pass" and curvy["detectable_relative_error"] > WEAK_ABOVE
    text = " ".join(main_text(soup).split())
    assert "cannot hide inside the tolerance" not in text
    assert f"That pass is weak : the allowance taken from the error estimate, {curvy['tolerance']['atol']:.3g}" in text
    assert f"up to {100 * curvy['detectable_relative_error']:.3g} % wrong" in text
    passes = [r for r in records if r["verdict"] == "pass" and r["device"] == "cpu"]
    float64 = max(r["detectable_relative_error"] for r in passes if r["dtype"] == "float64")
    float32 = max(r["detectable_relative_error"] for r in passes if r["dtype"] == "float32")
    assert f"failed a gradient wrong by more than {float64:.2g} (relative)" in text
    assert f"let one up to {100 * float32:.3g} % wrong through" in text


def test_finite_differences_holds_each_element_to_its_own_allowance_and_says_what_passes_could_catch(
    book_html: Path
) -> None:
    soup = without_exercises(page(book_html, "book/finite-differences.html"))
    records = embedded_records(soup)
    exp_forward = next(r for r in records if r["function"] == "exp(x).sum()" and r["method"] == "forward"
                       and r["dtype"] == "float32" and r["device"] == "cpu")
    # The element at x = -1, whose derivative is smallest, is held to its own, smaller allowance.
    atols = exp_forward["tolerance"]["element_atol"]
    assert atols[1] == min(atols) < max(atols) and exp_forward["detectable_index"] == [1]
    assert exp_forward["detectable_relative_error"] < 0.1 and "per element" in exp_forward["tolerance"]["reason"]
    text = " ".join(main_text(soup).split())
    assert f"with its own allowance that element fails a gradient more than " \
           f"{100 * exp_forward['detectable_relative_error']:.3g} % wrong" in text
    numerical = [r for r in records if r["how"] == "numerical" and not r["expected_failure"]]
    weak = [r for r in numerical if r["verdict"] == "pass" and r["detectable_relative_error"] > WEAK_ABOVE]
    weakest = max(weak, key=lambda r: r["detectable_relative_error"])
    assert f"are weak, all in float32" in text and f"{len(weak)} are weak" in text
    assert f"would pass a gradient up to {100 * weakest['detectable_relative_error']:.3g} % wrong at element " \
           f"{weakest['detectable_index']}" in text
