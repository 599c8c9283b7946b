"""The ledger: every check of a build, failures first, as an HTML table and as JSON.

An entry is a record's dictionary plus where it was shown: the chapter's title, its page and the record's
anchor on that page, and its outcome (the verdict read with the expected-failure flag). The Sphinx
extension collects the entries from the chapters; `python -m checks` reads them back from ledger.json.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .display import HOW_WORDS, cell_text, mismatched_indices, vector_html
from .errors import CheckInputError
from .records import PROBLEMS, Record

Entry = dict[str, Any]

LEDGER_JSON = "ledger.json"
# Problems first, then the demonstrations, then the passes: what needs a reader's attention is on top.
OUTCOME_ORDER = ("unexpected failure", "unexpected pass", "expected failure", "pass", "planned")
# The ledger table's columns: the outcome where the eye starts, then what a reader filters by (chapter,
# how, dtype, device), then the numbers. Expected and observed vectors are folded as in the chapters.
COLUMNS = {
    "outcome": "outcome",
    "chapter": "chapter",
    "check": "check",
    "how": "how",
    "dtype": "dtype",
    "device": "device",
    "analytical_gradient": "expected",
    "observed_gradient": "observed",
    "abs_error": "error",
    "tolerance": "allowed",
}
# Columns the reader filters by, with a pane of their values and counts above the table.
FILTERS = ("outcome", "chapter", "how", "dtype", "device")


def entry(record: Record, *, chapter: str, page: str) -> Entry:
    """A record as the ledger keeps it: its fields, where it is shown, and its outcome."""
    return {**record.to_dict(), "chapter": chapter, "page": page, "anchor": record.id, "outcome": record.outcome}


def ordered(entries: Sequence[Entry]) -> list[Entry]:
    """Failures first; within an outcome, the order of the book (sorted() is stable)."""
    return sorted(entries, key=lambda item: OUTCOME_ORDER.index(item["outcome"]))


def problems(entries: Sequence[Entry]) -> list[Entry]:
    """Unexpected failures and expected failures that passed."""
    return [item for item in ordered(entries) if item["outcome"] in PROBLEMS]


def summary(entries: Sequence[Entry]) -> dict[str, Any]:
    """Counts per outcome, and per device and outcome."""
    by_device: dict[str, Counter[str]] = {}
    for item in entries:
        by_device.setdefault(item["device"], Counter())[item["outcome"]] += 1
    return {
        "checks": len(entries),
        "outcomes": dict(Counter(item["outcome"] for item in entries)),
        "devices": {device: dict(counts) for device, counts in sorted(by_device.items())},
    }


def to_json(entries: Sequence[Entry]) -> str:
    return json.dumps(list(entries), sort_keys=True, indent=1)


def load(path: str | Path) -> list[Entry]:
    """A ledger.json file, or a built site's folder holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / LEDGER_JSON
    if not path.is_file():
        raise CheckInputError(f"no ledger at {path}: build the book first (jupyter-book build .)")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CheckInputError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(entries, list) or not all(isinstance(item, dict) and "outcome" in item for item in entries):
        raise CheckInputError(f"{path} is not a ledger: expected a list of check entries with an outcome")
    return entries


def report(entries: Sequence[Entry]) -> str:
    """A readable summary, then each problem with its chapter, anchor and discrepancy."""
    counts = summary(entries)
    lines = [f"{counts['checks']} checks: " + ", ".join(f"{count} {outcome}" for outcome, count in
                                                        sorted(counts["outcomes"].items(), key=_by_outcome))]
    found = problems(entries)
    if not found:
        lines.append("No problems: every failure was declared expected, and every expected failure failed.")
    for item in found:
        lines.append(f"- {item['outcome']}: {item['check']} ({item['dtype']} on {item['device']}, {item['how']}) "
                     f"in {item['chapter']} [{item['page']}#{item['anchor']}]")
        if item["outcome"] == "unexpected pass":
            lines.append("    declared expected_failure=True, but it passed: the demonstration shows nothing")
        else:
            lines.extend("    " + line for line in item["message"].splitlines())
    return "\n".join(lines)


def _by_outcome(pair: tuple[str, int]) -> int:
    return OUTCOME_ORDER.index(pair[0])


def ledger_html(entries: Sequence[Entry], *, link: Callable[[Entry], str], json_href: str,
                table_library: str | None = None) -> str:
    """The summary, a download link to the JSON, counts per chapter, and one table of every check.

    The table lists failures first. With table_library (the URL of the DataTables bundle that itables
    ships, served from the site) the reader can also filter it by outcome, chapter, how, dtype and device,
    and sort it by any column; without it, or without JavaScript, it is a plain table.
    """
    rows = ordered(entries)
    return (_summary_html(entries, json_href) + _chapters_html(entries, link) + _table_html(rows, link)
            + (_table_script(table_library) if table_library else ""))


def _summary_html(entries: Sequence[Entry], json_href: str) -> str:
    counts = summary(entries)
    outcomes = sorted(counts["outcomes"].items(), key=_by_outcome)
    items = "".join(f'<li class="checks-outcome-{_slug(outcome)}"><strong>{count}</strong> {html.escape(outcome)}</li>'
                    for outcome, count in outcomes)
    device_rows = "".join(
        f"<tr><td>{html.escape(device)}</td>"
        + "".join(f"<td>{device_counts.get(outcome, 0)}</td>" for outcome, _ in outcomes)
        + "</tr>"
        for device, device_counts in counts["devices"].items()
    )
    device_head = "<th>device</th>" + "".join(f"<th>{html.escape(outcome)}</th>" for outcome, _ in outcomes)
    return (
        f'<div class="checks-ledger-summary"><p><strong>{counts["checks"]}</strong> checks in this build.</p>'
        f"<ul>{items}</ul>"
        f'<table class="checks-counts checks-ledger-devices"><thead><tr>{device_head}</tr></thead>'
        f"<tbody>{device_rows}</tbody></table>"
        f'<p><a class="checks-ledger-download" href="{html.escape(json_href)}" download>'
        f"Download every record as JSON ({LEDGER_JSON})</a></p></div>"
    )


def _chapters_html(entries: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    """Checks per chapter and outcome, each chapter linked to its page, in the book's order."""
    first: dict[str, Entry] = {}
    by_chapter: dict[str, Counter[str]] = {}
    for item in entries:
        first.setdefault(item["chapter"], item)
        by_chapter.setdefault(item["chapter"], Counter())[item["outcome"]] += 1
    outcomes = [outcome for outcome in OUTCOME_ORDER if any(outcome in counts for counts in by_chapter.values())]
    head = "<th>chapter</th><th>checks</th>" + "".join(f"<th>{html.escape(outcome)}</th>" for outcome in outcomes)
    rows = "".join(
        f'<tr><td><a href="{html.escape(link(first[chapter]).split("#")[0])}">{html.escape(chapter)}</a></td>'
        f"<td>{sum(counts.values())}</td>" + "".join(f"<td>{counts.get(outcome, 0)}</td>" for outcome in outcomes)
        + "</tr>"
        for chapter, counts in by_chapter.items()
    )
    return (f'<table class="checks-counts checks-ledger-chapters"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _table_html(entries: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    head = "".join(f'<th scope="col">{html.escape(name)}</th>' for name in COLUMNS.values())
    rows = "".join(
        f'<tr class="checks-{item["verdict"]} checks-outcome-{_slug(item["outcome"])}">'
        + "".join(_ledger_cell(key, item, record, link) for key in COLUMNS)
        + "</tr>"
        for item, record in ((item, Record.from_dict(item)) for item in entries)
    )
    return (f'<div class="checks-ledger-table"><table class="checks-table checks-ledger">'
            f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")


def _ledger_cell(key: str, item: Entry, record: Record, link: Callable[[Entry], str]) -> str:
    if key == "outcome":
        return f'<td class="checks-verdict">{html.escape(item["outcome"])}</td>'
    if key == "chapter":
        return f'<td class="checks-chapter"><a href="{html.escape(link(item))}">{html.escape(item["chapter"])}</a></td>'
    if key == "how":
        text = item["how"] + (f" ({item['method']})" if item.get("method") else "")
        return f'<td class="checks-how" title="{html.escape(HOW_WORDS.get(item["how"], item["how"]))}">{html.escape(text)}</td>'
    if key in ("analytical_gradient", "observed_gradient"):
        # Mismatched elements are marked; their list by index is on the chapter's page, a click away.
        # Sorting and searching read the value's text, not the folded markup.
        return (f'<td class="checks-{key}" data-order="{html.escape(cell_text(key, record))}">'
                f"{vector_html(getattr(record, key), mismatched_indices(record))}</td>")
    if key == "abs_error":
        return (f'<td class="checks-abs_error-rel_error" data-order="{record.abs_error}">abs '
                f"{html.escape(cell_text('abs_error', record))}<br>rel {html.escape(cell_text('rel_error', record))}</td>")
    return f'<td class="checks-{key}">{html.escape(cell_text(key, record))}</td>'


def _table_script(table_library: str) -> str:
    """DataTables with SearchPanes on the ledger table, from the bundle the itables package ships.

    itables (pinned in requirements.txt) ships DataTables 2 with its SearchPanes extension as one ES
    module; the build copies it into the site, so the page needs no CDN. The only code here is DataTables'
    configuration: failures first (the table's own order, so no initial sort), a pane of values with
    counts per filter column, and paging so the page stays short.
    """
    columns = list(COLUMNS)
    options = {
        "order": [],
        "pageLength": 25,
        "lengthMenu": [10, 25, 50, 100, 500],
        "autoWidth": False,
        "layout": {"top1": {"searchPanes": {"columns": [columns.index(key) for key in FILTERS],
                                            "cascadePanes": True, "viewTotal": True,
                                            "layout": "columns-5"}}},
        "language": {"searchPanes": {"title": {"_": "%d filters active", "0": "Filter by outcome, chapter, how, "
                                                                             "dtype or device", "1": "1 filter active"}}},
        "columnDefs": [{"searchPanes": {"show": True}, "targets": [columns.index(key) for key in FILTERS]},
                       {"searchPanes": {"show": False}, "targets": [index for index, key in enumerate(columns)
                                                                      if key not in FILTERS]}],
    }
    return (f'<link rel="stylesheet" href="{html.escape(table_library.removesuffix(".js") + ".css")}">'
            f'<script type="module">import DataTable from "{html.escape(table_library)}";\n'
            f"const options = {json.dumps(options)};\n"
            # On a phone the panes start folded (five of them would fill the screen before the table).
            f'options.layout.top1.searchPanes.initCollapsed = matchMedia("(max-width: 768px)").matches;\n'
            f'new DataTable("table.checks-ledger", options);</script>')


def _slug(outcome: str) -> str:
    return outcome.replace(" ", "-")
