"""Every chapter as a notebook: in the page's download menu, behind its Colab and Binder buttons, and
runnable outside this repository. Read from the built site, as a reader meets it."""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest
import yaml
from myst_nb.core.read import read_myst_markdown_notebook

from checks.build.notebooks import CHAPTER_EXTRA, INSTALL_TAG, NOTEBOOKS_FOLDER

from .helpers import page
from .toc import ROOT, toc_chapters

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPOSITORY = CONFIG["repository"]["url"].rstrip("/")
OWNER, NAME = REPOSITORY.split("/")[3:5]
NOTEBOOKS_BRANCH = CONFIG["sphinx"]["config"]["checks_notebooks_branch"]
CHAPTERS = toc_chapters()


def chapter_code(chapter: str) -> list[str]:
    """The chapter's code cells, as myst-nb reads the MyST source."""
    source = (ROOT / f"{chapter}.md").read_text(encoding="utf-8")
    return [cell.source for cell in read_myst_markdown_notebook(source).cells if cell.cell_type == "code"]


def published(book_html: Path, chapter: str) -> nbformat.NotebookNode:
    path = book_html / "_sources" / f"{chapter}.ipynb"
    assert path.is_file(), f"{chapter}: no notebook at {path.relative_to(book_html)}"
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(notebook)
    return notebook


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_is_published_as_its_executed_notebook(book_html: Path, chapter: str) -> None:
    notebook = published(book_html, chapter)
    assert notebook.nbformat == 4
    install = [cell for cell in notebook.cells if INSTALL_TAG in cell.metadata.get("tags", [])]
    assert [cell.cell_type for cell in notebook.cells[:2]] == ["markdown", "code"] and notebook.cells[:2] == install
    code = [cell for cell in notebook.cells[2:] if cell.cell_type == "code"]
    assert [cell.source for cell in code] == chapter_code(chapter)
    # Only a cell the reader completes first (an exercise's blanks) is left unexecuted, by its tag.
    unexecuted = [cell for cell in code if not cell.execution_count]
    assert code and all("skip-execution" in cell.metadata.get("tags", []) for cell in unexecuted), \
        f"{chapter}: a code cell was not executed"
    assert any(cell.outputs for cell in code), f"{chapter}: the notebook has no outputs"


def test_the_install_cell_installs_from_the_configured_repository(book_html: Path) -> None:
    note, code = published(book_html, CHAPTERS[0]).cells[:2]
    requirement = f"gradient-checks[{CHAPTER_EXTRA}] @ git+{REPOSITORY}@{CONFIG['repository']['branch']}"
    assert requirement in note.source and "does nothing" in note.source
    assert f'"{requirement}"' in code.source and 'importlib.util.find_spec("checks") is None' in code.source
    # The package name it installs is the one pyproject.toml builds.
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'name = "gradient-checks"' in pyproject


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


def test_the_files_a_chapter_reads_are_published_and_fetched_from_the_notebooks_branch(book_html: Path) -> None:
    companions = CONFIG["sphinx"]["config"].get("checks_notebook_files", {})
    prefix = f"https://raw.githubusercontent.com/{OWNER}/{NAME}/{NOTEBOOKS_BRANCH}/"
    for chapter in CHAPTERS:
        install = published(book_html, chapter).cells[1].source
        files = companions.get(chapter, [])
        urls = re.findall(r"'(https://[^']+)'", install)
        assert len(urls) == len(files), f"{chapter}: the install cell fetches {urls}, the configuration names {files}"
        for name, url in zip(files, urls):
            assert url.startswith(prefix) and f"'{name}': '{url}'" in install
            path = url.removeprefix(prefix)
            published_file = book_html.parent / NOTEBOOKS_FOLDER / path
            assert published_file.is_file(), f"{chapter}: {url} names {path}, not in the notebooks folder"
            assert published_file.read_bytes() == (ROOT / path).read_bytes()


def test_binder_installs_the_package_and_the_torch_that_built_the_book(book_html: Path) -> None:
    import torch

    requirements = (book_html.parent / NOTEBOOKS_FOLDER / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert f"torch=={torch.__version__.split('+')[0]}" in requirements
    assert f"gradient-checks[{CHAPTER_EXTRA}] @ git+{REPOSITORY}@{CONFIG['repository']['branch']}" in requirements


def test_the_pages_workflow_publishes_the_notebooks_to_the_branch_the_buttons_name() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8"))
    steps = [step for job in workflow["jobs"].values() for step in job.get("steps", [])]
    publish = next(step for step in steps if step.get("name") == "Publish the chapter notebooks")
    assert f"cd _build/{NOTEBOOKS_FOLDER}" in publish["run"]
    assert "['sphinx']['config']['checks_notebooks_branch']" in publish["run"] and 'git push -f' in publish["run"]
    assert workflow["permissions"]["contents"] == "write"
    names = [step.get("name") or step.get("uses") for step in steps]
    assert names.index("Publish the chapter notebooks") > names.index("Verify the ledger")


def venv_seeing_this_environment(venv: Path) -> Path:
    """A fresh virtual environment, without pip of its own, whose Python sees the packages of the one
    running the tests (torch and the rest, not downloaded again); its python.

    `python -m venv --system-site-packages` would not do: run from inside a virtual environment, it sees the
    base interpreter's packages, not this environment's. So this environment's site-packages folders are
    named in a .pth file of the new one, as plain paths: their own .pth files (among them the editable
    install of checks) are not run. pip, found there, installs into the new environment.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    folders = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    seen = [path for path in sys.path if path in folders and Path(path).is_dir()]
    (Path(purelib) / "outer-environment.pth").write_text("".join(f"{path}\n" for path in seen), encoding="utf-8")
    return python


# Run by the fresh environment's Python: execute one notebook top to bottom, then say where `checks` came from.
EXECUTE = """
import sys
import nbclient
import nbformat

notebook = nbformat.read(sys.argv[1], as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell("import checks\\nprint(checks.__file__)"))
nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3").execute()
print(notebook.cells[-1].outputs[0].text.strip())
"""


def test_every_notebook_runs_outside_the_checkout_after_pip_install(book_html: Path, tmp_path: Path) -> None:
    """A fresh virtual environment (torch and the rest from the system, not re-downloaded), `pip install`
    of a copy of the package (not editable), then each chapter's published notebook executed with
    nbclient in a folder outside the checkout, where only the installed package can be imported."""
    venv = tmp_path / "venv"
    python = str(venv_seeing_this_environment(venv))
    package = tmp_path / "package"  # a copy, so that building the wheel leaves nothing in the checkout
    shutil.copytree(ROOT / "checks", package / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, package / name)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(package)],
                             capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr

    # What Binder gets: the notebooks branch, each notebook with the files its chapter reads beside it.
    work = tmp_path / "reader"
    shutil.copytree(book_html.parent / NOTEBOOKS_FOLDER, work)
    runs = {}
    for chapter in CHAPTERS:
        notebook = work / f"{chapter}.ipynb"
        runs[chapter] = subprocess.Popen([python, "-c", EXECUTE, str(notebook)], cwd=notebook.parent, env=environment,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for chapter, run in runs.items():
        stdout, stderr = run.communicate(timeout=900)
        assert run.returncode == 0, f"{chapter} failed outside the checkout:\n{stderr[-4000:]}"
        imported = Path(stdout.strip().splitlines()[-1])
        assert imported.is_relative_to(venv), f"{chapter} imported checks from {imported}, not the fresh install"


def test_the_package_declares_every_distribution_the_chapters_import() -> None:
    """`pip install` of the package with the chapters' extra must bring what their code imports (outside the
    stdlib)."""
    import ast as python_ast
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared, extras = {project["name"]}, [CHAPTER_EXTRA]
    requirements = list(project["dependencies"])
    while extras:  # an extra may name another of the package's own extras (gradient-checks[notebook])
        for line in project["optional-dependencies"][extras.pop()]:
            requirement = Requirement(line)
            if requirement.name == project["name"]:
                extras += sorted(requirement.extras)
            else:
                requirements.append(line)
    declared |= {Requirement(line).name.lower() for line in requirements}
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for chapter in CHAPTERS:
        for source in chapter_code(chapter):
            lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            for node in python_ast.walk(python_ast.parse("\n".join(lines))):
                if isinstance(node, python_ast.Import):
                    names = {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, python_ast.ImportFrom) and node.level == 0:
                    names = {node.module.split(".")[0]}
                else:
                    continue
                # The chapter's own files (published beside its notebook) are not distributions.
                folder = ROOT / Path(chapter).parent
                imported |= {name for name in names if not (folder / name).is_dir() and not (folder / f"{name}.py").is_file()}
    third_party = {name for name in imported if name not in sys.stdlib_module_names}
    missing = {name: distributions.get(name) for name in third_party
               if not {dist.lower() for dist in distributions.get(name, [name])} & declared}
    assert not missing, f"pyproject.toml's dependencies and its chapters' extra miss what the chapters import: {missing}"


def test_the_install_cell_installs_checks_where_it_is_missing(book_html: Path, tmp_path: Path) -> None:
    """The notebook's install cell, run where `checks` cannot be imported, installs it from a git URL
    and the same kernel imports it next. The repository URL is swapped for this checkout's commit (no
    network here); the cell is otherwise run as published."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if head.returncode != 0:
        pytest.skip(f"not a git checkout: the install cell installs from a git URL ({head.stderr.strip()})")
    venv = tmp_path / "venv"
    # The editable install of checks is one of the .pth files the fresh environment does not run, so
    # `checks` is missing there, as on Colab.
    python = venv_seeing_this_environment(venv)
    install = published(book_html, CHAPTERS[0]).cells[1].source
    requirement = f"gradient-checks[{CHAPTER_EXTRA}] @ git+{REPOSITORY}@{CONFIG['repository']['branch']}"
    assert requirement in install
    local = f"gradient-checks[{CHAPTER_EXTRA}] @ git+file://localhost{ROOT.as_posix()}@{head.stdout.strip()}"
    program = ('import importlib.util\nassert importlib.util.find_spec("checks") is None, "checks is importable already"\n'
               + install.replace(requirement, local) + "\nimport checks\nprint(checks.__file__)")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # Offline: the dependencies are the system's; pip builds with the setuptools it has.
    environment.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0")
    run = subprocess.run([str(python), "-c", program], capture_output=True, text=True, cwd=tmp_path, env=environment,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert Path(run.stdout.strip().splitlines()[-1]).is_relative_to(venv)
