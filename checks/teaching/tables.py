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
from .display import HOW_WORDS, cell_text, embed, failure_html, format_value, tolerance_notes, weak_notes
from .records import Record
from .results import Results

if TYPE_CHECKING:  # pandas is imported where a frame is made: the build's Sphinx process imports
    import pandas as pd  # the package and makes none, and pandas costs it about 0.2 s

SCRIPT_EXPECTED = "expected (from the analytical derivative)"
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

        return pd.DataFrame([
            {
                "verdict": cell_text("verdict", record),
                "pass": record.check.removeprefix(f"{self._script}: "),
                SCRIPT_EXPECTED: cell_text("analytical_gradient", record),
                "observed": cell_text("observed_gradient", record),
                "observed how": cell_text("how", record),
                "dtype": record.dtype,
                "device": record.device,
                SCRIPT_DETECTS: "none" if record.detectable_relative_error is None
                else f"{record.detectable_relative_error:.2g}",
            }
            for record in self._records
        ])

    def _repr_html_(self) -> str:
        records = list(self._records)
        failures = "".join(failure_html(record) for record in records if not record.passed)
        # Each row carries its record's id: the ledger links every check to its row on the page.
        return (table_html(self.frame(), [record.id for record in records]) + weak_notes(records)
                + tolerance_notes(records) + failures + embed(records))


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
    from scrolling sideways without changing a character of the text. Its line breaks are kept: gradcheck
    prints a Jacobian one row per line.
    """

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (f'<blockquote class="checks-quote" style="overflow-wrap: anywhere; white-space: pre-wrap;">'
                f"{html.escape(self.text)}</blockquote>")


def table_html(frame: pd.DataFrame, row_ids: Sequence[str] = ()) -> str:
    """A chapter's own table, told apart from the shared check tables by its class; rows get row_ids.

    It scrolls sideways inside its own box: its texts may make it wider than a phone, and the page
    itself must never scroll sideways (the style is inline so the table needs no stylesheet).
    """
    # The verdict first: on a phone the rest of the row scrolls, the verdict stays in view.
    columns = [column for column in frame.columns if column == "verdict"]
    columns += [column for column in frame.columns if column != "verdict"]
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in columns)
    ids = list(row_ids) or [""] * len(frame)
    rows = "".join(
        (f'<tr id="{html.escape(row_id)}">' if row_id else "<tr>")
        + "".join(f"<td>{html.escape(str(row[column]))}</td>" for column in columns) + "</tr>"
        for row_id, (_, row) in zip(ids, frame.iterrows())
    )
    table = f'<table class="dataframe checks-passes"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return f'<div class="checks-passes-scroll" style="overflow-x: auto; max-width: 100%;">{table}</div>'


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
        raise CheckInputError(f"plain() glues one number; got {value!r}")
    return float(flat)
