"""Shared fixtures. The book is built once per test session, from a clean build folder.

Set CHECKS_BOOK_HTML to an existing _build/html folder to test that build instead (quick local reruns).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks.parallel import PROCESSES_VARIABLE

# One browser and one local server for every module that reads the site in chromium.
from .browser import browser, site, tab  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
# The command a reader runs, from the environment running the tests.
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))


# The session's book executes at least two chapters at a time, even on one core, so that a sequential
# build has a parallel one to be compared with.
PARALLEL = max(2, os.cpu_count() or 1)


def jupyter_book(*arguments: str, processes: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run jupyter-book; its kernels import `checks` from this checkout, whatever else is installed.

    `processes` kernels execute chapters at a time (CHECKS_BUILD_PROCESSES); None leaves the default.
    """
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    env.pop(PROCESSES_VARIABLE, None)
    if processes is not None:
        env[PROCESSES_VARIABLE] = str(processes)
    return subprocess.run([JUPYTER_BOOK, *arguments], capture_output=True, text=True, cwd=ROOT, env=env)


def build_book(output: Path, source: Path = ROOT, *, clean: bool = True, processes: int | None = None) -> Path:
    """Run `jupyter-book build` as a reader would, into output/_build; fail with its log if it fails."""
    result = jupyter_book("build", *(["--all"] if clean else []), "--path-output", str(output), str(source),
                          processes=processes)
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build failed ({result.returncode}):\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return output / "_build" / "html"


@pytest.fixture(scope="session")
def book_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reuse = os.environ.get("CHECKS_BOOK_HTML")
    if reuse:
        return Path(reuse)
    return build_book(tmp_path_factory.mktemp("book"), processes=PARALLEL)
