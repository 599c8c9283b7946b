"""The ledger: every check of a build, failures first, as an HTML table and as JSON, and its verifier.

An entry is a record's dictionary plus where it was shown: the chapter's title, its page and the record's
anchor on that page, its outcome (the check's own: pass / fail / inconclusive) and its status (the outcome
read against what the chapter declared: records.status, the one rule; the verifier recomputes it from the
verdict and the declared flags and never trusts the stored one). Declared failures and inconclusives are
listed; undeclared ones, and declared ones that did not happen, are problems. The Sphinx
extension collects the entries as the chapters execute (checks.teaching.records) and writes ledger.json:

    {"build": {"finished": true, "fingerprint": {...}, "sources": the source folder relative to this one,
     "chapters": [{"chapter", "page", "source", "source_sha256", "executed", "execution"}, ...],
     "left_out": [source files the table of contents leaves out, which were not built]},
     "checks": [entry, ...]}

`python -m checks` reads it back (read), refuses one that is malformed or does not match the sources
beside it (CheckInputError), and lists its problems (verify).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import CheckInputError
from ..teaching.display import (RECORDS_MIME, allowance_at, cell_text, format_value, mismatched_indices,
                                percent, vector_html)
from ..teaching.records import OUTCOMES, PROBLEMS, STATUSES, WEAK_ABOVE, Record, is_weak, status
from .fingerprint import components, digest as json_digest

Entry = dict[str, Any]

LEDGER_JSON = "ledger.json"
# Problems first, then the demonstrations, then the studies' runs, then the passes: what needs a reader's
# attention is on top.
STATUS_ORDER = ("unexpected failure", "unexpected inconclusive", "unexpected pass", "expected failure",
                "expected inconclusive", "measured", "pass")
# The ledger table's columns: the status where the eye starts, then what a reader filters by (chapter,
# how, dtype, device), then the numbers. Expected and observed vectors are folded as in the chapters.
COLUMNS = {
    "status": "outcome",
    "chapter": "chapter",
    "check": "check",
    "how": "how",
    "dtype": "dtype",
    "device": "device",
    "analytical_gradient": "expected",
    "observed_gradient": "observed",
    # The error beside what was allowed, in one cell (sorted by the absolute error): read together, and
    # narrow enough for every column to fit a desktop.
    "abs_error": "error · allowed",
    "detectable_relative_error": "detects",
    "weak": "weak",
}
# Columns the reader filters by, with a pane of their values and counts above the table.
FILTERS = ("status", "chapter", "how", "dtype", "device", "weak")
# The weak column's words: a pass whose allowance would pass a gradient more than WEAK_ABOVE wrong.
WEAK_WORDS = {(False, False): "no", (False, True): "no", (True, True): "yes, declared", (True, False): "yes, undeclared"}


def entry(record: Record, *, chapter: str, page: str, shown: bool = True, exercise: bool = False) -> Entry:
    """A record as the ledger keeps it: its fields, where it is shown, its outcome and its status.

    anchor is the record's row on its page, or "" for a check the page executed but does not display;
    exercise says it is shown in the chapter's exercises (a solution's check).
    """
    return {**record.to_dict(), "chapter": chapter, "page": page, "anchor": record.id if shown else "",
            "outcome": record.outcome, "status": record.status, "weak": record.weak, "exercise": exercise}


def status_of(item: Entry) -> str:
    """The status recomputed from the verdict and the declared flags (records.status), never the stored one."""
    return status(item["verdict"], item["expected_failure"], item.get("expected_inconclusive", False),
                  item.get("measurement", ""))


def ordered(entries: Sequence[Entry]) -> list[Entry]:
    """Problems first; within a status, the order of the book (sorted() is stable)."""
    return sorted(entries, key=lambda item: STATUS_ORDER.index(status_of(item)))


def problems(entries: Sequence[Entry]) -> list[Entry]:
    """Undeclared failures and inconclusives, and declared ones that did not happen."""
    return [item for item in ordered(entries) if status_of(item) in PROBLEMS]


def summary(entries: Sequence[Entry]) -> dict[str, Any]:
    """Counts per outcome (pass / fail / inconclusive), per status, and per device and status."""
    by_device: dict[str, Counter[str]] = {}
    for item in entries:
        by_device.setdefault(item["device"], Counter())[status_of(item)] += 1
    return {
        "checks": len(entries),
        "outcomes": dict(Counter(item["verdict"] for item in entries)),
        "statuses": dict(Counter(status_of(item) for item in entries)),
        "devices": {device: dict(counts) for device, counts in sorted(by_device.items())},
    }


def to_json(entries: Sequence[Entry], build: dict[str, Any] | None = None) -> str:
    """The entries as ledger.json holds them, under the build's stamp (see the module's docstring).

    Strict JSON: a non-finite number (a NaN gradient, an infinite error) is written as the string "nan",
    "inf" or "-inf", which any JSON reader accepts (Python's json would write NaN and Infinity, which strict
    readers refuse); read() turns them back into floats.
    """
    return json.dumps(_strict({"build": build or {}, "checks": list(entries)}), sort_keys=True, indent=1,
                      allow_nan=False)


# Non-finite numbers as ledger.json writes them, and the floats they stand for.
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# The fields of an entry that hold numbers (values, errors, steps), where those strings are read back as floats.
NUMBER_FIELDS = ("x", "analytical_gradient", "observed_gradient", "abs_error", "rel_error", "step", "error_estimate",
                 "detectable_relative_error")


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def _numbers(value: Any) -> Any:
    """A value of a number field with "nan", "inf" and "-inf" read back as floats (lists and folded values too)."""
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def from_json_entry(item: Any) -> Any:
    """An entry as ledger.json holds it, its number fields as floats again (see to_json)."""
    if not isinstance(item, dict):
        return item
    return {key: _numbers(value) if key in NUMBER_FIELDS else value for key, value in item.items()}


def digest(entries: Sequence[Entry]) -> str:
    return json_digest(list(entries))


def digest_of_file(path: Path) -> str | None:
    """The digest of the checks a ledger.json holds; None when there is none or it cannot be read."""
    try:
        return digest([from_json_entry(item) for item in json.loads(path.read_text(encoding="utf-8"))["checks"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(path: Path, entries: Sequence[Entry], build: dict[str, Any]) -> None:
    """Write ledger.json whole or not at all: a build killed mid-write leaves no half ledger."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(to_json(entries, build), encoding="utf-8")
    os.replace(partial, path)


# What an entry must hold for the verifier to judge it, and the type each must have.
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "id": str, "check": str, "chapter": str, "page": str, "anchor": str, "function": str, "dtype": str,
    "device": str, "how": str, "verdict": str, "outcome": str, "status": str, "message": str,
    "expected_failure": bool,
    "executed": bool, "x": (int, float, list, dict), "gradient_formula": str, "derivative_source": str,
    # None: a pass whose expected outcome is no gradient at all (x.grad stays None, checks.witness); bool: a
    # property's expectation (checks.expect(x.is_leaf, True, ...)).
    "analytical_gradient": (int, float, bool, list, dict, type(None)),
    "observed_gradient": (int, float, bool, list, dict, type(None)),
    # None: no expected element is non-zero (or none was expected); checks.core.compare.detectable.
    "detectable_relative_error": (int, float, type(None)),
}
CHAPTER_KEYS: dict[str, type | tuple[type, ...]] = {
    "chapter": str, "page": str, "source": str, "source_sha256": str, "executed": int, "execution": str,
}
# The records a page embeds beside its tables (display.embed): each must be in the ledger.
EMBEDDED = re.compile(rf'<script type="{re.escape(RECORDS_MIME)}">(.*?)</script>', re.DOTALL)


@dataclass(frozen=True)
class Ledger:
    """A ledger.json read back: where it is, the build's stamp and its entries."""

    path: Path
    build: dict[str, Any]
    entries: list[Entry]


def load(path: str | Path) -> list[Entry]:
    """The entries of a ledger.json file, or of a built site's folder holding one."""
    return read(path).entries


def read(path: str | Path) -> Ledger:
    """Read and validate a ledger; CheckInputError with a one-line reason when it is not a ledger."""
    path = Path(path)
    if path.is_dir():
        path = path / LEDGER_JSON
    if not path.is_file():
        raise CheckInputError(f"no ledger at {path}: build the book first (jupyter-book build .); a build "
                              f"that failed or was interrupted leaves none")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise CheckInputError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise CheckInputError(f"{path} is not valid JSON: {error}") from None
    except OSError as error:
        raise CheckInputError(f"{path} cannot be read: {error.strerror}") from None
    if not (isinstance(data, dict) and isinstance(data.get("build"), dict) and isinstance(data.get("checks"), list)):
        raise CheckInputError(f'{path} is not a ledger: expected {{"build": {{...}}, "checks": [...]}} '
                              f"(written by checks.sphinx.sphinxext; rebuild the book)")
    build, entries = data["build"], [from_json_entry(item) for item in data["checks"]]
    if build.get("finished") is not True:
        raise CheckInputError(f"{path} is from a build that did not finish; rebuild the book")
    if not (isinstance(build.get("fingerprint"), dict) and isinstance(build.get("chapters"), list)
            and isinstance(build.get("sources"), str)):
        raise CheckInputError(f"{path} lacks the fingerprint, the sources folder or the chapter list in its build "
                              f"stamp; rebuild the book")
    for number, chapter in enumerate(build["chapters"]):
        _require_shape(chapter, CHAPTER_KEYS, f"{path}: chapter {number} of the build stamp")
    left_out = build.get("left_out", [])
    if not (isinstance(left_out, list) and all(isinstance(source, str) for source in left_out)):
        raise CheckInputError(f"{path}: the build stamp's left_out is {left_out!r}; expected a list of source files")
    for number, item in enumerate(entries):
        _require_shape(item, REQUIRED, f"{path}: check {number}")
        if item["verdict"] not in OUTCOMES:
            raise CheckInputError(f"{path}: check {number} ({item['id']}) has verdict {item['verdict']!r}; "
                                  f"an executed check's is one of {', '.join(OUTCOMES)}")
        if item["outcome"] not in OUTCOMES:
            raise CheckInputError(f"{path}: check {number} ({item['id']}) has outcome {item['outcome']!r}, "
                                  f"not one of {', '.join(OUTCOMES)}")
        if item["status"] not in STATUS_ORDER:
            raise CheckInputError(f"{path}: check {number} ({item['id']}) has status {item['status']!r}, "
                                  f"not one of {', '.join(STATUS_ORDER)}")
        if item["executed"] is not True:
            raise CheckInputError(f"{path}: check {number} ({item['id']}) was not executed")
    return Ledger(path, build, entries)


def _require_shape(item: object, keys: dict[str, type | tuple[type, ...]], where: str) -> None:
    if not isinstance(item, dict):
        raise CheckInputError(f"{where} is {type(item).__name__}, not an object")
    missing = [key for key in keys if key not in item]
    if missing:
        raise CheckInputError(f"{where} lacks {', '.join(missing)}")
    for key, kind in keys.items():
        if not _fits(item[key], kind):
            raise CheckInputError(f"{where} has {key}={item[key]!r}; expected {_kind_name(kind)}")


def _fits(value: object, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python: a count of True, or an x of False, is still malformed.
    return bool in kinds if isinstance(value, bool) else isinstance(value, kinds)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(item.__name__ for item in (kind if isinstance(kind, tuple) else (kind,)))


def source_mismatches(found: Ledger) -> list[str]:
    """How the ledger differs from the sources beside it: the fingerprint's parts and each chapter's source."""
    differences = []
    now = components()
    built = found.build["fingerprint"]
    for name in sorted(set(now) | set(built)):
        if built.get(name) != now.get(name):
            differences.append(f"{name}: built with {_short(built.get(name))}, here {_short(now.get(name))}")
    for chapter in found.build["chapters"]:
        source = found.path.parent / found.build["sources"] / chapter["source"]
        if not source.is_file():
            differences.append(f"{chapter['chapter']}: its source {source} is not there")
        elif file_sha256(source) != chapter["source_sha256"]:
            differences.append(f"{chapter['chapter']}: {source} changed since the build")
    return differences


def _short(value: object) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 else text  # a sha256: its first digits say enough


def verify(found: Ledger) -> list[str]:
    """Every problem of a ledger that matches its sources, as lines to print; none when it is sound."""
    entries = found.entries
    lines: list[str] = []
    if not entries:
        lines.append("- the ledger holds no checks: a book that executed nothing verifies nothing")
    per_page = Counter(item["page"] for item in entries)
    stamped = {chapter["page"]: chapter for chapter in found.build["chapters"]}
    for page, chapter in stamped.items():
        if per_page.get(page, 0) != chapter["executed"]:
            lines.append(f"- {chapter['chapter']} [{page}]: {chapter['executed']} checks executed, "
                         f"{per_page.get(page, 0)} in the ledger")
        if "succeeded" not in chapter["execution"]:
            lines.append(f"- {chapter['chapter']} [{page}]: execution {chapter['execution']}; checks after the "
                         f"error never ran")
    for source in found.build.get("left_out", []):
        lines.append(f"- {source} is not in the book's table of contents (_toc.yml): it was not built, and none "
                     f"of its checks ran")
    for page in sorted(set(per_page) - set(stamped)):
        lines.append(f"- {per_page[page]} checks in the ledger name {page}, which the build did not execute")
    # The same check may run in two chapters (its id is an anchor on its own page), not twice in one.
    for (page, key), count in Counter((item["page"], item["id"]) for item in entries).items():
        if count > 1:
            lines.append(f"- {key} is in the ledger {count} times for {page}")
    ids = {item["id"] for item in entries}
    for page in stamped:
        shown = found.path.parent / page
        if shown.is_file():
            try:
                missing = {record["id"] for payload in EMBEDDED.findall(shown.read_text(encoding="utf-8"))
                           for record in json.loads(payload)} - ids
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise CheckInputError(f"{shown}: its embedded records cannot be read ({error})") from None
            if missing:
                lines.append(f"- {page} shows {len(missing)} checks the ledger lacks: {', '.join(sorted(missing))}")
    for item in ordered(entries):
        found_status = status_of(item)
        if found_status != item["status"] or item["outcome"] != item["verdict"]:
            lines.append(f"- {item['check']} [{_where(item)}]: stored outcome {item['outcome']!r} and status "
                         f"{item['status']!r}, but verdict {item['verdict']!r} with "
                         f"{_declared_words(item)} is {found_status!r}")
        if found_status in PROBLEMS:
            lines.extend(_described(item, found_status))
        if weak_of(item) and not item.get("weak_reason"):
            lines.extend(_weak_described(item, "undeclared weak check"))
            lines.append('    make it strong (each element its own allowance, another step or method, a finer dtype) '
                         'or declare why a coarse allowance is acceptable there: weak="..."')
    return lines


def _declared_words(item: Entry) -> str:
    return (f"expected_failure={item['expected_failure']}, "
            f"expected_inconclusive={item.get('expected_inconclusive', False)}"
            + (", a measurement" if item.get("measurement") else ""))


def weak_of(item: Entry) -> bool:
    """Weak recomputed from the verdict and the detectable error, never read from the stored flag."""
    return is_weak(item["verdict"], item["detectable_relative_error"])


def weak_entries(entries: Sequence[Entry]) -> list[Entry]:
    return [item for item in entries if weak_of(item)]


def _weak_described(item: Entry, what: str) -> list[str]:
    """A weak check: what, where, how wrong a gradient it would pass, and why (its allowance there)."""
    record = Record.from_dict(item)
    at = f" at element {item['detectable_index']}" if item.get("detectable_index") else ""
    allowed = allowance_at(record)
    there = f": it allows {allowed[0]:.3g} there, where {allowed[1]:.3g} is expected" if allowed else ""
    lines = [f"- {what}: {item['check']} ({item['dtype']} on {item['device']}, {item['how']}"
             + (f" {item['method']}" if item.get("method") else "") + f") in {item['chapter']} [{_where(item)}]",
             f"    detectable error {item['detectable_relative_error']:.3g}: its allowance would pass a gradient up to "
             f"{percent(item['detectable_relative_error'])} wrong{at}{there}"]
    if item.get("weak_reason"):
        lines.append(f"    declared: {item['weak_reason']}")
    return lines


def _where(item: Entry) -> str:
    return f"{item['page']}#{item['anchor']}" if item["anchor"] else f"{item['page']}, not displayed there"


def _described(item: Entry, found_status: str) -> list[str]:
    """A problem (or a declared demonstration) as the verifier lists it: a bullet, then its detail."""
    first, *rest = describe_problem(item, found_status, f"{item['chapter']} [{_where(item)}]")
    return [f"- {first}", *rest]


# A value of more numbers than this is shown by its first and last few, and its worst element.
BRIEF_NUMBERS = 8


def describe_problem(record: dict[str, Any], outcome: str, where: str) -> list[str]:
    """A record (a dictionary, as stored) of the given status, in lines: what and where, the expected value
    beside the formula it came from, the observed value, then the comparison's message.

    The build's warnings (checks.sphinx.sphinxext) and `python -m checks` both say it this way.
    """
    lines = [f"{outcome}: {record['check']} ({record['dtype']} on {record['device']}, {record['how']}) in {where}",
             f"    expected {brief(record['analytical_gradient'])}, from the formula {record['gradient_formula']} "
             f"({record['derivative_source']})",
             f"    observed {brief(record['observed_gradient'])}"]
    worst = _worst_element(record)
    if worst:
        lines.append(f"    worst element {worst}")
    declared_words = ("expected_inconclusive=True" if record.get("expected_inconclusive")
                      else "expected_failure=True")
    if outcome == "unexpected pass":
        lines.append(f"    declared {declared_words}, but it passed: the demonstration shows nothing")
        return lines
    lines.extend("    " + line for line in record["message"].splitlines())
    if outcome == "unexpected failure" and record.get("expected_inconclusive"):
        lines.append("    declared expected_inconclusive=True, but it failed")
    elif outcome == "unexpected inconclusive" and record.get("expected_failure"):
        lines.append("    declared expected_failure=True, but it could not be judged")
    elif outcome == "unexpected inconclusive":
        lines.append("    (an outcome the chapter means to show is declared: checks.teaching.library.declare(call, "
                     "\"inconclusive\") for a library call; expected_inconclusive=True on a record)")
    elif outcome.startswith("unexpected"):
        lines.append("    (a failure the chapter means to show is declared: checks.plan(..., expected_failure=True); "
                     "checks.teaching.library.declare(call, \"fail\") for a library call)")
    return lines


def brief(value: Any) -> str:
    """A value short enough for one line of a log: a long one by its count, first and last numbers."""
    numbers = _flat(value)
    if numbers is None or len(numbers) <= BRIEF_NUMBERS:
        return format_value(value)
    shown = [format_value(number) for number in (*numbers[:3], *numbers[-2:])]
    return f"{len(numbers)} values [{', '.join(shown[:3])}, ..., {', '.join(shown[3:])}]"


def _flat(value: Any) -> list[Any] | None:
    """The numbers of a (nested) list in order; None for anything else (a number, a folded summary)."""
    if not isinstance(value, list):
        return None
    found: list[Any] = []
    for item in value:
        inner = _flat(item)
        found.extend([item] if inner is None else inner)
    return found


def _worst_element(record: dict[str, Any]) -> str:
    """Where a check of several numbers differs most: its index, expected and observed; "" for one number."""
    observed, expected = record["observed_gradient"], record["analytical_gradient"]
    if isinstance(observed, dict) and observed.get("worst"):  # a folded value keeps its worst elements
        worst = observed["worst"][0]
        return (f"at index {tuple(worst['index'])}: expected {format_value(worst['expected'])}, "
                f"observed {format_value(worst['observed'])}")
    index = record.get("worst_index")
    if not (isinstance(expected, list) and isinstance(observed, list) and index):
        return ""
    for position in index:
        if not (isinstance(expected, list) and isinstance(observed, list)):
            return ""
        expected, observed = expected[position], observed[position]
    return f"at index {tuple(index)}: expected {format_value(expected)}, observed {format_value(observed)}"


def report(entries: Sequence[Entry], problem_lines: Sequence[str] | None = None) -> str:
    """A readable summary, the declared inconclusives, then each problem (by default: the unexpected
    failures, inconclusives and passes, and the undeclared weak passes)."""
    counts = summary(entries)
    lines = [f"{counts['checks']} checks: " + ", ".join(f"{count} {outcome}" for outcome, count in
                                                        sorted(counts["statuses"].items(), key=_by_outcome)),
             "outcomes: " + ", ".join(f"{counts['outcomes'].get(outcome, 0)} {outcome}" for outcome in OUTCOMES)
             + f"; {sum(bool(item.get('checker')) for item in entries)} from library calls and tools"]
    inconclusive = [item for item in entries if status_of(item) == "expected inconclusive"]
    lines.append(f"{len(inconclusive)} declared inconclusive:")
    lines.extend(f"- {item['check']} ({item['dtype']} on {item['device']}) in {item['chapter']} [{_where(item)}]: "
                 f"{item['message'].splitlines()[0] if item['message'] else ''}" for item in inconclusive)
    weak = weak_entries(entries)
    declared = [item for item in weak if item.get("weak_reason")]
    lines.append(f"{len(weak)} weak {'pass' if len(weak) == 1 else 'passes'} (allowing a gradient more than "
                 f"{percent(WEAK_ABOVE)} wrong): "
                 f"{len(declared)} declared, {len(weak) - len(declared)} undeclared")
    lines.extend(line for item in declared for line in _weak_described(item, "declared weak"))
    found = list(problem_lines) if problem_lines is not None else _problem_lines(entries)
    if not found:
        lines.append("No problems: every executed check is in the ledger, every failure and inconclusive was "
                     "declared, every declared one happened, and every weak pass was declared.")
    lines.extend(found)
    return "\n".join(lines)


def _problem_lines(entries: Sequence[Entry]) -> list[str]:
    return ([line for item in problems(entries) for line in _described(item, status_of(item))]
            + [line for item in weak_entries(entries) if not item.get("weak_reason")
               for line in _weak_described(item, "undeclared weak check")])


def _by_outcome(pair: tuple[str, int]) -> int:
    return STATUS_ORDER.index(pair[0])


def ledger_html(entries: Sequence[Entry], *, link: Callable[[Entry], str], json_href: str,
                table_library: str | None = None) -> str:
    """The summary, a download link to the JSON, counts per chapter, one table of every check and one of the
    measurements.

    The table of checks lists failures first. A measurement (a run of a study such as the mutant suite, whose
    outcome is a finding, not a check of the book) is counted in the summary and the chapters' counts, and
    its runs are tallied by study, how, dtype and device in the second table: each run is in the JSON, and
    the chapter shows the study's results (900 rows of runs would make the page too heavy for a phone). With table_library (the URL of the DataTables bundle that itables
    ships, served from the site) the reader can also filter it by outcome, chapter, how, dtype and device,
    and sort it by any column; without it, or without JavaScript, it is a plain table.
    """
    rows = ordered([item for item in entries if not item.get("measurement")])
    measured = [item for item in entries if item.get("measurement")]
    return (_summary_html(entries, json_href) + _chapters_html(entries, link) + _table_html(rows, link)
            + (_table_script(table_library) if table_library else "") + _measurements_html(measured, link))


def _measurements_html(measured: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    """The measurements' runs, study by study (its chapter and what it measures, once), counted by how, dtype
    and device and outcome ("" if none)."""
    if not measured:
        return ""
    studies: dict[tuple[str, str], dict[tuple[str, str, str], Counter[str]]] = {}
    first: dict[str, Entry] = {}
    for item in measured:
        first.setdefault(item["chapter"], item)
        runs = studies.setdefault((item["chapter"], item["measurement"]), {})
        runs.setdefault((item["how"], item["dtype"], item["device"]), Counter())[item["verdict"] or "planned"] += 1
    outcomes = [outcome for outcome in OUTCOMES
                if any(outcome in counts for runs in studies.values() for counts in runs.values())]
    head = ("<th>how</th><th>dtype</th><th>device</th><th>runs</th>"
            + "".join(f"<th>{html.escape(outcome)}</th>" for outcome in outcomes))
    tables = ""
    for (chapter, study), runs in studies.items():
        rows = "".join(
            f"<tr><td>{html.escape(how)}</td><td>{html.escape(dtype)}</td><td>{html.escape(device)}</td>"
            f"<td>{sum(counts.values())}</td>" + "".join(f"<td>{counts.get(outcome, 0)}</td>" for outcome in outcomes)
            + "</tr>" for (how, dtype, device), counts in runs.items())
        tables += (f'<p class="checks-study"><a href="{html.escape(link(first[chapter]).split("#")[0])}">'
                   f"{html.escape(chapter)}</a>: {html.escape(study)}</p>"
                   f'<div class="checks-table-box"><table class="checks-counts checks-ledger-measurements">'
                   f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")
    return (f'<p class="checks-ledger-measurements-intro">Measurements: {len(measured)} runs whose outcome is a '
            f"finding, not a check of the book, tallied by study; each run is a record of the JSON.</p>{tables}")


def _summary_html(entries: Sequence[Entry], json_href: str) -> str:
    counts = summary(entries)
    outcomes = sorted(counts["statuses"].items(), key=_by_outcome)
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
        f'<div class="checks-ledger-summary"><p><strong>{counts["checks"]}</strong> checks in this build: '
        + ", ".join(f'<strong>{counts["outcomes"].get(outcome, 0)}</strong> {outcome}' for outcome in OUTCOMES)
        + f" (the checks' own outcomes); read against what each chapter declared:</p><ul>{items}</ul>"
        f'<table class="checks-counts checks-ledger-devices"><thead><tr>{device_head}</tr></thead>'
        f"<tbody>{device_rows}</tbody></table>"
        f'<p><a class="checks-ledger-download" href="{html.escape(json_href)}" download>'
        f"Download every record as JSON ({LEDGER_JSON})</a></p></div>"
    )


def _chapters_html(entries: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    """Checks per chapter and outcome, each chapter linked to its page, in the book's order.

    The checks of a chapter's text and of its exercises' solutions are counted apart as well as together:
    a chapter's own sentences ("Of 24 checks, ...") count those of its text.
    """
    first: dict[str, Entry] = {}
    by_chapter: dict[str, Counter[str]] = {}
    solutions: Counter[str] = Counter()
    for item in entries:
        first.setdefault(item["chapter"], item)
        by_chapter.setdefault(item["chapter"], Counter())[status_of(item)] += 1
        solutions[item["chapter"]] += bool(item.get("exercise"))
    outcomes = [outcome for outcome in STATUS_ORDER if any(outcome in counts for counts in by_chapter.values())]
    head = ("<th>chapter</th><th>checks</th><th>in its text</th><th>in its exercises' solutions</th>"
            + "".join(f"<th>{html.escape(outcome)}</th>" for outcome in outcomes))
    rows = "".join(
        f'<tr><td><a href="{html.escape(link(first[chapter]).split("#")[0])}">{html.escape(chapter)}</a></td>'
        f"<td>{sum(counts.values())}</td><td>{sum(counts.values()) - solutions[chapter]}</td>"
        f"<td>{solutions[chapter]}</td>" + "".join(f"<td>{counts.get(outcome, 0)}</td>" for outcome in outcomes)
        + "</tr>"
        for chapter, counts in by_chapter.items()
    )
    return (f'<table class="checks-counts checks-ledger-chapters"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _table_html(entries: Sequence[Entry], link: Callable[[Entry], str]) -> str:
    head = "".join(f'<th scope="col">{html.escape(name)}</th>' for name in COLUMNS.values())
    rows = "".join(
        f'<tr class="checks-{item["verdict"]} checks-outcome-{_slug(status_of(item))}">'
        + "".join(_ledger_cell(key, item, record, link) for key in COLUMNS)
        + "</tr>"
        for item, record in ((item, Record.from_dict(item)) for item in entries)
    )
    return (_labels_style() + f'<div class="checks-ledger-table checks-table-box"><table class="checks-table checks-ledger">'
            f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")


def _labels_style() -> str:
    """Each column's heading, for checks.css to show beside its cell where a row is a card (a phone): once per
    column, not once per cell (a data-label on each of hundreds of rows would double the page's weight)."""
    rules = "".join(f"table.checks-ledger>tbody>tr>td:nth-child({number}){{--checks-label:{json.dumps(name)}}}"
                    for number, name in enumerate(COLUMNS.values(), start=1))
    return f"<style>{rules}</style>"


def _ledger_cell(key: str, item: Entry, record: Record, link: Callable[[Entry], str]) -> str:
    if key == "status":
        return f'<td class="checks-verdict">{html.escape(status_of(item))}</td>'
    if key == "chapter":
        return (f'<td class="checks-chapter"><a href="{html.escape(link(item))}">'
                f'{html.escape(item["chapter"])}</a></td>')
    if key == "how":
        text = item["how"] + (f" ({item['method']})" if item.get("method") else "")
        return (f'<td class="checks-how" title="{html.escape(cell_text("how", record))}">'
                f"{html.escape(text)}</td>")
    if key in ("analytical_gradient", "observed_gradient"):
        # Mismatched elements are marked; their list by index is on the chapter's page, a click away. A
        # number sorts by its text; a vector by its folded text, which begins with its first values (a copy of
        # the whole vector in data-order would add a third of the page's weight).
        return (f'<td class="checks-{key}">'
                f"{vector_html(getattr(record, key), mismatched_indices(record))}</td>")
    if key == "abs_error":
        return (f'<td class="checks-abs_error-rel_error" data-order="{record.abs_error}">abs '
                f"{html.escape(cell_text('abs_error', record))}<br>rel {html.escape(cell_text('rel_error', record))}"
                f'<span class="checks-allowed">allowed {html.escape(cell_text("tolerance", record))}</span></td>')
    if key == "detectable_relative_error":
        value = record.detectable_relative_error
        text = "none" if value is None else f"{value:.2g}" + (f" ({percent(value)})" if value >= 1e-3 else "")
        at = f"<br>at {html.escape(str(record.detectable_index))}" if value is not None and record.detectable_index else ""
        return (f'<td class="checks-detectable" data-order="{-1 if value is None else value}" '
                f'title="{html.escape(cell_text(key, record))}">{html.escape(text)}{at}</td>')
    if key == "weak":
        return f'<td class="checks-weak-flag">{WEAK_WORDS[record.weak, bool(record.weak_reason)]}</td>'
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
                                            "layout": "columns-3"}}},
        "language": {"searchPanes": {"title": {"_": "%d filters active", "0": "Filter by outcome, chapter, how, "
                                                                             "dtype, device or weak", "1": "1 filter active"}}},
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
