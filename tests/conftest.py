"""Shared fixtures. The book is built once per test session, from a clean build folder.

Set CHECKS_BOOK_HTML to an existing _build/html folder to test that build instead (quick local reruns).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# One browser and one local server for every module that reads the site in chromium.
from .browser import browser, site, tab  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
# The command a reader runs, from the environment running the tests.
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))


def jupyter_book(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Run jupyter-book; its kernels import `checks` from this checkout, whatever else is installed."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([JUPYTER_BOOK, *arguments], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path})


def build_book(output: Path, source: Path = ROOT, *, clean: bool = True) -> Path:
    """Run `jupyter-book build` as a reader would, into output/_build; fail with its log if it fails."""
    result = jupyter_book("build", *(["--all"] if clean else []), "--path-output", str(output), str(source))
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build failed ({result.returncode}):\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return output / "_build" / "html"


@pytest.fixture(scope="session")
def book_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reuse = os.environ.get("CHECKS_BOOK_HTML")
    if reuse:
        return Path(reuse)
    return build_book(tmp_path_factory.mktemp("book"))

