"""How much of a converted chapter's visible code is the book's `checks` rather than PyTorch (issue 28).

A line counts when its statement uses `checks`, a name imported from it, or a name bound from those (a
compound statement counts by its header: `with checks.raises(...):` is one line, the plain line under it
another). Blank and comment-only lines are not code. Visible: every code cell but those tagged remove-cell
or remove-input (solutions and skip-execution exercises included: a reader sees them).
Add a chapter to CONVERTED when it is converted to plain cells.
"""

from __future__ import annotations

import ast

import pytest

from ..book.test_plain_code import cells

# The template a new chapter starts from (CONTRIBUTING.md) is held to the same rules.
CONVERTED = ["book/small-function", "book/backward-functions", "book/stored-vs-returned", "book/modules",
             "book/debugging", "book/grad-is-none", "book/no-gradient", "book/in-place", "book/_template",
             "book/non-scalar", "book/kinks-and-nan", "book/hooks-and-functions"]
LIMIT = 0.25
# "Checking numerically" teaches the checker: its checkers' and tolerances' calls are the subject there (and count).
# Those in plain cells (checks.expect) are pasted into python too (test_pasted); the last two still use the
# earlier checks.plan and checks.witness.
PLAIN_NUMERICAL = ["book/finite-differences", "book/precision", "book/decision-guide", "book/failures",
                   "book/check-a-model"]
NUMERICAL = [*PLAIN_NUMERICAL, "book/how-good-is-a-check", "book/check-your-own-code"]
NUMERICAL_LIMIT = 0.40


def _header_lines(node: ast.stmt) -> range:
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(node, (ast.With, ast.For, ast.While, ast.If,
                                                               ast.FunctionDef, ast.ClassDef, ast.Try)):
        return range(node.lineno, body[0].lineno)
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _own_parts(node: ast.stmt) -> list[ast.AST]:
    """The parts of a statement that are its own, not its body's statements."""
    if isinstance(node, (ast.With,)):
        return list(node.items)
    if isinstance(node, (ast.For,)):
        return [node.target, node.iter]
    if isinstance(node, (ast.While, ast.If)):
        return [node.test]
    if isinstance(node, ast.FunctionDef):
        return [*node.decorator_list, node.args]
    if isinstance(node, (ast.ClassDef, ast.Try)):
        return []
    return [node]


def checks_lines(source: str) -> tuple[int, int]:
    """(code lines, lines whose statement uses checks or a name bound from it) of one cell's source."""
    tree = ast.parse(source)
    tainted = {"checks"}
    marked: set[int] = set()
    statements = sorted((node for node in ast.walk(tree) if isinstance(node, ast.stmt)), key=lambda n: n.lineno)
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(module.split(".")[0] == "checks" for module in modules):
                tainted |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
                marked |= set(_header_lines(node))
            continue
        used = {item.id for part in _own_parts(node) for item in ast.walk(part) if isinstance(item, ast.Name)}
        if used & tainted:
            marked |= set(_header_lines(node))
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.With)):
                targets = ([*node.targets] if isinstance(node, ast.Assign) else
                           [item.optional_vars for item in node.items if item.optional_vars] if isinstance(node, ast.With)
                           else [node.target])
                tainted |= {item.id for target in targets for item in ast.walk(target) if isinstance(item, ast.Name)}
    lines = source.splitlines()
    code = {number for number, text in enumerate(lines, start=1) if text.strip() and not text.strip().startswith("#")}
    return len(code), len(code & marked)


def share(chapter: str) -> tuple[int, int]:
    total = used = 0
    for cell in cells(chapter):
        if cell.visible:
            lines, marked = checks_lines(cell.python())
            total, used = total + lines, used + marked
    return total, used


def takes_see(chapter: str) -> list[str]:
    """Functions of the chapter's visible cells that take `see` (the old scripts' observer)."""
    return [node.name for cell in cells(chapter) if cell.visible for node in ast.walk(ast.parse(cell.python()))
            if isinstance(node, ast.FunctionDef) and "see" in [argument.arg for argument in node.args.args]]


@pytest.mark.parametrize("chapter", CONVERTED)
def test_at_most_a_quarter_of_the_visible_code_is_checks(chapter: str) -> None:
    total, used = share(chapter)
    assert total and used / total <= LIMIT, f"{chapter}: {used} of {total} visible code lines use checks"


@pytest.mark.parametrize("chapter", NUMERICAL)
def test_at_most_two_fifths_of_a_numerical_chapter_s_visible_code_is_checks(chapter: str) -> None:
    total, used = share(chapter)
    assert total and used / total <= NUMERICAL_LIMIT, f"{chapter}: {used} of {total} visible code lines use checks"


@pytest.mark.parametrize("chapter", CONVERTED + NUMERICAL)
def test_no_function_takes_see(chapter: str) -> None:
    assert takes_see(chapter) == []


# The widest line the code box shows whole at 1280 px, in the book and in JupyterLab (tests/browser measure it).
CODE_WIDTH = 74


@pytest.mark.parametrize("chapter", CONVERTED + NUMERICAL)
def test_every_visible_code_line_fits_the_code_box(chapter: str) -> None:
    long = [line for cell in cells(chapter) if cell.visible for line in cell.python().splitlines()
            if len(line) > CODE_WIDTH]
    assert not long, long


def test_the_count_follows_names_bound_from_checks() -> None:
    source = ("import torch\nimport checks\nx = torch.tensor(3.0, requires_grad=True)\n# a comment\n\n"
              "r = checks.recorded('a')\nvalue = r.observed_gradient\ny = x * x\n"
              "with checks.raises(RuntimeError):\n    y.backward()\n")
    assert checks_lines(source) == (8, 4)  # import checks, r = ..., value = r..., with checks.raises
    assert checks_lines("from checks import expect\nexpect(1, 1, 'one')\nz = 2\n") == (3, 2)
    assert takes_see.__name__ and checks_lines("def f(x, see):\n    see(x)\n") == (2, 0)
