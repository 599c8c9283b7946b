"""Shared fixtures. The book is built once per test session, from a clean build folder.

Set CHECKS_BOOK_HTML to an existing _build/html folder to test that build instead (quick local reruns).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The command a reader runs, from the environment running the tests.
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))


def build_book(output: Path) -> Path:
    """Run `jupyter-book build` as a reader would, into output/_build; fail with its log if it fails."""
    result = subprocess.run(
        [JUPYTER_BOOK, "build", "--all", "--path-output", str(output), str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        # The kernels import `checks` from this checkout, whatever else is installed.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build failed ({result.returncode}):\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return output / "_build" / "html"


@pytest.fixture(scope="session")
def book_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reuse = os.environ.get("CHECKS_BOOK_HTML")
    if reuse:
        return Path(reuse)
    return build_book(tmp_path_factory.mktemp("book"))
