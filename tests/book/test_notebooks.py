"""Every chapter as a notebook that reads and runs like its page: in the download menu, behind the Colab
and Binder buttons, and runnable alone, in an empty folder, in a fresh environment. Read from the built
site, as a reader meets it."""

from __future__ import annotations

import ast
import os
import posixpath
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from myst_nb.core.read import read_myst_markdown_notebook

from checks.sphinx.notebooks import INSTALL_TAG, NOTEBOOKS_FOLDER, SOLUTIONS_TITLE, WORK_TAG

from ..helpers import page
from .test_exercises import code_cells, exercises
from ..toc import ROOT, toc_chapters

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPOSITORY = CONFIG["repository"]["url"].rstrip("/")
OWNER, NAME = REPOSITORY.split("/")[3:5]
NOTEBOOKS_BRANCH = CONFIG["sphinx"]["config"]["checks_notebooks_branch"]
REQUIREMENT = f"gradient-checks[notebook] @ git+{REPOSITORY}@{CONFIG['repository']['branch']}"
SITE = f"https://{OWNER.lower()}.github.io/{NAME}/"
CHAPTERS = toc_chapters()
# What MyST leaves in text it did not render: roles, directives, colon fences.
MYST_LEFT = ("{glue", "{exercise", "{solution", "{literalinclude", ":::", "```{", "{ref}", "{doc}", "{numref}",
             "{math}", "{code-cell}")
# The book's build stack: a reader's notebook imports none of it.
BUILD_STACK = ("myst_nb", "myst_parser", "sphinx", "jupyter_book", "sphinx_exercise", "docutils")


def chapter_cells(chapter: str) -> list[nbformat.NotebookNode]:
    """The chapter's code cells, as myst-nb reads the MyST source."""
    source = (ROOT / f"{chapter}.md").read_text(encoding="utf-8")
    return [cell for cell in read_myst_markdown_notebook(source).cells if cell.cell_type == "code"]


def in_reading_order(chapter: str) -> list[nbformat.NotebookNode]:
    """The chapter's code cells in the notebook's order: the solutions' cells last, each solution's in turn."""
    source = (ROOT / f"{chapter}.md").read_text(encoding="utf-8")
    text, solutions, inside = [], [], False
    for cell in read_myst_markdown_notebook(source).cells:
        if cell.cell_type == "markdown":
            for marker in re.findall(r"\{solution-(start|end)\}", cell.source):
                inside = marker == "start"
        else:
            (solutions if inside else text).append(cell)
    return text + solutions


def added_work_cell(cell: nbformat.NotebookNode) -> bool:
    """A cell the notebook adds for an exercise (the page has none): blank, or the exercise's starter code."""
    return WORK_TAG in tags(cell) and cell.source.startswith("# Exercise")


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.metadata.get("tags", [])


def published(book_html: Path, chapter: str) -> nbformat.NotebookNode:
    path = book_html / "_sources" / f"{chapter}.ipynb"
    assert path.is_file(), f"{chapter}: no notebook at {path.relative_to(book_html)}"
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(notebook)
    return notebook


def writes_a_file(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and cell.source.startswith("%%writefile ")


def visible_text(html: str) -> str:
    """The text a reader reads, without math (MathJax's on the page, $...$ in a notebook), whitespace collapsed."""
    soup = BeautifulSoup(html, "html.parser")
    for element in soup.select(".math, .headerlink"):
        element.decompose()
    return " ".join(soup.get_text().split())


MARKDOWN = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


def notebook_text(notebook: nbformat.NotebookNode) -> str:
    """The notebook's Markdown cells as Jupyter renders them, read as text."""
    return visible_text("".join(MARKDOWN.render(cell.source) for cell in notebook.cells if cell.cell_type == "markdown"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_is_published_as_a_notebook_of_its_visible_cells(book_html: Path, chapter: str) -> None:
    notebook = published(book_html, chapter)
    assert notebook.nbformat == 4
    first = notebook.cells[0]
    assert first.cell_type == "code" and INSTALL_TAG in tags(first), f"{chapter}: the first cell is not the install cell"
    assert not [cell for cell in notebook.cells[1:] if INSTALL_TAG in tags(cell)]
    # The page's code cells, in order, the solutions' last: the cells it removes (glue, plumbing) are left out.
    code = [cell for cell in notebook.cells[1:] if cell.cell_type == "code" and not writes_a_file(cell)
            and not added_work_cell(cell)]
    shown = [cell for cell in in_reading_order(chapter) if "remove-cell" not in tags(cell)]
    assert [cell.source for cell in code] == [cell.source for cell in shown]
    # With the book's outputs; only a cell the reader completes first (an exercise's blanks) has none.
    for cell, source in zip(code, shown):
        blank = "skip-execution" in tags(source)
        assert bool(cell.execution_count) != blank, f"{chapter}: executed {cell.execution_count!r}:\n{cell.source[:300]}"
        assert "skip-execution" not in tags(cell), f"{chapter}: the notebook would skip the exercise's cell"
    assert any(cell.outputs for cell in code), f"{chapter}: the notebook has no outputs"
    # Each stream as one output, as on the page: myst-nb's merged first piece and the pieces would show it twice.
    for cell in code:
        streams = [output.name for output in cell.outputs if output.output_type == "stream"]
        assert len(streams) == len(set(streams)), f"{chapter}: a stream in pieces:\n{cell.source[:200]}"


def test_the_pytest_report_is_stored_once(book_html: Path) -> None:
    notebook = published(book_html, "book/check-your-own-code")
    reports = [output.text for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
               if output.output_type == "stream" and "short test summary info" in output.text]
    assert len(reports) == 1 and reports[0].count("short test summary info") == 1, reports


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_markdown_is_the_rendered_page_not_its_myst_source(book_html: Path, chapter: str) -> None:
    notebook = published(book_html, chapter)
    markdown = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    assert markdown, f"{chapter}: no Markdown cells"
    for source in markdown:
        left = [mark for mark in MYST_LEFT if mark in source]
        assert not left, f"{chapter}: MyST left in a Markdown cell ({left}):\n{source[:600]}"
        # Links work from a notebook opened anywhere: to the published site, or absolute.
        for target in re.findall(r"\]\(([^)\s]+)\)", source):
            assert target.startswith(("https://", "http://", "attachment:")), f"{chapter}: relative link {target}"
            if target.startswith(SITE):
                path = target.removeprefix(SITE).partition("#")[0]
                assert (book_html / path).is_file(), f"{chapter}: {target} is not a page of the book"
        for name in re.findall(r"\]\(attachment:([^)]+)\)", source):
            cell = next(cell for cell in notebook.cells if cell.cell_type == "markdown" and cell.source == source)
            assert name in cell.get("attachments", {}), f"{chapter}: image {name} is not attached"
    # The page's first heading is the notebook's.
    title = page(book_html, f"{chapter}.html").select_one("main h1").get_text(strip=True).rstrip("#")
    # Inline code in a title is code in the notebook's heading and plain text in the page's.
    assert markdown[0].splitlines()[0].replace("`", "") == f"# {title}"


def test_glued_numbers_read_in_the_notebook_as_on_the_page(book_html: Path) -> None:
    """Every paragraph with a glued value reads, word for word, as the page shows it (math aside)."""
    paragraphs = 0
    for chapter in CHAPTERS:
        soup = page(book_html, f"{chapter}.html")
        glued = [element for element in soup.select("main p, main li")
                 if element.select_one(".pasted-text") and not element.select_one("p")]
        paragraphs += len(glued)
        text = notebook_text(published(book_html, chapter)) if glued else ""
        for element in glued:
            read = visible_text(str(element))
            assert read in text, f"{chapter}: the notebook does not read as the page here:\n{read}"
    assert paragraphs, "no glued value on any page"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_exercises_are_boxes_each_with_a_cell_to_work_in_and_solutions_come_last(book_html: Path, chapter: str) -> None:
    """JupyterLab shows a cell's output again when the cell runs, folded or not: a solution beside its
    exercise would be shown by "Run All". The solutions are in a last section of their own instead."""
    notebook = published(book_html, chapter)
    cells = notebook.cells
    pairs = exercises(page(book_html, f"{chapter}.html"))
    assert pairs
    headings = [index for index, cell in enumerate(cells) if cell.cell_type == "markdown" and cell.source.startswith("#")]
    last = [index for index in headings if cells[index].source.startswith(f"## {SOLUTIONS_TITLE}\n")]
    assert len(last) == 1 and last[0] == headings[-len(pairs) - 1], f"{chapter}: no last section of solutions"
    solutions = last[0]
    for exercise, solution in pairs:
        title = exercise.select_one(".admonition-title").get_text(" ", strip=True)  # numbered across the book
        boxes = [index for index, cell in enumerate(cells)
                 if cell.cell_type == "markdown" and cell.source.startswith(f"> **{title}**")]
        assert len(boxes) == 1 and boxes[0] < solutions, f"{chapter}: {title} is not one block quote before the solutions"
        statement = visible_text(str(exercise.select_one("p")))
        assert statement in visible_text(MARKDOWN.render(cells[boxes[0]].source))
        # A cell to work in, before the next box or heading: the page's own, its starter code, or a blank one.
        end = min(index for index, cell in enumerate(cells) if index > boxes[0] and cell.cell_type == "markdown"
                  and (cell.source.startswith(("#", "> **Exercise"))))
        work = [cells[index] for index in range(boxes[0], end) if WORK_TAG in tags(cells[index])]
        assert work, f"{chapter}: {title} has no cell to work in"
        assert all(cell.cell_type == "code" and "jupyter" not in cell.metadata and not cell.outputs for cell in work)
        for starter in exercise.select("div.highlight-python pre, div.highlight-ipython3 pre"):
            if not starter.find_parent("div", class_="cell"):  # code in the exercise's text: a cell that runs it
                assert any(starter.get_text().strip() in cell.source for cell in work), f"{chapter}: {title}'s code has no cell"
        if all(cell.source.startswith("# Exercise") and len(cell.source.splitlines()) == 2 for cell in work):
            assert f'"{SOLUTIONS_TITLE}"' in work[0].source  # a blank one says what to write, and where the solution is
        # The solution, under its title in the last section: its prose and its code, shown.
        heading = [index for index in headings if cells[index].source.startswith(f"### Solution to {title}\n")
                   or cells[index].source == f"### Solution to {title}"]
        assert len(heading) == 1 and heading[0] > solutions, f"{chapter}: no solution to {title} in the last section"
        end = min([index for index in headings if index > heading[0]], default=len(cells))
        prose = visible_text("".join(MARKDOWN.render(cells[index].source) for index in range(heading[0], end)
                                     if cells[index].cell_type == "markdown"))
        for paragraph in solution.select("p"):
            if not paragraph.find_parent("div", class_="cell"):
                assert visible_text(str(paragraph)) in prose, f"{chapter}: solution prose missing: {paragraph.get_text()[:80]}"
        code = [cells[index] for index in range(heading[0], end) if cells[index].cell_type == "code"]
        assert [cell.source.strip() for cell in code] == [source.strip() for source in code_cells(solution)]
        assert all("jupyter" not in cell.metadata for cell in code), f"{chapter}: a solution's code is hidden"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_first_cell_installs_what_the_chapter_imports_and_nothing_else(book_html: Path, chapter: str) -> None:
    notebook = published(book_html, chapter)
    install = notebook.cells[0].source
    assert f'PACKAGE = "{REQUIREMENT}"' in install
    assert 'importlib.util.find_spec(module) is None' in install
    for name in ("sphinx", "myst", "jupyter-book", "jupyter_book"):
        assert name not in install.lower(), f"{chapter}: the install cell names {name}"
    # pytest, where (and only where) the chapter runs it.
    code = "\n".join(cell.source for cell in notebook.cells[1:] if cell.cell_type == "code")
    assert ('"pytest": \'pytest\'' in install) == bool(re.search(r"\bpytest\b", code)), install
    # The code a reader runs imports nothing of the book's build.
    for cell in notebook.cells:
        if cell.cell_type != "code" or writes_a_file(cell):
            continue
        tree = ast.parse("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not imported & set(BUILD_STACK), f"{chapter}: a cell imports {imported & set(BUILD_STACK)}"


def test_the_package_has_the_notebook_extra_the_install_cell_names() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "gradient-checks"
    extra = {line.split(">")[0].split("=")[0].strip().lower() for line in project["optional-dependencies"]["notebook"]}
    assert {"pandas", "matplotlib", "ipython"} <= extra


def test_the_package_declares_every_distribution_the_notebooks_import(book_html: Path) -> None:
    """`pip install "gradient-checks[notebook]"` (and pytest, where the install cell names it) must bring
    what the notebooks' code imports outside the stdlib."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {Requirement(line).name.lower() for line in
                [*project["dependencies"], *project["optional-dependencies"]["notebook"]]} | {project["name"]}
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for chapter in CHAPTERS:
        notebook = published(book_html, chapter)
        installed = declared | ({"pytest"} if "'pytest'" in notebook.cells[0].source else set())
        # The files the notebook writes are importable by their folder (own_code.swish) or from it (swish).
        written = {part.removesuffix(".py") for cell in notebook.cells if writes_a_file(cell)
                   for part in cell.source.split("\n", 1)[0].removeprefix("%%writefile ").split("/")}
        for cell in notebook.cells[1:]:
            if cell.cell_type != "code":
                continue
            body = cell.source.split("\n", 1)[1] if writes_a_file(cell) else cell.source
            tree = ast.parse("\n".join(line for line in body.splitlines() if not line.lstrip().startswith(("%", "!"))))
            for node in ast.walk(tree):
                names = ({alias.name.split(".")[0] for alias in node.names} if isinstance(node, ast.Import) else
                         {node.module.split(".")[0]} if isinstance(node, ast.ImportFrom) and node.level == 0 else set())
                for name in names - written - set(sys.stdlib_module_names):
                    if not {dist.lower() for dist in distributions.get(name, [name])} & installed:
                        missing[name] = chapter
    assert not missing, f"imported by the notebooks, brought by no install: {missing}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_download_menu_offers_the_notebook(book_html: Path, chapter: str) -> None:
    soup = page(book_html, f"{chapter}.html")
    links = [a["href"] for a in soup.select(".dropdown-download-buttons a[href]")]
    notebooks = [href for href in links if href.endswith(".ipynb")]
    assert len(notebooks) == 1, f"{chapter}: download menu offers {links}"
    target = posixpath.normpath(posixpath.join(posixpath.dirname(chapter), notebooks[0]))
    assert target == f"_sources/{chapter}.ipynb" and (book_html / target).is_file()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_launch_buttons_open_a_notebook_the_build_publishes(book_html: Path, chapter: str) -> None:
    soup = page(book_html, f"{chapter}.html")
    buttons = {a.get_text(strip=True): a["href"] for a in soup.select(".dropdown-launch-buttons a[href]")}
    assert {"Colab", "Binder"} <= set(buttons), f"{chapter}: launch menu offers {sorted(buttons)}"
    colab = urlsplit(buttons["Colab"])
    prefix = f"/github/{OWNER}/{NAME}/blob/{NOTEBOOKS_BRANCH}/"
    assert colab.netloc == "colab.research.google.com" and colab.path.startswith(prefix)
    binder = urlsplit(buttons["Binder"])
    assert binder.netloc == "mybinder.org" and binder.path == f"/v2/gh/{OWNER}/{NAME}/{NOTEBOOKS_BRANCH}"
    binder_path = unquote(parse_qs(binder.query)["urlpath"][0]).removeprefix("lab/tree/")
    folder = book_html.parent / NOTEBOOKS_FOLDER
    for path in (colab.path.removeprefix(prefix), binder_path):
        # The folder the Pages workflow pushes to the notebooks branch: the path must be there.
        assert (folder / path).is_file(), f"{chapter}: launch URL names {path}, not in {folder}"
        assert (folder / path).read_bytes() == (book_html / "_sources" / f"{chapter}.ipynb").read_bytes()


def test_the_files_a_chapter_reads_are_written_by_its_notebook(book_html: Path) -> None:
    files = CONFIG["sphinx"]["config"].get("checks_notebook_files", {})
    assert files, "no chapter declares the files it reads (checks_notebook_files)"
    for chapter in CHAPTERS:
        written = {cell.source.split("\n", 1)[0].removeprefix("%%writefile "): cell.source.split("\n", 1)[1]
                   for cell in published(book_html, chapter).cells if writes_a_file(cell)}
        assert sorted(written) == sorted(files.get(chapter, [])), f"{chapter}: writes {sorted(written)}"
        for name, text in written.items():
            assert text == (ROOT / posixpath.dirname(chapter) / name).read_text(encoding="utf-8")


def test_binder_installs_the_package_and_the_torch_that_built_the_book(book_html: Path) -> None:
    import torch

    requirements = (book_html.parent / NOTEBOOKS_FOLDER / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert f"torch=={torch.__version__.split('+')[0]}" in requirements
    assert REQUIREMENT in requirements


def test_the_pages_workflow_publishes_the_notebooks_to_the_branch_the_buttons_name() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8"))
    steps = [step for job in workflow["jobs"].values() for step in job.get("steps", [])]
    publish = next(step for step in steps if step.get("name") == "Publish the chapter notebooks")
    assert f"cd _build/{NOTEBOOKS_FOLDER}" in publish["run"]
    assert "['sphinx']['config']['checks_notebooks_branch']" in publish["run"] and 'git push -f' in publish["run"]
    assert workflow["permissions"]["contents"] == "write"
    names = [step.get("name") or step.get("uses") for step in steps]
    assert names.index("Publish the chapter notebooks") > names.index("Verify the ledger")


# Importing any of the book's build stack fails in the fresh environment, as on Colab without it.
BLOCKER = f"""
import importlib.abc
import sys


class BuildStackMissing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BUILD_STACK!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (the book's build stack is not a reader's)")
        return None


sys.meta_path.insert(0, BuildStackMissing())
"""

# Run by the fresh environment's Python: "Run all" with nbclient (which stops at the first error), then say
# where `checks` came from. The chapters run at once, each from its own process: over TCP, jupyter_client
# picks a kernel's ports by binding port 0 and closing the socket before the kernel binds it, so two
# processes can be handed the same port (a kernel that dies of "Address already in use"). Unix sockets in
# each reader's own folder have no ports to share.
EXECUTE = """
import sys
import nbclient
import nbformat
from traitlets.config import Config

notebook = nbformat.read(sys.argv[1], as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell("import checks\\nprint(checks.__file__)"))
nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                        config=Config({"KernelManager": {"transport": "ipc"}})).execute()
nbformat.write(notebook, sys.argv[1])
print(notebook.cells[-1].outputs[0].text.strip())
"""


def fresh_environment(folder: Path) -> tuple[Path, dict[str, str]]:
    """A virtual environment where `checks` and the build stack cannot be imported, and torch, pandas,
    pip and the rest are this environment's, reached by a plain path (not reinstalled).

    Made explicitly: `python -m venv --system-site-packages` from inside a virtual environment gives the
    *base* interpreter's packages, not this environment's; a path in a .pth file gives this environment's
    site-packages without running the .pth files there (among them the editable install of checks).
    """
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    (purelib / "build_stack_missing.py").write_text(BLOCKER, encoding="utf-8")
    (purelib / "build_stack_missing.pth").write_text("import build_stack_missing\n", encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # Offline: the dependencies are this environment's; pip builds the package with the setuptools it has.
    environment.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return venv, environment


def test_every_notebook_runs_top_to_bottom_alone_in_a_fresh_environment(book_html: Path, tmp_path: Path) -> None:
    """Each published notebook, alone in an empty folder outside the checkout, in a fresh environment
    without `checks` or the build stack: its own first cell installs the package (the repository's URL
    swapped for a copy of this checkout: no network here), then "Run all" with nbclient, without an error.
    The exercise left blank says what to fill in instead of raising."""
    venv, environment = fresh_environment(tmp_path)
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('checks'), u.find_spec('torch') is not None)"],
                           capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert probe.stdout.split() == ["None", "True"], probe.stdout + probe.stderr
    package = tmp_path / "package"  # a copy, so that building the wheel leaves nothing in the checkout
    shutil.copytree(ROOT / "checks", package / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, package / name)
    local = f"gradient-checks[notebook] @ {package.as_uri()}"

    runs = {}
    for chapter in CHAPTERS:
        notebook = published(book_html, chapter)
        assert REQUIREMENT in notebook.cells[0].source
        notebook.cells[0].source = notebook.cells[0].source.replace(REQUIREMENT, local)
        folder = tmp_path / "readers" / chapter.replace("/", "-")
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / "chapter.ipynb")
        runs[chapter] = subprocess.Popen([python, "-c", EXECUTE, "chapter.ipynb"], cwd=folder, env=environment,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if chapter == CHAPTERS[0]:
            # The first installs the package; the others find it installed (one pip at a time in one venv).
            runs[chapter].wait(timeout=900)
    for chapter, run in runs.items():
        stdout, stderr = run.communicate(timeout=900)
        assert run.returncode == 0, f"{chapter} failed in a fresh environment:\n{stderr[-4000:]}"
        imported = Path(stdout.strip().splitlines()[-1])
        assert imported.is_relative_to(venv), f"{chapter} imported checks from {imported}, not the fresh install"
        executed = nbformat.read(tmp_path / "readers" / chapter.replace("/", "-") / "chapter.ipynb", as_version=4)
        for source in chapter_cells(chapter):
            if "skip-execution" in tags(source):
                cell = next(cell for cell in executed.cells if cell.source == source.source)
                said = " ".join(str(output.get("data", {}).get("text/plain", output.get("text", ""))) for output in cell.outputs)
                assert "fill in the blank" in said, f"{chapter}: the blank exercise said {said!r}"


def test_the_install_cell_installs_checks_from_a_git_url(book_html: Path, tmp_path: Path) -> None:
    """The install cell, run where `checks` cannot be imported, installs it from a git URL and the same
    process imports it next. The repository URL is swapped for this checkout's commit (no network here)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if head.returncode != 0:
        pytest.skip(f"not a git checkout: the install cell installs from a git URL ({head.stderr.strip()})")
    venv, environment = fresh_environment(tmp_path)
    install = published(book_html, CHAPTERS[0]).cells[0].source
    local = f"gradient-checks[notebook] @ git+file://localhost{ROOT.as_posix()}@{head.stdout.strip()}"
    program = install.replace(REQUIREMENT, local) + "\nimport checks\nprint(checks.__file__)"
    run = subprocess.run([str(venv / "bin" / "python"), "-c", program], capture_output=True, text=True, cwd=tmp_path,
                         env=environment, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert Path(run.stdout.strip().splitlines()[-1]).is_relative_to(venv)
