"""The rows of plain cells' checks (checks.expect, checks.raises), as a reader sees them.

At a Python prompt each check prints one line:

    ✓ pass  d/dx x·x = 2x at 3: expected 6, observed 6 (float32, cpu)

its mark and verdict in the outcome's colour in a terminal or a notebook (plain text into a file or a pipe).

In a page, the rows of one cell (one per check, dtype and device) are shown together after the cell: a
compact table (verdict, check with how its value was produced, expected, observed, dtype · device), which
checks.css lays out as cards on a phone. The reader's own run (PyTorch's default dtype on the CPU) is in
view; the other runs' rows of a check that read exactly as the reader's (the same expected and observed
values, how they were made, each a pass) are folded behind one toggle under the table, so that a page
reads as the plain float32 run unless another dtype or device shows something else. Under the table, one
box per failed check with the words a learner would search for (PyTorch's message, or the comparison and its
diagnosis) in view and the rest (code, environment, the whole record) folded. The records are embedded as JSON for the ledger's cross-check (display.embed).
"""

from __future__ import annotations

import html
import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from .display import (RAISED_PREFIX, data_label, embed, environment_items, failure_anchor, format_value, how_words,
                      indexed, percent, table_box, vector_html, weak_anchor, weak_notes)
from .records import Record

MARKS = {"pass": "✓", "fail": "✗", "inconclusive": "?"}
# Where a record keeps what the chapter declared (expected_failure="why", inconclusive="why").
DECLARED = "Declared: "
RAISED = RAISED_PREFIX  # display.raised_type reads the error's type back from this line
DIAGNOSIS = "Diagnosis: "


def _line_of(record: Record, start: str) -> str:
    return next((line.removeprefix(start) for line in record.message.splitlines() if line.startswith(start)), "")


def declared(record: Record) -> str:
    return _line_of(record, DECLARED)


def raised(record: Record) -> str:
    """'RuntimeError: message' when the check's statement raised; '' otherwise."""
    return _line_of(record, RAISED)


def diagnosis_of(record: Record) -> str:
    return _line_of(record, DIAGNOSIS)


def verdict_words(record: Record) -> str:
    """'pass', 'fail', 'fail, as declared: why' (a demonstration), 'inconclusive'."""
    why = declared(record)
    if why:
        return f"{record.verdict}, as declared: {why}"
    return str(record.verdict)


def short(message: str, limit: int = 90) -> str:
    """The words of an error a learner would search for: its first sentence, when the whole is long."""
    if len(message) <= limit:
        return message
    cut = min((at for at in (message.find(". "), message.find(" (")) if at > 0), default=limit)
    return message[:cut] + " …"


def expected_text(record: Record) -> str:
    if record.gradient_formula.startswith("raises "):
        return record.gradient_formula
    return "None" if record.analytical_gradient is None else format_value(record.analytical_gradient)


def observed_text(record: Record) -> str:
    error = raised(record)
    if error:
        return f"{how_words(record).split(':')[0]}: {short(error.split(': ', 1)[-1])}"
    return "None" if record.observed_gradient is None else format_value(record.observed_gradient)


# A printed line's mark and verdict in the colour of its outcome, as the page's tables colour them (green a pass,
# red a problem, orange a demonstration): ANSI escape codes, which a terminal and a notebook's output (JupyterLab,
# Colab, VS Code) show as colours. Green and red are the terminal's own (they follow its theme); orange is
# colour 130 of the 256 (#af5f00), where the 16 have only a yellow that is hard to read on white.
LINE_COLOURS = {
    "pass": "32",
    "unexpected failure": "31",
    "unexpected pass": "31",
    "unexpected inconclusive": "31",
    "expected failure": "38;5;130",
    "expected inconclusive": "38;5;130",
}


def in_colour(stream: TextIO | None = None) -> bool:
    """Whether lines printed to stream (sys.stdout) are shown in colour: in a terminal, or in a notebook (the
    stream of an IPython kernel, whose front end renders ANSI codes); never into a file or a pipe, nor where
    the NO_COLOR environment variable is set (no-color.org)."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR"):
        return False
    if type(stream).__module__.split(".")[0] == "ipykernel":
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def line(record: Record, colour: bool = False) -> str:
    """One line of text for a check: verdict, label, expected, observed, dtype and device, the slip seen.

    With colour, the mark and verdict are wrapped in the ANSI codes of the outcome's colour (LINE_COLOURS);
    the text is the same.
    """
    mark = MARKS.get(str(record.verdict), "·")
    verdict = f"{mark} {verdict_words(record)}"
    code = LINE_COLOURS.get(str(record.status)) if colour else None
    if code:
        verdict = f"\033[{code}m{verdict}\033[0m"
    text = (f"{verdict}  {record.check}: expected {expected_text(record)}, "
            f"observed {observed_text(record)} ({record.dtype}, {record.device})")
    found = diagnosis_of(record)
    if record.weak:
        return f"{text} — weak: its allowance would pass a gradient up to {percent(record.detectable_relative_error)} wrong"
    return f"{text} — {found}" if found and record.verdict != "pass" else text


def rows_html(records: Sequence[Record], reader: tuple[str, str] | None = None) -> str:
    """The compact table of a cell's rows, each failure under it, and the records embedded for the ledger.
    reader: the (dtype, device) of the run the reader sees; the other runs' rows that read as its own are
    folded (see the module's docstring)."""
    head = "".join(f'<th scope="col">{name}</th>' for name in COLUMNS)
    cells = {record.id: _cells(record) for record in records}  # rendered once, compared and shown
    folded = agreeing(records, reader, cells) if reader else set()
    body = "".join(_row(record, cells[record.id], record.id in folded) for record in records)
    table = table_box(f'<table class="checks-table checks-rows"><thead><tr>{head}</tr></thead>'
                      f"<tbody>{body}</tbody></table>" + _runs_toggle([r for r in records if r.id in folded], reader))
    return table + weak_notes(records) + failures_html(records) + embed(records)


def agreeing(records: Sequence[Record], reader: tuple[str, str], cells: dict[str, tuple[str, ...]]) -> set[str]:
    """The ids of the rows that say nothing the reader's own run does not: per check, every other run's row,
    where each of them and the reader's row pass and read the same (expected, observed, how). cells: each
    record's rendered cells (_cells), by id."""

    def reads(record: Record) -> tuple[str, ...]:  # what a row shows besides its verdict, dtype and device
        _, check, shape, _, expected, observed = cells[record.id]
        return check, shape, expected, observed

    folded: set[str] = set()
    for check in dict.fromkeys(record.check for record in records):
        runs = [record for record in records if record.check == check]
        own = [record for record in runs if (record.dtype, record.device) == reader]
        others = [record for record in runs if (record.dtype, record.device) != reader]
        if len(own) == 1 and others and all(_plain_pass(r) and reads(r) == reads(own[0]) for r in [*own, *others]):
            folded.update(record.id for record in others)
    return folded


def _plain_pass(record: Record) -> bool:
    return record.verdict == "pass" and not record.weak and not declared(record)


def _runs_toggle(folded: Sequence[Record], reader: tuple[str, str] | None) -> str:
    """The toggle that shows the folded rows (checks.css hides them while it is closed); "" if none (there are
    none without a reader's run)."""
    if not folded:
        return ""
    runs = ", ".join(dict.fromkeys(f"{record.dtype} · {record.device}" for record in folded))
    several = len(folded) > 1
    return (f'<details class="checks-runs"><summary>{len(folded)} more row{"s" * several} ({runs}), '
            f'{"each " * several}reading as the {reader[0]} row of {"its" if several else "the same"} check: the '
            f'same values, {"each " * several}a pass</summary></details>')


COLUMNS = ("verdict", "check", "shape · dtype · device", "expected", "observed")


def shape_text(record: Record) -> str:
    """The observed value's shape, (3,) or (); "none" where no value was observed."""
    if record.observed_gradient is None:
        return "none"
    shape = record.input_shape
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _row(record: Record, cells: tuple[str, ...], folded: bool) -> str:
    verdict, check, shape, dtype, expected, observed = cells
    row = (f'<td class="checks-verdict" data-field="verdict"{data_label("verdict")}>{verdict}</td>'
           f'<td class="checks-check"{data_label("check")}>{check}</td>'
           f'<td class="checks-input_shape-dtype-device"{data_label("shape · dtype · device")}>'
           f'<span data-field="input_shape">{shape}</span> · {dtype}</td>'
           f'<td class="checks-analytical_gradient" data-field="analytical_gradient"{data_label("expected")}>'
           f"{expected}</td>"
           f'<td class="checks-observed_gradient" data-field="observed_gradient"{data_label("observed")}>'
           f"{observed}</td>")
    declared_note = declared(record)
    outcome = ("expected-failure" if declared_note and record.verdict == "fail" else
               "unexpected-failure" if record.verdict == "fail" else str(record.verdict))
    classes = " checks-weak" * record.weak + " checks-run-folded" * folded
    return (f'<tr id="{html.escape(record.id)}" class="checks-{html.escape(str(record.verdict))} '
            f'checks-outcome-{outcome}{classes}">{row}</tr>')


def _cells(record: Record) -> tuple[str, str, str, str, str, str]:
    """A row's cells as HTML: verdict, check (with how), shape, dtype · device, expected, observed."""
    declared_note = declared(record)
    note = '<span class="checks-verdict-note">as declared</span>' if declared_note else ""
    verdict = html.escape(str(record.verdict)) + note
    if record.weak:  # "weak" under the word, linked to why, under the table
        verdict += (f'<a class="checks-verdict-note checks-weak-note" '
                    f'href="#{html.escape(weak_anchor(record))}">weak</a>')
    if record.verdict != "pass":
        verdict = f'<a href="#{html.escape(failure_anchor(record))}">{verdict}</a>'
    made = estimate_words(record)
    check = (f'<span data-field="check">{html.escape(record.check)}</span><br>'
             f'<span class="checks-how" data-field="how">{html.escape(how_words(record))}</span>'
             + (f'<br><span class="checks-how checks-estimate">{html.escape(made)}</span>' if made else ""))
    expected = (html.escape(expected_text(record)) if record.analytical_gradient is None
                else vector_html(record.analytical_gradient))
    error = raised(record)
    observed = _folded_error(error, raised_whole(record)) if error else (
        html.escape(observed_text(record)) if record.observed_gradient is None else vector_html(record.observed_gradient))
    place = (f'<span data-field="dtype">{html.escape(record.dtype)}</span> · '
             f'<span data-field="device">{html.escape(record.device)}</span>')
    return verdict, check, html.escape(shape_text(record)), place, expected, observed


def _numbers(value: object) -> list[float]:
    return [float(item) for _, item in indexed(value)]


def estimate_words(record: Record) -> str:
    """How a numerical estimate was made, shown with its result: its step(s), evaluations of f and (Richardson)
    its error estimate; "" for any other value."""
    if record.how != "numerical" or record.evaluations is None or record.step is None:
        return ""
    steps = _numbers(record.step)
    step = f"h = {steps[0]:.2g}" if min(steps) == max(steps) else f"h from {max(steps):.2g} to {min(steps):.2g}"
    error = (f", error estimate {max(_numbers(record.error_estimate)):.2g}"
             if record.error_estimate is not None else "")
    return f"{step}, {record.evaluations} evaluations of f{error}"


def raised_whole(record: Record) -> str:
    """'RuntimeError: PyTorch's whole message', all its lines (raised() has the first); '' if nothing raised."""
    error = raised(record)
    lines = record.message.splitlines()
    start = next((number for number, line in enumerate(lines) if line.startswith(RAISED)), None)
    if not error or start is None:
        return ""
    rest = [line for line in lines[start + 1:] if not line.startswith((DECLARED, DIAGNOSIS))]
    return f"{error.split(': ', 1)[0]}: " + "\n".join(rest) if rest else error


def _folded_error(error: str, whole: str) -> str:
    """PyTorch's error, its first sentence in view and the rest (the lines after the first too) a click away."""
    shown = short(error)
    if shown == error == whole or not whole:
        return html.escape(error)
    if shown == error:
        shown += " …"
    return (f'<details class="checks-error"><summary>{html.escape(shown)}</summary>'
            f"{html.escape(whole)}</details>")


def failures_html(records: Sequence[Record]) -> str:
    """The failures of a cell, one box per check: its rows' dtypes and devices together when they failed alike."""
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for record in records:
        if record.verdict != "pass":
            key = (record.check, str(record.verdict), raised(record).split(":", 1)[0] or diagnosis_of(record))
            groups.setdefault(key, []).append(record)
    return "".join(failure_html(group) for group in groups.values())


def failure_html(group: Sequence[Record]) -> str:
    """A check's failure, compact: what a learner would search for in view (PyTorch's message, or expected
    against observed and the slip the numbers show); the message, code, environment and records folded."""
    first = group[0]
    why = declared(first)
    kind = f"as declared: {why}" if why else "not declared: a problem"
    where = " and ".join(dict.fromkeys(f"{record.dtype}, {record.device}" for record in group))
    title = f"{first.check} ({where}): {first.verdict}, {kind}"
    error = raised(first)
    leads = [short(error)] if error else [
        f"expected {expected_text(record)}, observed {observed_text(record)} ({record.dtype}, {record.device})"
        for record in group]
    shown = "".join(f'<pre class="checks-message">{html.escape(lead)}</pre>' for lead in leads)
    found = diagnosis_of(first)
    if found:
        shown += f'<p class="checks-diagnosis">{html.escape(found)}</p>'
    folded = "".join(_details(record) for record in group)
    anchors = "".join(f'<span id="{html.escape(failure_anchor(record))}"></span>' for record in group[1:])
    classes = "checks-failure checks-compact" + (" checks-expected-failure" if why else "")
    return (f'<div class="{classes}" id="{html.escape(failure_anchor(first))}">{anchors}'
            f'<p class="checks-failure-title">{html.escape(title)}</p>{shown}{folded}</div>')


def _details(record: Record) -> str:
    code = "".join(f"<pre class=\"checks-code\">{html.escape(text)}</pre>" for text in record.code.values())
    environment = "".join(f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>"
                          for key, value in environment_items(record).items())
    whole = html.escape(json.dumps(record.to_dict(), indent=1, sort_keys=True))
    return (f'<details class="checks-failure-details"><summary>details ({html.escape(record.dtype)}, '
            f"{html.escape(record.device)}): message, code, environment, record</summary>"
            f"<pre>{html.escape(record.message)}</pre><h4>Code</h4>{code}"
            f"<h4>Environment</h4><dl>{environment}</dl><h4>Record</h4><pre>{whole}</pre></details>")


class Rows:
    """A cell's rows: text lines in a terminal or a notebook's plain view, the table in a page."""

    def __init__(self, records: Sequence[Record], reader: tuple[str, str] | None = None) -> None:
        self.records = list(records)
        self.reader = reader

    def __repr__(self) -> str:
        return "\n".join(line(record) for record in self.records)

    def _repr_html_(self) -> str:
        return rows_html(self.records, self.reader)
