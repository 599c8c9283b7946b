"""Sphinx extension for the API reference page (book/api.md): the checker library's docstrings, written as
plain text for help(), rendered by sphinx.ext.autodoc (which this extension loads).

The docstrings list parameters and fields as `name -- what it is` lines, continued by deeper indentation;
each such list becomes an rST field list. Plain text uses `*` (f(x, *inputs)) and `|` (|f(x)|) as
themselves, where rST would read emphasis and substitutions: both are escaped.
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx

# "mode       -- ...", "kink, domain, unstable, converged -- ...", "atol, rtol -- ...".
ITEM = re.compile(r"^(?P<indent> *)(?P<name>[\w*][\w ,*]*?) +-- (?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def fields(lines: list[str]) -> list[str]:
    """The docstring's `name -- text` lists as field lists (`:name: text`), blank lines around them."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        match = ITEM.match(lines[k])
        if not match:
            out.append(lines[k])
            k += 1
            continue
        depth = len(match["indent"])
        text = [match["text"].strip()]
        k += 1
        while k < len(lines) and lines[k].strip() and _indent(lines[k]) > depth and not ITEM.match(lines[k]):
            text.append(lines[k].strip())
            k += 1
        if out and out[-1].strip() and not ITEM.match(out[-1]) and not out[-1].lstrip().startswith(":"):
            out.append("")
        out.append(f"{' ' * depth}:{match['name'].strip()}: {' '.join(text)}")
        if k < len(lines) and lines[k].strip() and not ITEM.match(lines[k]):
            out.append("")
    return out


def escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|")


def _process(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if not name.startswith("checks."):
        return
    lines[:] = fields([escape(line) for line in lines])


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _process)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
