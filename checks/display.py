"""Display: records as tables with expected and observed in separate columns, shape/dtype/device beside.

The HTML of executed records also embeds them as JSON, which the book's ledger collects.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .records import Record

RECORDS_MIME = "application/vnd.checks.records+json"

COLUMNS = {
    "check": "check",
    "x": "input x",
    "input_shape": "shape",
    "dtype": "dtype",
    "device": "device",
    "analytical_gradient": "expected (analytical)",
    "observed_gradient": "observed",
    "how": "observed how",
    "abs_error": "abs error",
    "rel_error": "rel error",
    "tolerance": "tolerance",
    "verdict": "verdict",
}

# Extra columns a chapter may ask for (records_html(records, columns=(*COLUMNS, *NUMERICAL_COLUMNS))):
# how a numerical estimate was made. Not in the default table, which every chapter shares.
NUMERICAL_COLUMNS = {
    "method": "method",
    "step": "step h",
    "evaluations": "f evaluations",
    "error_estimate": "error estimate",
}
HEADINGS = {**COLUMNS, **NUMERICAL_COLUMNS}

METHOD_WORDS = {
    "forward": "forward differences",
    "central": "central differences",
    "complex": "complex step",
    "richardson": "Richardson-extrapolated central differences",
}

HOW_WORDS = {
    "stored": "stored in .grad by backward()",
    "returned": "returned by autograd.grad",
    "numerical": "numerical estimate",
}


def format_value(value: Any) -> str:
    """Numbers to 10 significant digits (6.0 shows as 6), nested lists bracketed, None as 'none'."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return format(value, ".10g")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(item) for item in value) + "]"
    return str(value)


def _cell(key: str, record: Record) -> str:
    value = getattr(record, key)
    if key == "input_shape":
        return "(" + ", ".join(str(n) for n in value) + ("," if len(value) == 1 else "") + ")"
    if key == "how":
        words = HOW_WORDS.get(value, value)
        if value == "numerical" and record.method:
            words = f"{words} ({METHOD_WORDS.get(record.method, record.method)})"
        return words if record.executed else f"to be {value}"
    if key == "observed_gradient" and not record.executed:
        return "none (not run)"
    if key in ("abs_error", "rel_error") and value is not None:
        return format(value, ".3g")
    if key in ("step", "error_estimate"):
        return _short_numbers(value)
    if key == "tolerance":
        return f"rtol {value['rtol']:.3g}, atol {value['atol']:.3g}"
    if key == "verdict" and record.expected_failure:
        return f"{value} (expected failure)"
    return format_value(value)


def _short_numbers(value: Any) -> str:
    """Steps and error estimates to 3 significant digits: their order of magnitude is what matters."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short_numbers(item) for item in value) + "]"
    return format(value, ".3g")


def records_frame(records: Sequence[Record], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A table of records, one row each, with the reader's column names."""
    keys = list(columns or COLUMNS)
    return pd.DataFrame([[_cell(key, record) for key in keys] for record in records],
                        columns=[HEADINGS.get(key, key) for key in keys])


def records_html(records: Sequence[Record], columns: Sequence[str] | None = None) -> str:
    """The table, the tolerances' reasons, and (for executed records) the records as embedded JSON."""
    keys = list(columns or COLUMNS)
    head = "".join(f"<th>{html.escape(HEADINGS.get(key, key))}</th>" for key in keys)
    # Row classes let the page colour verdicts; row ids make each check linkable.
    rows = "".join(
        f'<tr id="{html.escape(record.id)}" class="checks-{record.verdict}">'
        + "".join(f'<td class="checks-{key}">{html.escape(_cell(key, record))}</td>' for key in keys)
        + "</tr>"
        for record in records
    )
    table = f'<table class="checks-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return table + tolerance_notes(records) + embed(records)


def tolerance_notes(records: Sequence[Record]) -> str:
    notes = dict.fromkeys(
        f"{record.dtype}: rtol {record.tolerance['rtol']:.3g}, atol {record.tolerance['atol']:.3g} "
        f"({record.tolerance['reason']})"
        for record in records
    )
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return f'<p class="checks-tolerances">Tolerances:</p><ul class="checks-tolerances">{items}</ul>'


def embed(records: Sequence[Record]) -> str:
    """Executed records as JSON inside the page, for the ledger; '</' is escaped so HTML stays intact."""
    executed = [record.to_dict() for record in records if record.executed]
    if not executed:
        return ""
    payload = json.dumps(executed, sort_keys=True).replace("</", "<\\/")
    return f'<script type="{RECORDS_MIME}">{payload}</script>'
