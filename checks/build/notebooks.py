"""Sphinx extension: every chapter as a notebook a reader can download, or open in Colab or Binder.

myst-nb writes each executed chapter to `_build/jupyter_execute/<page>.ipynb`, and sphinx-book-theme
(when `launch_buttons` are configured) copies it into `_sources/` and offers it in the page's download
menu. This extension puts one install step in front of that copy, so the notebook runs where `checks` is
not installed, and collects the notebooks into `_build/notebooks/`, the folder the Pages workflow
publishes to the repository's notebooks branch: Colab and Binder open notebooks from GitHub, and the
launch buttons point there (the theme would point them at the `.md` source on the main branch, which
Colab cannot open).

The repository URL and branch come from `_config.yml` (`repository:`), the one place a fork changes.
"""

from __future__ import annotations

import copy
import posixpath
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nbformat
import torch
from sphinx.application import Sphinx
from sphinx.errors import ConfigError

# Where the notebooks are collected, beside _build/html; the Pages workflow publishes this folder.
NOTEBOOKS_FOLDER = "notebooks"
# The distribution pyproject.toml names; its import package is `checks`.
DISTRIBUTION = "gradient-checks"
INSTALL_TAG = "checks-install"
# pyproject.toml's extra that brings what the chapters import besides torch and numpy.
CHAPTER_EXTRA = "book"
THEME_PRIORITY = 501  # sphinx-book-theme's launch and download buttons


def install_requirement(repository_url: str, branch: str) -> str:
    """The pip requirement that installs this package from the repository (a fork's URL gives the fork), with
    the extra the chapters' code needs beside the checker library."""
    return f"{DISTRIBUTION}[{CHAPTER_EXTRA}] @ git+{repository_url.rstrip('/')}@{branch}"


def install_cells(requirement: str, companions: Mapping[str, str] | None = None) -> list[nbformat.NotebookNode]:
    """A markdown cell saying what the next one does, and the code cell installing `checks` if missing.

    companions -- files the chapter reads from its folder (path relative to the notebook -> URL): fetched
                  where the notebook was opened alone (Colab opens one file, not the folder).
    """
    companions = dict(companions or {})
    fetched = (f" It also fetches the files this chapter reads ({', '.join(f'`{name}`' for name in companions)}) "
               "when they are not beside the notebook.") if companions else ""
    note = nbformat.v4.new_markdown_cell(
        "**Running this notebook outside the book** (Colab, Binder, your own machine): the next cell "
        "installs the book's `checks` package, with what the chapters import, from the book's repository "
        f"(`pip install \"{requirement}\"`). Where `checks` is already importable it does nothing.{fetched}"
    )
    source = [
        "import importlib",
        "import importlib.util",
        "import subprocess",
        "import sys",
        *(["import urllib.request", "from pathlib import Path"] if companions else []),
        "",
        'if importlib.util.find_spec("checks") is None:',
        f'    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "{requirement}"])',
        "    importlib.invalidate_caches()  # so that the next cells find the package just installed",
    ]
    if companions:
        source += ["", f"COMPANIONS = {companions!r}", "for name, url in COMPANIONS.items():",
                   "    if not Path(name).exists():",
                   "        Path(name).parent.mkdir(parents=True, exist_ok=True)",
                   "        urllib.request.urlretrieve(url, name)"]
    code = nbformat.v4.new_code_cell("\n".join(source))
    for cell in (note, code):
        cell.metadata["tags"] = [INSTALL_TAG]
    return [note, code]


def with_install_cells(notebook: nbformat.NotebookNode, requirement: str,
                       companions: Mapping[str, str] | None = None) -> nbformat.NotebookNode:
    """The notebook with the install cells first (a copy; the executed one is left as myst-nb wrote it)."""
    result = copy.deepcopy(notebook)
    result.cells = install_cells(requirement, companions) + [
        cell for cell in result.cells if INSTALL_TAG not in cell.get("metadata", {}).get("tags", [])
    ]
    return result


def binder_requirements(requirement: str) -> str:
    """requirements.txt for Binder on the notebooks branch: the torch that built the book (CPU), then this package."""
    return (
        "# Binder's environment for the book's notebooks, written when the book was built.\n"
        "--extra-index-url https://download.pytorch.org/whl/cpu\n"
        f"torch=={torch.__version__.split('+')[0]}\n"
        f"{requirement}\n"
    )


def _repository(app: Sphinx) -> tuple[str, str, str, str]:
    """(repository URL, branch, GitHub owner, repository name) from `_config.yml`'s `repository:`."""
    options = app.config.html_theme_options
    url = options.get("repository_url", "").rstrip("/")
    if not url.startswith("https://github.com/") or len(url.split("/")) != 5:
        raise ConfigError(f"repository.url in _config.yml must be https://github.com/<owner>/<name>, got {url!r}")
    owner, name = url.split("/")[3:5]
    return url, options.get("repository_branch", "main"), owner, name


def companion_files(app: Sphinx, pagename: str) -> dict[str, str]:
    """The files a chapter reads from its folder (checks_notebook_files), each with its URL on the notebooks branch."""
    _, _, owner, name = _repository(app)
    folder = posixpath.dirname(pagename)
    files = {}
    for relative in app.config.checks_notebook_files.get(pagename, []):
        if not Path(app.srcdir, folder, relative).is_file():
            raise ConfigError(f"checks_notebook_files: {pagename} names {relative}, which is not in {folder or '.'}/")
        published = posixpath.join(folder, relative)
        files[relative] = f"https://raw.githubusercontent.com/{owner}/{name}/{app.config.checks_notebooks_branch}/{published}"
    return files


def launch_url(app: Sphinx, service: str, pagename: str) -> str:
    """Where a launch button opens the page's notebook: the notebooks branch of the repository."""
    _, _, owner, name = _repository(app)
    launch = app.config.html_theme_options.get("launch_buttons", {})
    branch = app.config.checks_notebooks_branch
    path = f"{pagename}.ipynb"
    if service == "Colab":
        return f"{launch['colab_url'].rstrip('/')}/github/{owner}/{name}/blob/{branch}/{path}"
    if service == "Binder":
        interface = {"classic": "tree", "jupyterlab": "lab/tree"}[launch.get("notebook_interface", "classic")]
        return f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{owner}/{name}/{branch}?urlpath={quote(f'{interface}/{path}')}"
    raise ValueError(f"no launch URL for {service!r}: this book offers Colab and Binder")


def _notebook_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Write the page's download notebook (with the install cells) and aim its launch buttons at it."""
    if not context.get("ipynb_source"):
        return
    url, branch, _, _ = _repository(app)
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    notebook = with_install_cells(nbformat.read(executed, as_version=4), install_requirement(url, branch),
                                  companion_files(app, pagename))
    nbformat.validate(notebook)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            for button in group["buttons"]:
                if button.get("type") == "link":
                    button["url"] = launch_url(app, button["text"], pagename)


def _collect_notebooks(app: Sphinx, exception: Exception | None) -> None:
    """Gather the book's notebooks (pages not rewritten this build included) and Binder's requirements.

    The folder is made afresh each build, so a chapter removed from the book leaves no notebook behind.
    """
    if exception is not None or app.builder.format != "html":
        return
    sources, folder = Path(app.outdir) / "_sources", Path(app.outdir).parent / NOTEBOOKS_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    for docname in sorted(app.env.found_docs):
        notebook = sources / f"{docname}.ipynb"
        if notebook.is_file():
            (folder / notebook.relative_to(sources)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, folder / notebook.relative_to(sources))
            # Beside the notebook, as in the repository: Binder opens the branch with its folders.
            for relative in app.config.checks_notebook_files.get(docname, []):
                source = Path(app.srcdir, posixpath.dirname(docname), relative)
                target = folder / posixpath.dirname(docname) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    if folder.is_dir():
        url, branch, _, _ = _repository(app)
        (folder / "requirements.txt").write_text(binder_requirements(install_requirement(url, branch)), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("checks_notebooks_branch", "notebooks", "html")
    # {chapter docname: [files it reads, relative to its folder]}: published with its notebook.
    app.add_config_value("checks_notebook_files", {}, "html")
    app.connect("html-page-context", _notebook_page, priority=THEME_PRIORITY + 1)
    app.connect("build-finished", _collect_notebooks)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
