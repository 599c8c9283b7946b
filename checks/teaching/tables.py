"""A chapter's own tables and quotations, beside the shared check tables of checks.teaching.display.

- ScriptResults: the passes of a script (checks.run_script), one row each, whose expected column says what
  it holds: the value worked out from the analytical derivative at that point of the script (for x.grad
  after several backward() calls, the accumulated sum), then each failure in full and the records embedded
  for the ledger, as every check table does;
- provenance_table: where each derivative of a page came from;
- Quote: a message PyTorch emitted, verbatim; plain: one number to glue into prose.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import CheckInputError
from .display import (cell_text, data_label, embed, failure_html, format_value, table_box,
                      tolerance_notes, verdict_mark, weak_notes)
from .records import Record
from .results import Results

if TYPE_CHECKING:  # pandas is imported where a frame is made: the build's Sphinx process imports
    import pandas as pd  # the package and makes none, and pandas costs it about 0.2 s

SCRIPT_EXPECTED = "expected (from the analytical derivative)"
# The script's label of each value it handed to see(...): what was read at that point of the script.
SCRIPT_READ = "what was read"
# What each pass's allowance could catch: the smallest relative error of the gradient it fails.
SCRIPT_DETECTS = "detects (relative error above)"


class ScriptResults(Results):
    """The executed records of a script's passes; displays as the pass table (records embedded)."""

    def __init__(self, records: Sequence[Record], script: str) -> None:
        super().__init__(records)
        self._script = script

    def one(self, **where: object) -> Record:
        """The single record whose fields equal where; what="..." picks a pass by its label."""
        what = where.pop("what", None)
        found = [r for r in self._records if all(getattr(r, key) == value for key, value in where.items())
                 and (what is None or r.check == f"{self._script}: {what}")]
        if len(found) != 1:
            raise CheckInputError(f"{len(found)} passes of {self._script} match {where | {'what': what}}; "
                                  f"expected exactly one")
        return found[0]

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{heading: text for heading, (_, text) in self._cells(record).items()}
                             for record in self._records])

    def _cells(self, record: Record) -> dict[str, tuple[str, str]]:
        """Each column of a pass's row: heading -> (the record field it shows, its text)."""
        return {
            "verdict": ("verdict", cell_text("verdict", record)),
            SCRIPT_READ: ("check", record.check.removeprefix(f"{self._script}: ")),
            SCRIPT_EXPECTED: ("analytical_gradient", cell_text("analytical_gradient", record)),
            "observed": ("observed_gradient", cell_text("observed_gradient", record)),
            "observed how": ("how", cell_text("how", record)),
            "dtype · device": ("dtype-device", f"{record.dtype} · {record.device}"),
            SCRIPT_DETECTS: ("detectable_relative_error", "none" if record.detectable_relative_error is None
                             else f"{record.detectable_relative_error:.2g}"),
        }

    def _repr_html_(self) -> str:
        records = list(self._records)
        # How each value was observed goes under what was read (as under a check's name in the other check
        # tables): one column fewer, so that every column fits a desktop's text column.
        headings = [heading for heading in (self._cells(records[0]) if records else ()) if heading != "observed how"]
        head = "".join(f'<th scope="col">{html.escape(heading)}</th>' for heading in headings)
        # Each row carries its record's id (the ledger links every check to its row on the page) and its
        # verdict's class (the verdict's colour and symbol, as in the other check tables).
        rows = "".join(
            f'<tr id="{html.escape(record.id)}" class="checks-{record.verdict} '
            f'checks-outcome-{record.status.replace(" ", "-")}">'
            + "".join(self._cell_html(record, heading, key, text)
                      for heading, (key, text) in self._cells(record).items() if heading != "observed how")
            + "</tr>"
            for record in records)
        table = table_box(f'<table class="checks-passes"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>')
        failures = "".join(failure_html(record) for record in records if not record.passed)
        return table + weak_notes(records) + tolerance_notes(records) + failures + embed(records)

    def _cell_html(self, record: Record, heading: str, key: str, text: str) -> str:
        content = f'<span data-field="{key}">{html.escape(text)}</span>'
        if key == "check":
            content += (f'<br><span class="checks-how" data-field="how">'
                        f'{html.escape(cell_text("how", record))}</span>')
        if key == "verdict":  # its mark and colour in the markup, as in the other check tables (a notebook has no CSS)
            mark, colour = verdict_mark(record)
            style = f' style="color: {colour}"' if colour else ""
            return (f'<td class="checks-verdict"{data_label(heading)}{style}><span class="checks-verdict-mark" '
                    f'aria-hidden="true">{mark} </span>{content}</td>')
        return f'<td class="checks-{key}"{data_label(heading)}>{content}</td>'


@dataclass(frozen=True)
class Table:
    """A chapter's own table (not a check table): shows as HTML without the index; css names it for the page."""

    frame: pd.DataFrame
    css: str = ""

    def _repr_html_(self) -> str:
        return table_html(self.frame, self.css)


@dataclass(frozen=True)
class Quote:
    """A message PyTorch emitted, shown verbatim as a quotation that wraps anywhere.

    Its paths and URLs are single unbreakable words wider than a phone; wrapping them keeps the page
    from scrolling sideways without changing a character of the text. Its line breaks are kept: gradcheck
    prints a Jacobian one row per line.
    """

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (f'<blockquote class="checks-quote" style="overflow-wrap: anywhere; white-space: pre-wrap;">'
                f"{html.escape(self.text)}</blockquote>")


def table_html(frame: pd.DataFrame, css: str = "") -> str:
    """A chapter's own table, told apart from the check tables by its class, laid out like them: its
    columns where they fit, a card of labelled cells per row where they do not (a phone)."""
    # The verdict first, where the eye starts.
    columns = [column for column in frame.columns if column == "verdict"]
    columns += [column for column in frame.columns if column != "verdict"]
    head = "".join(f'<th scope="col">{html.escape(str(column))}</th>' for column in columns)
    rows = "".join(
        "<tr>" + "".join(f"<td{data_label(str(column))}>{html.escape(str(row[column]))}</td>" for column in columns)
        + "</tr>"
        for _, row in frame.iterrows()
    )
    classes = " ".join(["checks-own", *css.split()])
    return table_box(f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>')


def provenance_frame(records: Sequence[Record]) -> pd.DataFrame:
    """Where each derivative came from: one row per record, with shape/dtype/device and the verdict."""
    if not isinstance(records, Sequence) or not all(isinstance(record, Record) for record in records):
        raise CheckInputError(f"provenance needs a sequence of Records (e.g. the results of a run), got {records!r:.80}")
    if not records:
        raise CheckInputError("provenance of no records: there is nothing to show")
    import pandas as pd

    return pd.DataFrame([
        {
            "check": record.check,
            "where the derivative came from": cell_text("how", record),
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
        raise CheckInputError(f"plain() glues one number; got {value!r}")
    return float(flat)
