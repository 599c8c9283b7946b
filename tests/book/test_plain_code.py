"""No plumbing in view, and code on the page that runs when pasted in order: read from every chapter's source.

A reader sees either PyTorch they would write or the one `checks` call that witnesses it. A visible cell is
one the page shows or lets the reader open: every code cell but those tagged remove-cell or remove-input
(hide-input only folds the code; a click shows it). Plumbing (glue, HTML tables built by hand, the book's
own submodules, subprocess and junitxml) belongs in removed cells or in the package.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from dataclasses import dataclass

import pytest
from myst_nb.core.read import read_myst_markdown_notebook

from ..toc import ROOT, toc_chapters

# Every chapter, and the template a new chapter starts from (CONTRIBUTING.md).
CHAPTERS = [*toc_chapters(), "book/_template"]
REMOVED = {"remove-cell", "remove-input"}
# Names a notebook has without importing them (IPython's), beside Python's builtins.
NOTEBOOK_NAMES = {"display", "get_ipython"}
# Plumbing a visible cell may not name: the book's gluing and hand-built HTML tables.
PLUMBING_NAMES = {"glue", "records_html", "HTML", "Markdown", "NUMERICAL_COLUMNS", "COLUMNS"}
# Modules a visible cell may not import: the book's build, hand-made output, processes.
PLUMBING_MODULES = ("myst_nb", "IPython", "subprocess", "sphinx")


@dataclass(frozen=True)
class Cell:
    number: int
    source: str
    tags: tuple[str, ...]

    @property
    def visible(self) -> bool:
        return not REMOVED & set(self.tags)

    def python(self) -> str:
        """The cell as Python: IPython's line magics and shell lines left out; a %%cell magic is not Python."""
        if self.source.lstrip().startswith("%%"):
            return ""
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in self.source.splitlines())


def cells(chapter: str) -> list[Cell]:
    """The chapter's code cells as myst-nb reads its MyST source, in order."""
    notebook = read_myst_markdown_notebook((ROOT / f"{chapter}.md").read_text(encoding="utf-8"))
    return [Cell(number, "".join(cell.source), tuple(cell.metadata.get("tags", [])))
            for number, cell in enumerate(cell for cell in notebook.cells if cell.cell_type == "code")]


def plumbing(source: str) -> list[str]:
    """What a visible cell shows that is not PyTorch a reader would write nor the checks call witnessing it."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            modules = []
        for module in modules:
            if module.startswith("checks."):
                found.append(f"imports {module} (a submodule: use the names `import checks` gives)")
            if module.split(".")[0] in PLUMBING_MODULES:
                found.append(f"imports {module}")
        if isinstance(node, ast.Name) and node.id in PLUMBING_NAMES:
            found.append(f"uses {node.id}")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id.isupper() and "TABLE" in node.id:
            found.append(f"assigns {node.id} (a table's columns)")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "checks" \
                and node.attr in ("teaching", "build", "core"):
            found.append(f"reaches into checks.{node.attr}")
    if re.search(r"junit", source, re.IGNORECASE):
        found.append("runs junitxml reports")
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_plumbing_in_a_visible_cell(chapter: str) -> None:
    found = {f"cell {cell.number}": items for cell in cells(chapter) if cell.visible and (items := plumbing(cell.python()))}
    assert not found, f"{chapter}: {found}"


def names(source: str) -> tuple[set[str], set[str], set[str]]:
    """(names the cell defines at its top level, names it uses there, names its functions use as globals)."""
    table = symtable.symtable(source, "cell", "exec")
    defined = {symbol.get_name() for symbol in table.get_symbols()
               if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()}
    used = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    inner: set[str] = set()
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        inner |= {symbol.get_name() for symbol in child.get_symbols()
                  if symbol.is_referenced() and symbol.is_global() and not symbol.is_declared_global()}
        stack.extend(child.get_children())
    return defined, used, inner


def undefined(chapter_cells: list[Cell]) -> dict[str, set[str]]:
    """Names visible cells use that no visible cell defines (at the top level: no earlier one or itself)."""
    known = set(dir(builtins)) | NOTEBOOK_NAMES
    everywhere: set[str] = set()
    missing: dict[str, set[str]] = {}
    later: dict[str, set[str]] = {}
    for cell in chapter_cells:
        if not cell.visible:
            continue
        defined, used, inner = names(cell.python())
        everywhere |= defined
        lacking = used - known - defined
        if lacking:
            missing[f"cell {cell.number}"] = lacking
        known |= defined
        later[f"cell {cell.number}"] = inner
    for key, inner in later.items():
        lacking = inner - known - everywhere
        if lacking:
            missing.setdefault(key, set()).update(lacking)
    return missing


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_name_a_visible_cell_uses_is_defined_by_a_visible_cell(chapter: str) -> None:
    missing = undefined(cells(chapter))
    assert not missing, f"{chapter}: names defined only in removed cells, or nowhere: {missing}"


def test_the_readers_of_cells_find_plumbing_and_names_defined_only_where_removed() -> None:
    assert sorted(plumbing("from checks.teaching.display import records_html\nHTML(records_html(r))")) == [
        "imports checks.teaching.display (a submodule: use the names `import checks` gives)",
        "uses HTML", "uses records_html"]
    assert plumbing("import subprocess\nsubprocess.run(['pytest', '--junitxml=r.xml'])") == [
        "imports subprocess", "runs junitxml reports"]
    assert plumbing("import torch\nimport checks\nchecks.witness(e, 1.0, f)") == []
    hidden = [Cell(0, "import torch", ()), Cell(1, "helper = 1", ("remove-cell",)),
              Cell(2, "def f(x):\n    return helper * torch.sin(x)\nvalue = f(torch.tensor(1.0)) + late", ()),
              Cell(3, "late = 2", ())]
    assert undefined(hidden) == {"cell 2": {"helper", "late"}}
