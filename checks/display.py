"""Display: records as tables with expected and observed in separate columns, shape/dtype/device beside.

The HTML of executed records also embeds them as JSON, which the book's ledger collects.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
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
    "create_graph": "returned by autograd.grad with create_graph=True",
    "jacrev": "reverse mode, torch.func.jacrev",
    "jacfwd": "forward mode, torch.func.jacfwd",
    "hessian": "torch.func.hessian",
    "numerical": "numerical estimate",
    "gradcheck": "torch.autograd.gradcheck",
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


def cell_text(key: str, record: Record) -> str:
    """One cell of a check table, as the reader sees it."""
    if key == "pass":
        # A script's pass: its label without the script's name, which the whole table shares.
        return record.check.split(": ", 1)[-1]
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
        return rtol_atol(value["rtol"], value["atol"])
    if key == "verdict" and record.expected_failure:
        return f"{value} (expected failure)" if not record.passed else f"{value} (a failure was expected)"
    return format_value(value)


def rtol_atol(rtol: float, atol: float) -> str:
    return f"rtol {rtol:.3g}, atol {atol:.3g}"


def _short_numbers(value: Any) -> str:
    """Steps and error estimates to 3 significant digits: their order of magnitude is what matters."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short_numbers(item) for item in value) + "]"
    return format(value, ".3g")


def records_frame(records: Sequence[Record], columns: Sequence[str] | None = None,
                  headings: dict[str, str] | None = None) -> pd.DataFrame:
    """A table of records, one row each, with the reader's column names."""
    keys = list(columns or COLUMNS)
    names = {**HEADINGS, **(headings or {})}
    return pd.DataFrame([[cell_text(key, record) for key in keys] for record in records],
                        columns=[names.get(key, key) for key in keys])


def records_html(records: Sequence[Record], columns: Sequence[str] | None = None,
                 headings: dict[str, str] | None = None) -> str:
    """The table, the tolerances' reasons, each failure in full, and the executed records as embedded JSON."""
    keys = list(columns or COLUMNS)
    names = {**HEADINGS, **(headings or {})}
    head = "".join(f"<th>{html.escape(names.get(key, key))}</th>" for key in keys)
    rows = "".join(_row(record, keys) for record in records)
    table = f'<table class="checks-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    failures = "".join(failure_html(record) for record in records if record.executed and not record.passed)
    return table + tolerance_notes(records) + failures + embed(records)


def _row(record: Record, keys: Sequence[str]) -> str:
    # Row classes let the page colour verdicts; executed rows get the record's id, so each check is linkable
    # (a plan's rows share those ids and would collide with the results on the same page).
    anchor = f' id="{html.escape(record.id)}"' if record.executed else ""
    cells = []
    for key in keys:
        text = html.escape(cell_text(key, record))
        if key == "verdict" and record.executed and not record.passed:
            text = f'<a href="#{html.escape(failure_anchor(record))}">{text}</a>'
        cells.append(f'<td class="checks-{key}">{text}</td>')
    return f'<tr{anchor} class="checks-{record.verdict}">{"".join(cells)}</tr>'


def failure_anchor(record: Record) -> str:
    return f"{record.id}-failure"


def failure_html(record: Record) -> str:
    """A failed check with everything needed to judge and reproduce it: discrepancy, code, environment."""
    kind = "expected failure (a demonstration)" if record.expected_failure else "unexpected failure"
    title = (f"Failed check: {record.check} ({record.dtype} on {record.device}, "
             f"{HOW_WORDS.get(record.how, record.how)}) — {kind}")
    sections = {
        "Discrepancy": _pre(record.message) + _definitions(discrepancy(record)),
        "Where the numbers came from": _definitions({
            "expected": f"analytical: {record.gradient_formula} ({record.derivative_source})",
            "observed": cell_text("how", record),
        }),
        "Code": "".join(f'<p class="checks-code-name">{html.escape(name)}</p>{_pre(code)}'
                        for name, code in record.code.items()),
        "Environment": _definitions(environment_items(record)),
    }
    body = "".join(f"<h4>{html.escape(name)}</h4>{content}" for name, content in sections.items())
    classes = "checks-failure checks-expected-failure" if record.expected_failure else "checks-failure"
    return (f'<div class="{classes}" id="{html.escape(failure_anchor(record))}">'
            f'<p class="checks-failure-title">{html.escape(title)}</p>{body}</div>')


def discrepancy(record: Record) -> dict[str, str]:
    """Expected and observed, the errors, the worst element, and the tolerance with its reason and history."""
    index = tuple(record.worst_index or ())
    tolerance = record.tolerance
    items = {
        "expected": format_value(record.analytical_gradient),
        "observed": format_value(record.observed_gradient),
        "greatest absolute error": _short_numbers(record.abs_error),
        "greatest relative error": _short_numbers(record.rel_error),
        "worst element": (f"index {index}: expected {format_value(_element(record.analytical_gradient, index))}, "
                          f"observed {format_value(_element(record.observed_gradient, index))}"),
        "mismatched elements": format_value(record.mismatched),
        "tolerance": f"{rtol_atol(tolerance['rtol'], tolerance['atol'])} ({tolerance['reason']})",
    }
    for number, change in enumerate(tolerance.get("history", ()), start=1):
        items[f"tolerance change {number}"] = _change_words(change)
    return items


def environment_items(record: Record) -> dict[str, str]:
    env = record.environment
    return {
        "torch": str(env.get("torch")),
        "python": str(env.get("python")),
        "OS": str(env.get("os")),
        "CPU": str(env.get("cpu")),
        "GPU": str(env.get("gpu") or "none"),
        "device": f"{record.device} ({record.device_name})",
        "dtype": record.dtype,
        "default dtype": str(env.get("default_dtype")),
        "seed": str(env.get("seed")),
    }


def _element(value: Any, index: tuple[int, ...]) -> Any:
    for position in index:
        value = value[position]
    return value


def _change_words(change: dict[str, Any]) -> str:
    return (f"{rtol_atol(change['old_rtol'], change['old_atol'])} → {rtol_atol(change['rtol'], change['atol'])}, "
            f"because: {change['reason']}")


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _definitions(items: dict[str, str]) -> str:
    return "<dl>" + "".join(f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>"
                            for key, value in items.items()) + "</dl>"


def tolerance_notes(records: Sequence[Record]) -> str:
    """Each tolerance once, with its reason and, where it was changed, what it was and why it changed."""
    notes = dict.fromkeys(
        f"{record.dtype}: {rtol_atol(record.tolerance['rtol'], record.tolerance['atol'])} "
        f"({record.tolerance['reason']})"
        + "".join(f"; changed from {_change_words(change)}" for change in record.tolerance.get("history", ()))
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


@dataclass(frozen=True)
class Table:
    """A chapter's own table (not a check table): shows as HTML without the index."""

    frame: pd.DataFrame

    def _repr_html_(self) -> str:
        return table_html(self.frame)


@dataclass(frozen=True)
class Quote:
    """A message PyTorch emitted, shown verbatim as a quotation that wraps anywhere.

    Its paths and URLs are single unbreakable words wider than a phone; wrapping them keeps the page
    from scrolling sideways without changing a character of the text.
    """

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (f'<blockquote class="checks-quote" style="overflow-wrap: anywhere;">'
                f"{html.escape(self.text)}</blockquote>")


def table_html(frame: pd.DataFrame) -> str:
    """A chapter's own table, told apart from the shared check tables by its class.

    It scrolls sideways inside its own box: its texts may make it wider than a phone, and the page
    itself must never scroll sideways (the style is inline so the table needs no stylesheet).
    """
    table = frame.to_html(index=False, classes="checks-passes", border=0, justify="left")
    return f'<div class="checks-passes-scroll" style="overflow-x: auto; max-width: 100%;">{table}</div>'


def provenance_frame(records: Sequence[Record]) -> pd.DataFrame:
    """Where each derivative came from: one row per record, with shape/dtype/device and the verdict."""
    return pd.DataFrame([
        {
            "check": record.check,
            "where the derivative came from": HOW_WORDS.get(record.how, record.how),
            "expected": format_value(record.analytical_gradient),
            "observed": format_value(record.observed_gradient),
            "shape": cell_text("input_shape", record),
            "dtype": record.dtype,
            "device": record.device,
            "verdict": cell_text("verdict", record),
        }
        for record in records
    ])


def provenance_table(records: Sequence[Record]) -> Table:
    """provenance_frame for the page. Its records are shown (and embedded) where they ran, not again here."""
    return Table(provenance_frame(records))


def plain(value: Any) -> float | str:
    """A one-element value as a float to glue into prose, or "none" where there was none."""
    if value is None:
        return "none"
    flat = value
    while isinstance(flat, list) and len(flat) == 1:
        flat = flat[0]
    if not isinstance(flat, (int, float)) or isinstance(flat, bool):
        raise ValueError(f"plain() glues one number; got {value!r}")
    return float(flat)
