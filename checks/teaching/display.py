"""Display: records as tables with expected and observed in separate columns, shape/dtype/device beside.

The HTML of executed records also embeds them as JSON, which the book's ledger collects.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..core.compare import beyond_allowance
from ..core.tolerances import atol_words
from . import provenance
from .environment import environment
from .records import WEAK_ABOVE, Record, displayed

if TYPE_CHECKING:  # pandas is imported where a frame is made: the build's Sphinx process imports
    import pandas as pd  # the package and makes none, and pandas costs it about 0.2 s

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
# Shown under every check, whatever the columns: what its allowance could have caught.
DETECTS = {"detectable_relative_error": "detects"}
HEADINGS = {**COLUMNS, **NUMERICAL_COLUMNS, **DETECTS}

METHOD_WORDS = {
    "forward": "forward differences",
    "central": "central differences",
    "complex": "complex step",
    "richardson": "Richardson-extrapolated central differences",
}

HOW_WORDS = {
    "stored": "stored in .grad",
    "returned": "returned by autograd.grad",
    "create_graph": "returned by autograd.grad with create_graph=True",
    "hook": "handed to a hook by backward()",
    "jacrev": "reverse mode, torch.func.jacrev",
    "jacfwd": "forward mode, torch.func.jacfwd",
    "vjp": "reverse mode, torch.func.vjp",
    "jvp": "forward mode, torch.func.jvp",
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
    if isinstance(value, dict) and value.get("folded"):  # a large value kept as a summary (records.fold)
        return (f"{value['count']} values, shape {tuple(value['shape'])}: min {format_value(value['min'])}, "
                f"max {format_value(value['max'])}, mean {format_value(value['mean'])}")
    return str(value)


def cell_text(key: str, record: Record) -> str:
    """One cell of a check table, as the reader sees it."""
    value = getattr(record, key)
    if key == "input_shape":
        return "(" + ", ".join(str(n) for n in value) + ("," if len(value) == 1 else "") + ")"
    if key == "how":
        return how_words(record)
    if key == "observed_gradient" and not record.executed:
        return "none (not run)"
    if key in ("abs_error", "rel_error") and value is not None:
        return format(value, ".3g")
    if key in ("step", "error_estimate"):
        return _short_numbers(value)
    if key == "tolerance" and not value:  # a study's run (the mutant suite) compares nothing of its own
        return "none"
    if key == "tolerance":
        return rtol_atol(value["rtol"], value["atol"], value.get("element_atol"), value.get("plain") is True)
    if key == "verdict" and value is None:
        return "planned"
    if key == "verdict" and record.measurement:
        return f"{value} (measured)"
    if key == "verdict" and record.expected_failure:
        return f"{value} (expected failure)" if value == "fail" else f"{value} (a failure was expected)"
    if key == "verdict" and record.expected_inconclusive:
        return f"{value} (expected)" if value == "inconclusive" else f"{value} (inconclusive was expected)"
    if key == "verdict" and value == "inconclusive":
        return f"{value} (unexpected)"
    if key == "verdict" and record.weak:
        return f"{value} (weak)"
    if key == "detectable_relative_error":
        return detects_words(record)
    return format_value(value)


def how_words(record: Record) -> str:
    """How the row's value was observed, as the reader reads it: what happened, not only what was asked.

    A pass whose call raised observed nothing ("backward() raised RuntimeError: nothing stored"); a .grad
    that holds nothing was read, not stored ("read from .grad: none there").
    """
    if not record.executed:
        return f"to be {record.how}"
    raised = raised_type(record)
    if raised:
        return provenance.raised_words(record.how, raised)
    words = provenance.words(record.how, record.observed_gradient)
    if record.how == "numerical" and record.method:
        words = f"{words} ({METHOD_WORDS.get(record.method, record.method)})"
    return words


# How a record's message introduces an error PyTorch raised during a pass (checks.teaching.witness.RAISED).
RAISED_PREFIX = "PyTorch raised "


def raised_type(record: Record) -> str:
    """The type of the error a pass recorded instead of a value ("" when none was raised)."""
    for line in record.message.splitlines():
        if line.startswith(RAISED_PREFIX):
            return line.removeprefix(RAISED_PREFIX).split(":", 1)[0]
    return ""


def rtol_atol(rtol: float, atol: float, element_atol: list[float] | dict[str, Any] | None = None,
              plain: bool = False) -> str:
    """"rtol 1.3e-06, atol 1e-05", or with each element's own atol, their range: "atol 0.0335 to 0.045
    per element" (a folded list of them gives its minimum and maximum)."""
    if plain:  # the reader's one number: atol = rtol = t, shown as what was written
        return f"plain number {atol:.3g} (atol = rtol)"
    if isinstance(element_atol, dict):  # folded with its record (records.fold)
        element_atol = [element_atol["min"], element_atol["max"]]
    return f"rtol {rtol:.3g}, atol {atol_words(atol, element_atol)}"


def percent(value: float) -> str:
    return f"{100 * value:.3g} %"


def _at(record: Record) -> str:
    index = record.detectable_index
    return f" at element {list(index)}" if index else ""


def detects_words(record: Record) -> str:
    """What the check's allowance could catch: the smallest relative error of the gradient it fails."""
    value = record.detectable_relative_error
    if value is None:
        if record.analytical_gradient is None:
            return "nothing: no gradient was expected"
        if _all_zero(record.analytical_gradient):
            return "no relative figure: every expected element is 0, judged by atol alone"
        return "not known yet: the allowance is set when the check runs"
    shown = f" ({percent(value)})" if value >= 1e-3 else ""
    return f"a gradient more than {value:.2g}{shown} wrong (relative){_at(record)}"


def _all_zero(value: Any) -> bool:
    if isinstance(value, dict) and value.get("folded"):
        return value["min"] == value["max"] == 0 and not value["non_finite"]
    return all(item == 0 for _, item in indexed(value))


def weak_words(record: Record) -> str:
    """Why a check is weak: how wrong a gradient its allowance would pass, where, and how much it allows there."""
    allowed = allowance_at(record)
    there = f" (allowed {allowed[0]:.3g} there, where {allowed[1]:.3g} is expected)" if allowed else ""
    return (f"its allowance would pass a gradient up to {percent(record.detectable_relative_error)} "
            f"wrong{_at(record)}{there}.")


def declaration_words(reason: str) -> str:
    """What the chapter said about a weak check: its reason, or that it said nothing (a problem)."""
    return (f"Declared weak: {reason}" if reason else
            'Not declared weak (weak="why" on the check): python -m checks reports it as a problem.')


def allowance_at(record: Record) -> tuple[float, float] | None:
    """(allowed, |expected|) at the element that sets the detectable error; None where the values are folded."""
    try:
        expected = torch.tensor(record.analytical_gradient, dtype=torch.float64)
        index = tuple(record.detectable_index or ())
        allowed = _allowance(record.tolerance, expected)
        at = (float(allowed[index]), float(expected.abs()[index])) if allowed is not None else None
    except (TypeError, ValueError, RuntimeError, KeyError, IndexError):  # folded, or another shape (a library
        # record keeps one element of a Jacobian, and its index in the Jacobian)
        return None
    return at


def _allowance(tolerance: dict[str, Any], expected: torch.Tensor) -> torch.Tensor | None:
    """atol + rtol·|expected| per element, from a record's tolerance; None for a folded per-element atol."""
    element_atol = tolerance.get("element_atol")
    if isinstance(element_atol, dict):
        return None
    atol = (torch.tensor(element_atol, dtype=torch.float64).reshape(expected.shape) if element_atol is not None
            else tolerance["atol"])
    return atol + tolerance["rtol"] * expected.abs()


def _short_numbers(value: Any) -> str:
    """Steps and error estimates to 3 significant digits: their order of magnitude is what matters."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short_numbers(item) for item in value) + "]"
    if isinstance(value, dict):  # folded with its record (records.fold)
        return format_value(value)
    return format(value, ".3g")


def records_frame(records: Sequence[Record], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A table of records, one row each, with the reader's column names."""
    keys = list(columns or COLUMNS)
    import pandas as pd

    return pd.DataFrame([[cell_text(key, record) for key in keys] for record in records],
                        columns=[HEADINGS.get(key, key) for key in keys])


def records_html(records: Sequence[Record], columns: Sequence[str] | None = None) -> str:
    """The compact table, the tolerances' reasons, each failure in full, and the executed records as JSON.

    columns picks the fields shown (keys of COLUMNS and NUMERICAL_COLUMNS); their layout is fixed: the
    verdict where the eye starts, shape · dtype · device in one cell, expected / observed / error / allowed
    as the main columns, and the rest folded under the check's name.
    """
    keys = list(columns or COLUMNS)
    layout = [(heading, fields) for heading, fields in MAIN_COLUMNS if any(key in keys for key in fields)]
    head = "".join(f'<th scope="col">{html.escape(heading)}</th>' for heading, _ in layout)
    rows = "".join(_row(record, keys, layout) for record in records)
    table = table_box(f'<table class="checks-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>')
    failures = "".join(failure_html(record) for record in records if record.executed and not record.passed)
    return table + weak_notes(records) + tolerance_notes(records) + failures + embed(records)


def table_box(table: str) -> str:
    """A table in the box whose width decides its layout (checks.css): rows as they are where the columns
    fit, each row a card of labelled cells where they do not (a phone), so nothing scrolls sideways."""
    return f'<div class="checks-table-box">{table}</div>'


def data_label(heading: str) -> str:
    """The attribute that names a cell's column where the row is shown as a card (checks.css)."""
    return f' data-label="{html.escape(heading)}"'


def row_keys(record: Record, keys: Sequence[str]) -> list[str]:
    """The fields shown for a record: those asked for, and how a numerical estimate was made (method, step,
    evaluations, error estimate) under every numerical check, whatever the table asked for."""
    if record.how != "numerical" or not record.executed or not record.method:  # the reader's own estimate: unknown
        return list(keys)
    return [*keys, *(key for key in NUMERICAL_COLUMNS if key not in keys)]


# The table's columns and the record fields each shows; fields not named here are folded under the check.
MAIN_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("verdict", ("verdict",)),
    ("check", ("check",)),
    ("shape · dtype · device", ("input_shape", "dtype", "device")),
    ("expected", ("analytical_gradient",)),
    ("observed", ("observed_gradient",)),
    # The error beside what was allowed, in one cell: read together, and narrow enough for every column to
    # fit a desktop's text column.
    ("error · allowed", ("abs_error", "rel_error", "tolerance")),
)
SHOWN = {key for _, fields in MAIN_COLUMNS for key in fields}


def field(key: str, content: str) -> str:
    """One record field inside a cell, marked so a reader of the HTML finds it by its key."""
    return f'<span data-field="{key}">{content}</span>'


def _row(record: Record, keys: Sequence[str], layout: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    # Executed rows get the record's id, so each check is linkable (a plan's rows share those ids and would
    # collide with the results on the same page).
    anchor = f' id="{html.escape(record.id)}"' if record.executed else ""
    keys = row_keys(record, keys)
    cells = "".join(_cell(record, keys, heading, fields) for heading, fields in layout)
    # The outcome's class tells a demonstration (an expected failure) from a problem (an unexpected pass).
    status = (record.status or "planned").replace(" ", "-")
    weak = " checks-weak" if record.weak else ""
    return f'<tr{anchor} class="checks-{record.verdict or "planned"} checks-outcome-{status}{weak}">{cells}</tr>'


def _cell(record: Record, keys: Sequence[str], heading: str, fields: tuple[str, ...]) -> str:
    wanted = [key for key in fields if key in keys]
    if fields == ("verdict",):
        word = record.verdict or "planned"
        note = cell_text("verdict", record).removeprefix(word)
        text = html.escape(word) + (f'<span class="checks-verdict-note">{html.escape(note)}</span>' if note else "")
        if record.executed and not record.passed:
            text = f'<a href="#{html.escape(failure_anchor(record))}">{text}</a>'
        elif record.weak:  # "weak" under the word, linked to why, under the table
            text = (f'{html.escape(word)}<a class="checks-verdict-note checks-weak-note" '
                    f'href="#{html.escape(weak_anchor(record))}">weak</a>')
        mark, colour = verdict_mark(record)
        # The mark and colour inline: a notebook (JupyterLab, Colab) shows the table without checks.css.
        style = f' style="color: {colour}"' if colour else ""
        return (f'<td class="checks-verdict"{data_label(heading)}{style}><span class="checks-verdict-mark" '
                f'aria-hidden="true">{mark} </span>{field("verdict", text)}</td>')
    if fields == ("check",):
        return f'<td class="checks-check"{data_label(heading)}>{_check_cell(record, keys)}</td>'
    if fields in (("analytical_gradient",), ("observed_gradient",)):
        key = fields[0]
        if key == "observed_gradient" and not record.executed:
            content = html.escape(cell_text(key, record))
        else:
            expected = record.analytical_gradient if key == "observed_gradient" else None
            content = vector_html(getattr(record, key), mismatched_indices(record), expected)
        return f'<td class="checks-{key}"{data_label(heading)}>{field(key, content)}</td>'
    joiner = " · " if heading.startswith("shape") else "<br>"
    content = joiner.join(_labelled(key, field(key, unbroken_numbers(_label(key) + cell_text(key, record))
                                               if key in NUMBER_FIELDS else
                                               f'<span class="checks-nowrap">{html.escape(cell_text(key, record))}</span>'))
                          for key in wanted)
    return f'<td class="checks-{"-".join(wanted)}"{data_label(heading)}>{content}</td>'


# A number, with the word that names it where there is one ("atol 2.49e-08"): kept on one line (a browser
# would break it at its hyphen); a line may break anywhere else ("atol 0.0335 to 0.045 per element").
NUMBER_FIELDS = ("abs_error", "rel_error", "tolerance")
NUMBER = re.compile(r"(?<![\w.])(?:(?:rtol|atol|abs|rel) )?[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|(?:rtol|atol|abs|rel) (?:none|inf|nan)")


def unbroken_numbers(text: str) -> str:
    """text as HTML, each number (with its label) in a span that does not break."""
    pieces, end = [], 0
    for match in NUMBER.finditer(text):
        pieces += [html.escape(text[end:match.start()]), f'<span class="checks-nowrap">{html.escape(match.group())}</span>']
        end = match.end()
    return "".join(pieces) + html.escape(text[end:])


def _label(key: str) -> str:
    return {"abs_error": "abs ", "rel_error": "rel "}.get(key, "")


def _labelled(key: str, content: str) -> str:
    """The allowance under the errors, introduced as what it is."""
    return f'<span class="checks-allowed">allowed {content}</span>' if key == "tolerance" else content


# The verdict's mark and colour by outcome: the page's colours (checks.css's variables, by theme), and the
# light theme's where they are not defined (a notebook).
VERDICT_MARKS = {
    "pass": ("✓", "var(--checks-pass, #1b6e20)"),
    "measured": ("✓", ""),
    "unexpected failure": ("✗", "var(--checks-fail, #b71c1c)"),
    "expected failure": ("✗", "var(--checks-expected-failure, #a54800)"),
    "unexpected pass": ("✗", "var(--checks-fail, #b71c1c)"),
    "expected inconclusive": ("?", "var(--checks-expected-failure, #a54800)"),
    "unexpected inconclusive": ("?", "var(--checks-fail, #b71c1c)"),
    "planned": ("○", ""),
}


def verdict_mark(record: Record) -> tuple[str, str]:
    """The symbol before a verdict's word and the colour of both ("" leaves the text's own), by the record's
    status (its outcome read against what the chapter declared)."""
    return VERDICT_MARKS[record.status or "planned"]


def _check_cell(record: Record, keys: Sequence[str]) -> str:
    """The check's name, how it was observed, and the rest of its fields a click away."""
    name = field("check", html.escape(record.check)) if "check" in keys else ""
    how = f'<br><span class="checks-how">{field("how", html.escape(cell_text("how", record)))}</span>' \
        if "how" in keys else ""
    folded = {HEADINGS[key]: field(key, vector_html(getattr(record, key)) if key == "x"
                                   else html.escape(cell_text(key, record)))
              for key in keys if key not in SHOWN and key != "how"}
    folded["tolerance"] = html.escape(tolerance_words(record.tolerance))
    folded[DETECTS["detectable_relative_error"]] = field("detectable_relative_error",
                                                         html.escape(detects_words(record)))
    if record.weak:
        folded["weak"] = html.escape(f"{weak_words(record)} {declaration_words(record.weak_reason)}")
    more = "".join(f"<dt>{html.escape(label)}</dt><dd>{value}</dd>" for label, value in folded.items())
    return f'{name}{how}<details class="checks-more"><summary>details</summary><dl>{more}</dl></details>'


def tolerance_words(tolerance: dict[str, Any]) -> str:
    """rtol and atol with the reason, and each change with what it was and why it changed."""
    if not tolerance:
        return "none"
    return (f"{rtol_atol(tolerance['rtol'], tolerance['atol'], tolerance.get('element_atol'), tolerance.get('plain') is True)}"
            f" ({tolerance['reason']})"
            + "".join(f"; changed from {_change_words(change)}" for change in tolerance.get("history", ())))


# A vector longer than FOLD_ABOVE values shows its first and last ENDS values and its size; the whole of it
# is a click away. Mismatched elements are marked, and listed by index under it.
FOLD_ABOVE = 6
ENDS = 3
LISTED_MISMATCHES = 5


def indexed(value: Any, index: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    """Every element of a (nested) list, with its index."""
    if isinstance(value, (list, tuple)):
        return [pair for position, item in enumerate(value) for pair in indexed(item, (*index, position))]
    return [(index, value)]


def _marked(value: Any, bad: set[tuple[int, ...]], index: tuple[int, ...] = ()) -> str:
    """The value as format_value writes it, with mismatched elements in <mark>."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_marked(item, bad, (*index, n)) for n, item in enumerate(value)) + "]"
    text = html.escape(format_value(value))
    return f"<mark>{text}</mark>" if index in bad else text


def vector_html(value: Any, bad: Sequence[tuple[int, ...]] = (), expected: Any = None) -> str:
    """A value as it reads in a cell: short ones whole, long ones folded, mismatched elements marked.

    Given the expected value, the mismatched elements of a folded value are also listed by index, each
    with what was expected there.
    """
    flat = indexed(value)
    wrong = set(bad)
    if len(flat) <= FOLD_ABOVE:
        return _marked(value, wrong)
    shown = [*flat[:ENDS], None, *flat[-ENDS:]]
    head = ", ".join("…" if pair is None else _marked(pair[1], wrong, pair[0]) for pair in shown)
    size = "×".join(str(n) for n in _shape(value))
    summary = (f'[{head}] <span class="checks-count">{len(flat)} values'
               + (f" ({size})" if "×" in size else "") + "</span>")
    folded = f'<details class="checks-vector"><summary>{summary}</summary>{_marked(value, wrong)}</details>'
    if expected is None or not wrong:
        return folded
    listed = [f"<li>[{', '.join(map(str, index))}] {html.escape(format_value(item))} "
              f"(expected {html.escape(format_value(_element(expected, index)))})</li>"
              for index, item in flat if index in wrong][:LISTED_MISMATCHES]
    more = f"<li>and {len(wrong) - len(listed)} more</li>" if len(wrong) > len(listed) else ""
    return (f'{folded}<p class="checks-mismatches-title">{len(wrong)} mismatched:</p>'
            f'<ul class="checks-mismatches">{"".join(listed)}{more}</ul>')


def _shape(value: Any) -> list[int]:
    shape = []
    while isinstance(value, (list, tuple)):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def mismatched_indices(record: Record) -> list[tuple[int, ...]]:
    """Indices of the elements outside the record's tolerance (none for a pass or an unrun plan)."""
    if not record.executed or record.passed or not record.tolerance:
        return []
    try:
        observed = torch.tensor(record.observed_gradient, dtype=torch.float64)
        expected = torch.tensor(record.analytical_gradient, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):  # a record kind whose values are not numbers
        return []
    allowed = _allowance(record.tolerance, expected) if observed.shape == expected.shape else None
    if allowed is None:
        return []
    bad = beyond_allowance(observed, expected, allowed)
    return [tuple(int(i) for i in index) for index in bad.nonzero().tolist()] if bad.dim() else \
        ([()] if bool(bad) else [])


def failure_anchor(record: Record) -> str:
    return f"{record.id}-failure"


def weak_anchor(record: Record) -> str:
    return f"{record.id}-weak"


def weak_notes(records: Sequence[Record]) -> str:
    """Each weak check of a table and why it is weak, under the table (its verdict links here), grouped by
    the reason its chapter declared (or none)."""
    by_reason: dict[str, list[Record]] = {}
    for record in records:
        if record.executed and record.weak:
            by_reason.setdefault(record.weak_reason, []).append(record)
    if not by_reason:
        return ""
    groups = "".join(
        f'<p class="checks-weak-reason">{html.escape(declaration_words(reason))}</p><ul>'
        + "".join(f'<li id="{html.escape(weak_anchor(record))}"><strong>{html.escape(record.check)}</strong> '
                  f"({html.escape(record.dtype)} on {html.escape(record.device)}, "
                  f"{html.escape(cell_text('how', record))}): {html.escape(weak_words(record))}</li>"
                  for record in weak) + "</ul>"
        for reason, weak in by_reason.items())
    return (f'<div class="checks-weak-notes"><p class="checks-weak-title">Weak checks: they passed, but their '
            f"allowances would also pass a gradient more than {percent(WEAK_ABOVE)} wrong</p>{groups}</div>")


def failure_html(record: Record) -> str:
    """A failed check with everything needed to judge and reproduce it: discrepancy, code, environment.

    It is a box the reader can fold; the environment lists only what differs from the page's own (stated
    once under the page's title), and the discrepancy's vectors are folded like the table's.
    """
    kind = {"expected failure": "expected failure (a demonstration)",
            "expected inconclusive": "expected inconclusive (a demonstration)"}.get(record.status, record.status)
    title = (f"{'Inconclusive' if record.verdict == 'inconclusive' else 'Failed'} check: {record.check} ({record.dtype} on {record.device}, "
             f"{HOW_WORDS.get(record.how, record.how)}) — {kind}")
    bad = mismatched_indices(record)
    sections = {
        "Discrepancy": _pre(record.message) + _definitions(discrepancy(record), {
            "expected": vector_html(record.analytical_gradient, bad),
            "observed": vector_html(record.observed_gradient, bad, record.analytical_gradient)}),
        "Where the numbers came from": _definitions({
            "expected": f"analytical: {record.gradient_formula} ({record.derivative_source})",
            "observed": cell_text("how", record),
        }),
        "Code": "".join(f'<p class="checks-code-name">{html.escape(name)}</p>{_pre(code, "checks-code")}'
                        for name, code in record.code.items()),
        "Environment": '<p class="checks-environment-note">As stated under the page\'s title, except:</p>'
                       + _definitions(environment_items(record)),
    }
    body = "".join(f"<h4>{html.escape(name)}</h4>{content}" for name, content in sections.items())
    declared = record.status in ("expected failure", "expected inconclusive", "measured")
    classes = "checks-failure checks-expected-failure" if declared else "checks-failure"
    return (f'<div class="{classes}" id="{html.escape(failure_anchor(record))}"><details open>'
            f'<summary class="checks-failure-title">{html.escape(title)}</summary>{body}</details></div>')


def discrepancy(record: Record) -> dict[str, str]:
    """Expected and observed, the errors, the worst element, and the tolerance with its reason and history."""
    index = tuple(record.worst_index or ())
    return {
        "expected": format_value(record.analytical_gradient),
        "observed": format_value(record.observed_gradient),
        "greatest absolute error": _short_numbers(record.abs_error),
        "greatest relative error": _short_numbers(record.rel_error),
        "worst element": (f"index {index}: expected {format_value(_element(record.analytical_gradient, index))}, "
                          f"observed {format_value(_element(record.observed_gradient, index))}"),
        "mismatched elements": format_value(record.mismatched),
        "tolerance": tolerance_words(record.tolerance),
    }


# What a page states once under its title (checks.sphinx.reader's line); a record repeats only what differs.
PAGE_WIDE = ("torch", "python", "os", "cpu", "gpu", "default_dtype")
ENVIRONMENT_WORDS = {"torch": "torch", "python": "python", "os": "OS", "cpu": "CPU", "gpu": "GPU",
                     "default_dtype": "default dtype"}


def environment_items(record: Record) -> dict[str, str]:
    """The record's device, dtype and seed, and any setting that differs from the process showing it."""
    here = environment(seed=0)
    differing = {ENVIRONMENT_WORDS[key]: str(record.environment.get(key) or "none")
                 for key in PAGE_WIDE if record.environment.get(key) != here[key]}
    return {
        "device": f"{record.device} ({record.device_name})",
        "dtype": record.dtype,
        "seed": str(record.environment.get("seed")),
        **differing,
    }


def _element(value: Any, index: tuple[int, ...]) -> Any:
    for position in index:
        if not isinstance(value, list):  # already the element (a library record keeps only its worst one)
            break
        value = value[position]
    return value


def _change_words(change: dict[str, Any]) -> str:
    return (f"{rtol_atol(change['old_rtol'], change['old_atol'])} → {rtol_atol(change['rtol'], change['atol'])}, "
            f"because: {change['reason']}")


# A failure record's layout, inline where JupyterLab's own styles would undo checks.css's (a notebook has no
# checks.css): JupyterLab floats <dt> and <dd> at 20 % and 80 % of the width, so a long label wraps and its
# value drifts right, and it breaks <pre> text anywhere, mid-word. A label stands at the top of its row, beside
# its value's first line (a grid stretches each item to its row's height, the value's lines). On a phone
# checks.css stacks the list.
DL_STYLE = ("display: grid; grid-template-columns: max-content minmax(0, 1fr); align-items: start; "
            "gap: 0.1em 0.8em; margin: 0.2em 0")
DT_STYLE = "float: none; width: auto; margin: 0; padding: 0"
DD_STYLE = "float: none; width: auto; margin: 0; padding: 0; overflow-wrap: anywhere"
PRE_STYLE = "word-break: normal"


def _pre(text: str, css: str = "") -> str:
    classes = f' class="{css}"' if css else ""
    return f'<pre{classes} style="{PRE_STYLE}">{html.escape(text)}</pre>'


def _definitions(items: dict[str, str], markup: dict[str, str] | None = None) -> str:
    """A definition list of plain texts; markup holds items already written as HTML, which replace them."""
    markup = markup or {}
    return f'<dl style="{DL_STYLE}">' + "".join(
        f'<dt style="{DT_STYLE}">{html.escape(key)}</dt><dd style="{DD_STYLE}">{markup.get(key, html.escape(value))}</dd>'
        for key, value in items.items()) + "</dl>"


def tolerance_notes(records: Sequence[Record]) -> str:
    """Each tolerance once, with its reason and history, folded under the table."""
    notes = dict.fromkeys(f"{record.dtype}: {tolerance_words(record.tolerance)}" for record in records)
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return (f'<details class="checks-tolerances"><summary>Tolerances and their reasons</summary>'
            f'<ul class="checks-tolerances">{items}</ul></details>')


def embed(records: Sequence[Record]) -> str:
    """Executed records as JSON inside the page, for its readers and the ledger's verifier ('</' escaped so the
    HTML stays intact); the build learns that they are shown from records.displayed, not from this HTML."""
    executed = [record.to_dict() for record in records if record.executed]
    if not executed:
        return ""
    displayed([item["id"] for item in executed], _running_cell())
    payload = json.dumps(executed, sort_keys=True).replace("</", "<\\/")
    return f'<script type="{RECORDS_MIME}">{payload}</script>'


def _running_cell() -> int | None:
    """The execution count the notebook records for the cell running now, or None outside IPython. While a
    cell runs, IPython's counter already holds the next cell's number (measured with ipykernel and nbclient:
    the n-th cell, recorded as n, reads n + 1)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    count = getattr(shell, "execution_count", None)
    return count - 1 if isinstance(count, int) else None
