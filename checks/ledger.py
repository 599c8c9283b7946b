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

from .display import HOW_WORDS, cell_text
from .errors import CheckInputError
from .records import PROBLEMS, Record

Entry = dict[str, Any]

LEDGER_JSON = "ledger.json"
# Problems first, then the demonstrations, then the passes: what needs a reader's attention is on top.
OUTCOME_ORDER = ("unexpected failure", "unexpected pass", "expected failure", "pass", "planned")
COLUMNS = {
    "chapter": "chapter",
    "check": "check",
    "function": "function",
    "x": "input x",
    "dtype": "dtype",
    "device": "device",
    "analytical_gradient": "expected (analytical)",
    "observed_gradient": "observed",
    "how": "where it came from",
    "abs_error": "abs error",
    "rel_error": "rel error",
    "tolerance": "tolerance",
    "verdict": "verdict",
    "expected_failure": "expected failure",
}


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


def ledger_html(entries: Sequence[Entry], *, link: Callable[[Entry], str], json_href: str) -> str:
    """The summary, a download link to the JSON, and one table of every check, failures first."""
    return _summary_html(entries, json_href) + _table_html(ordered(entries), link)


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
        f'<table class="checks-table checks-ledger-devices"><thead><tr>{device_head}</tr></thead>'
        f"<tbody>{device_rows}</tbody></table>"
        f'<p><a class="checks-ledger-download" href="{html.escape(json_href)}" download>'
        f"Download every record as JSON ({LEDGER_JSON})</a></p></div>"
    )


def _table_html(entries: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    head = "".join(f"<th>{html.escape(name)}</th>" for name in COLUMNS.values())
    rows = "".join(
        f'<tr class="checks-{item["verdict"]} checks-outcome-{_slug(item["outcome"])}">'
        + "".join(f'<td class="checks-{key}">{_ledger_cell(key, item, record, link)}</td>' for key in COLUMNS)
        + "</tr>"
        for item, record in ((item, Record.from_dict(item)) for item in entries)
    )
    return f'<table class="checks-table checks-ledger"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _ledger_cell(key: str, item: Entry, record: Record, link: Callable[[Entry], str]) -> str:
    if key == "chapter":
        return f'<a href="{html.escape(link(item))}">{html.escape(item["chapter"])}</a>'
    if key == "how":
        return html.escape(f"expected: analytical; observed: {HOW_WORDS.get(item['how'], item['how'])}"
                           + (f" ({item['method']})" if item.get("method") else ""))
    if key == "expected_failure":
        return "yes" if item["expected_failure"] else "no"
    if key == "verdict":
        return html.escape(item["outcome"])
    return html.escape(cell_text(key, record))


def _slug(outcome: str) -> str:
    return outcome.replace(" ", "-")
