"""Shared fixtures, and the layers the tests are sorted into. The book is built once per test session, from a
clean build folder, and only when a selected test reads it.

Each folder of tests is one layer, and its tests carry that layer's marker (python -m pytest -m unit):
library/ and teaching/ are `unit` (the checker library, the teaching API: no book, no kernel, no browser),
sphinx/ is `sphinx` (scratch builds, the ledger, notebooks, kernels), book/ is `book` (reads the session's built
book, or the book's sources), browser/ is `browser` (the built site in chromium).

The build starts in the background when the session starts, and the tests that do not read it run first
(scratch books, the package's own tests): they leave a core idle most of the time, which the build uses.
Set CHECKS_BOOK_HTML to an existing _build/html folder to test that build instead (quick local reruns).
`-m unit` runs on every core (pytest-xdist); the other layers run in one process (see pytest_cmdline_main).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# One browser and one local server for every module that reads the site in chromium.
from .chromium import browser, site, tab  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
# The command a reader runs, from the environment running the tests.
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))


# A parallel build executes at least two chapters at a time, even on one core, so that it differs from a
# sequential one.
PARALLEL = max(2, os.cpu_count() or 1)


def _environment(processes: int | None) -> dict[str, str]:
    """The test run's environment, with this checkout first on PYTHONPATH and `processes` kernels at a time
    (CHECKS_BUILD_PROCESSES; None leaves the default)."""
    from checks.sphinx.parallel import PROCESSES_VARIABLE  # the build's stack: only tests that build import it

    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    env.pop(PROCESSES_VARIABLE, None)
    if processes is not None:
        env[PROCESSES_VARIABLE] = str(processes)
    return env


def jupyter_book(*arguments: str, processes: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run jupyter-book; its kernels import `checks` from this checkout, whatever else is installed.

    `processes` kernels execute chapters at a time (CHECKS_BUILD_PROCESSES); None leaves the default.
    """
    return subprocess.run([JUPYTER_BOOK, *arguments], capture_output=True, text=True, cwd=ROOT,
                          env=_environment(processes))


def build_book(output: Path, source: Path = ROOT, *, clean: bool = True, processes: int | None = None) -> Path:
    """Run `jupyter-book build` as a reader would, into output/_build; fail with its log if it fails."""
    result = jupyter_book("build", *(["--all"] if clean else []), "--path-output", str(output), str(source),
                          processes=processes)
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build failed ({result.returncode}):\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return output / "_build" / "html"


def _reads_the_book(item: pytest.Item) -> bool:
    return "book_html" in getattr(item, "fixturenames", ())


def _starts_kernels(item: pytest.Item) -> bool:
    return item.get_closest_marker("kernels") is not None


# The marker of each folder's tests (registered in pyproject.toml).
LAYERS = {"library": "unit", "teaching": "unit", "sphinx": "sphinx", "book": "book", "browser": "browser"}
# What a test of the unit layer must not use, and what only the browser layer may.
BROWSER_FIXTURES = {"browser", "site", "tab"}


def _layer(item: pytest.Item) -> str:
    """The marker of the folder the test lives in; a test outside the layers' folders is refused."""
    parts = item.path.relative_to(Path(__file__).parent).parts
    if len(parts) < 2 or parts[0] not in LAYERS:
        raise pytest.UsageError(f"{item.nodeid}: a test file lives in the folder of its layer, one of "
                                f"{', '.join(f'tests/{folder}/' for folder in LAYERS)}")
    return LAYERS[parts[0]]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`-m unit` does not even import the other layers' tests (the book's test modules import its stack)."""
    folder = collection_path.name if collection_path.parent == Path(__file__).parent else None
    if config.option.markexpr == "unit" and folder in LAYERS and LAYERS[folder] != "unit":
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        layer = _layer(item)
        uses = set(getattr(item, "fixturenames", ()))
        if layer == "unit" and (_reads_the_book(item) or _starts_kernels(item) or uses & BROWSER_FIXTURES):
            raise pytest.UsageError(f"{item.nodeid}: a unit test reads no book, starts no kernel and opens no "
                                    "browser; it belongs to tests/sphinx, tests/book or tests/browser")
        if layer != "browser" and uses & BROWSER_FIXTURES:
            raise pytest.UsageError(f"{item.nodeid}: a test that opens the browser belongs to tests/browser")
        item.add_marker(layer)
    # While the session's book builds, the tests that start no kernel of their own run first (in their
    # usual order); then those that do, which wait for the build (see _no_kernels_beside_the_build); then
    # those that read the book.
    items.sort(key=lambda item: 2 if _reads_the_book(item) else 1 if _starts_kernels(item) else 0)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads -n
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-m unit` alone runs on every core: its tests are independent and CPU-bound. Each file's tests run in
    one process (--dist loadfile), so that a module's costly fixtures (op_db's samples) are made once. An
    explicit -n wins; -n 0 runs them in one process."""
    if (config.pluginmanager.hasplugin("xdist") and "PYTEST_XDIST_WORKER" not in os.environ
            and config.option.markexpr == "unit" and config.option.numprocesses is None):
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "loadfile"


@dataclass
class _Build:
    """The session's book, building in the background into output/_build, its log in output/build.log."""

    output: Path
    process: subprocess.Popen[bytes]

    def wait(self) -> Path:
        if self.process.wait() != 0:
            log = (self.output / "build.log").read_text(encoding="utf-8", errors="replace")
            pytest.fail(f"jupyter-book build failed ({self.process.returncode}):\n{log[-12000:]}")
        return self.output / "_build" / "html"


@pytest.fixture(scope="session", autouse=True)
def _session_build(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Build | None]:
    """Start building the book when the session starts, if any test of the session reads it."""
    # Several processes (pytest-xdist) would each build the book, and start kernels beside each other's.
    if os.environ.get("PYTEST_XDIST_WORKER") and any(item.get_closest_marker("unit") is None
                                                     for item in request.session.items):
        pytest.fail("pytest-xdist (-n) runs the unit layer only (-m unit): the other layers share one book "
                    "build and Jupyter kernels; run them without -n", pytrace=False)
    if os.environ.get("CHECKS_BOOK_HTML") or not any(map(_reads_the_book, request.session.items)):
        yield None
        return
    output = tmp_path_factory.mktemp("book")
    with open(output / "build.log", "wb") as log:
        process = subprocess.Popen([JUPYTER_BOOK, "build", "--all", "--path-output", str(output), str(ROOT)],
                                   stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=_environment(PARALLEL),
                                   start_new_session=True)
    try:
        yield _Build(output, process)
    finally:  # a session stopped early (-x) leaves no build running, kernels included (its process group)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()


@pytest.fixture(autouse=True)
def _no_kernels_beside_the_build(request: pytest.FixtureRequest, _session_build: _Build | None) -> None:
    """A test that starts kernels waits for the session's build to end. jupyter_client picks a kernel's
    ports by binding port 0 and closing the socket before the kernel binds it, so kernels started by two
    processes at once can be handed the same port ("Address already in use", a kernel that dies)."""
    if _session_build is not None and _starts_kernels(request.node):
        _session_build.wait()


@pytest.fixture(scope="session")
def book_html(_session_build: _Build | None) -> Path:
    reuse = os.environ.get("CHECKS_BOOK_HTML")
    if reuse:
        return Path(reuse)
    assert _session_build is not None, "a test reads the book, so the session started building it"
    return _session_build.wait()
