"""The built book's failures and its ledger, read from the HTML and ledger.json of one clean build."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.__main__ import main
from checks.sphinx import ledger

from ..helpers import embedded_records, main_text, page
from ..toc import toc_files

DOCUMENTED_SHAPE = {"function", "x", "analytical_gradient", "observed_gradient", "executed"}


def toc_pages() -> list[str]:
    return [f"{name}.html" for name in toc_files()]


def ledger_json(book_html: Path) -> list[dict]:
    return ledger.load(book_html)


def test_failures_chapter_shows_each_failure_in_full(book_html: Path) -> None:
    soup = page(book_html, "book/failures.html")
    failed = [record for record in embedded_records(soup) if record["verdict"] == "fail"]
    blocks = soup.select("div.checks-failure")
    assert failed and blocks
    # Each failed row has its box (rows that failed alike share one), and its verdict links there.
    anchors = {tag["id"] for block in blocks for tag in [block, *block.find_all(id=True)]}
    assert {f"{record['id']}-failure" for record in failed} <= anchors
    for record in failed:
        assert soup.select_one(f'td.checks-verdict a[href="#{record["id"]}-failure"]') is not None
    for block in blocks:
        # In view: what failed, as declared or not, and expected against observed; folded: the message, the
        # code that ran and the environment it ran in.
        title = block.select_one("p.checks-failure-title").get_text()
        assert "as declared" in title
        assert block.select_one("pre.checks-message").get_text().startswith("expected ")
        details = block.select("details.checks-failure-details")
        assert details
        for folded in details:
            assert [h.get_text() for h in folded.find_all("h4")] == ["Code", "Environment", "Record"]
            text = folded.get_text(" ", strip=True)
            assert "seed" in text and "torch" in text and "allowed" in text
    code = " ".join(block.get_text() for block in soup.select("main div.cell_input"))
    assert "return grad_output * x  # should be grad_output * 2 * x" in code
    text = main_text(soup)
    assert "has no written reason" in text or "needs a written reason" in text


def test_failures_chapter_glues_what_each_failure_found(book_html: Path) -> None:
    soup = page(book_html, "book/failures.html")
    records = embedded_records(soup)
    text = main_text(soup)
    stored = next(r for r in records if r["function"] == "SquareMissingFactor.apply(x)" and r["how"] == "stored")
    assert stored["observed_gradient"] == 3.0 and stored["verdict"] == "fail"
    assert "We expected 6 ; backward() stored 3 and autograd.grad returned 3" in text
    recheck = next(r for r in records if r["check"].startswith("float32 at a justified float32 tolerance"))
    assert recheck["verdict"] == "pass"
    assert len(recheck["tolerance"]["history"]) == 1
    assert "float32" in recheck["tolerance"]["history"][0]["reason"]
    kink = next(r for r in records if r["check"] == "relu' = 1 where x ≥ 0, central"
                and r["how"] == "numerical" and r["expected_failure"] and r["dtype"] == "float64")
    # The average of the one-sided slopes 0 and 1, up to the estimate's rounding.
    assert kink["observed_gradient"][1] == pytest.approx(0.5, abs=1e-6) and kink["worst_index"] == [1]


def test_every_chapter_s_checks_are_in_the_ledger(book_html: Path) -> None:
    in_ledger = {item["id"] for item in ledger_json(book_html)}
    for name in toc_pages():
        shown = {record["id"] for record in embedded_records(page(book_html, name))}
        assert shown <= in_ledger, f"{name}: {len(shown - in_ledger)} checks missing from the ledger"
    # What a page displays is anchored there; the rest (library calls, the mutant suite's runs) is executed only.
    anchored = {item["id"] for item in ledger_json(book_html) if item["anchor"]}
    assert anchored == {record["id"] for name in toc_pages() for record in embedded_records(page(book_html, name))}


def test_ledger_json_is_valid_and_matches_the_ledger_page(book_html: Path) -> None:
    items = ledger_json(book_html)
    assert items and all(DOCUMENTED_SHAPE <= set(item) and item["executed"] for item in items)
    soup = page(book_html, "book/ledger.html")
    checked = [item for item in items if not item["measurement"]]
    rows = soup.select("table.checks-ledger tbody tr")
    assert len(rows) == len(checked)
    verdicts = [row.select_one("td.checks-verdict").get_text() for row in rows]
    assert verdicts == [item["status"] for item in ledger.ordered(checked)]
    # A study's runs (measurements) are tallied in a table of their own, every run counted once.
    runs = [int(row.select("td")[3].get_text()) for row in soup.select("table.checks-ledger-measurements tbody tr")
            if row.select("td")]
    assert sum(runs) == len(items) - len(checked)
    # Failures first.
    first_pass = verdicts.index("pass")
    assert "pass" not in {*verdicts[:first_pass]} and set(verdicts[first_pass:]) == {"pass"}
    summary = soup.select_one("div.checks-ledger-summary").get_text(" ", strip=True)
    counts = ledger.summary(items)
    assert f"{counts['checks']} checks in this build" in summary
    for outcome, count in counts["outcomes"].items():
        assert f"{count} {outcome}" in summary
    download = soup.select_one("a.checks-ledger-download")["href"]
    assert (book_html / "book" / download).resolve() == (book_html / ledger.LEDGER_JSON).resolve()


def test_ledger_rows_link_to_their_chapter_rows(book_html: Path) -> None:
    soup = page(book_html, "book/ledger.html")
    anchors: dict[str, set[str]] = {}  # each chapter is parsed once, not once per row
    for link in soup.select("table.checks-ledger td.checks-chapter a"):
        if "#" not in link["href"]:  # executed, not displayed (a library call): the link is to its page
            continue
        target, anchor = link["href"].split("#")
        if target not in anchors:
            anchors[target] = {tag["id"] for tag in page(book_html, f"book/{target}").find_all(id=True)}
        assert anchor in anchors[target], link["href"]


def test_the_built_ledger_has_no_unexpected_failures_or_passes(book_html: Path, capsys) -> None:
    assert main([str(book_html)]) == 0, capsys.readouterr().out
    assert sum(item["status"] == "expected failure" for item in ledger_json(book_html)) >= 5
