"""The reader's code as written: the source a record keeps so that a failed check can be read and rerun."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable

from .expectations import Expectation


def source_code(expectation: Expectation) -> dict[str, str]:
    """The code of f, df and related objects as written, so a failed check can be read and reproduced."""
    code = {name: source_of(getattr(expectation, name)) for name in ("f", "df")}
    for item in expectation.related:
        code[getattr(item, "__name__", None) or type(item).__name__] = source_of(item)
    return code


def source_of(item: object) -> str:
    """The Python source of a function or class as written; for code without one, its stable name."""
    if inspect.isfunction(item) and item.__name__ == "<lambda>":
        found = _lambda_source(item)
        if found:
            return found
    try:
        return textwrap.dedent(inspect.getsource(item)).strip()  # type: ignore[arg-type]
    except (OSError, TypeError):
        pass
    if inspect.isclass(item):
        # Python 3.11 cannot find a class's source in a notebook kernel, but it finds its methods'.
        methods = [getattr(member, "__func__", member) for member in vars(item).values()]
        sources = [textwrap.indent(source_of(method), "    ") for method in methods if inspect.isfunction(method)]
        if sources:
            bases = ", ".join(base.__qualname__ for base in item.__bases__)
            return f"class {item.__qualname__}({bases}):  # its methods, as written\n" + "\n\n".join(sources)
    return built_in_name(item)


def _lambda_source(function: Callable[..., object]) -> str | None:
    """Just the lambda expression: inspect gives its whole line, which may hold f, df and more.

    The lambda is found in its file (a notebook cell too) as the one whose body holds the first
    position its bytecode points at; None when the file cannot be read or parsed.
    """
    code = function.__code__
    text = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    positions = [(line, column) for line, _, column, end in code.co_positions()
                 if line is not None and column is not None and (column, end) != (0, 0)]
    if not positions:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
            body = node.body
            if (body.lineno, body.col_offset) <= positions[0] <= (body.end_lineno, body.end_col_offset):
                return ast.get_source_segment(text, node)
    return None


def built_in_name(item: object) -> str:
    """A name for code without Python source (torch.exp, say); never a repr, whose address changes per run."""
    module = getattr(item, "__module__", None)
    name = getattr(item, "__name__", None) or type(item).__name__
    return f"{module}.{name}  # built in: no Python source" if module else f"{name}  # built in: no Python source"
