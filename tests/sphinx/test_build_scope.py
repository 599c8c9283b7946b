"""What a rebuild does after each kind of edit, measured on a scratch copy of the package and a small book:
nothing changed reads nothing and imports no torch in the build's process; an edit to the code that only
writes pages and notebooks rewrites every page and executes no chapter; an edit to the checker library or the
teaching code executes every chapter again. `python -m checks` agrees with the build at each step."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import checks.core.devices
from checks.sphinx import fingerprint, machine

from ..conftest import JUPYTER_BOOK, ROOT
from .test_ledger_builds import chapter, small_book

# Each execution of the chapter prints a new mark: the page shows the mark of the last execution.
MARKED = chapter("Marked", "import uuid\nprint('mark', uuid.uuid4().hex, checks.__file__)\n"
                           "checks.plan(square, 3.0).run()")
MARK = re.compile(r"mark ([0-9a-f]{32}) (\S+)")


def _package_copy(target: Path) -> Path:
    shutil.copytree(ROOT / "checks", target / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    return target / "checks"


def _append(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")


# ---- the fingerprint's scope, on a package of a few files ----

SCOPED = {"__init__.py": True, "core/errors.py": True, "teaching/records.py": True, "sphinx/cache.py": True,
          "sphinx/kernel_startup.py": True,
          "sphinx/notebooks.py": False, "sphinx/sphinxext.py": False, "sphinx/ledger.py": False}


@pytest.mark.parametrize("edited", SCOPED)
def test_the_fingerprint_covers_the_code_a_chapter_runs_and_not_the_code_that_writes_pages(
    edited: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SCOPED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    monkeypatch.setattr(fingerprint, "PACKAGE", tmp_path)
    before = fingerprint.components(known_devices="cpu")
    _append(tmp_path / edited)
    after = fingerprint.components(known_devices="cpu")
    assert (after["checks source"] != before["checks source"]) is SCOPED[edited]


def test_the_devices_are_what_torch_answers_unless_the_caller_kept_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks.core.devices, "available_devices", lambda: ["cpu", "cuda"])
    assert fingerprint.components()["devices"] == "cpu,cuda"
    assert fingerprint.components(known_devices="cpu")["devices"] == "cpu"


# ---- answers about the machine, kept between builds ----

class Counted:
    def __init__(self, answer: str) -> None:
        self.answer, self.runs = answer, 0

    def __call__(self) -> str:
        self.runs += 1
        return self.answer


def test_an_answer_is_kept_while_the_machine_and_code_are_the_same(tmp_path: Path) -> None:
    compute = Counted("cpu")
    assert machine.remembered(tmp_path, "devices", compute) == machine.remembered(tmp_path, "devices", compute) == "cpu"
    assert compute.runs == 1
    other = Counted("a line")
    assert machine.remembered(tmp_path, "line", other) == "a line" and other.runs == 1
    assert machine.remembered(tmp_path, "devices", compute) == "cpu" and compute.runs == 1, "both answers are kept"


@pytest.mark.parametrize("change", ["CUDA_VISIBLE_DEVICES", "CHECKS_DEVICES", "package", "corrupt file"])
def test_an_answer_is_asked_again_when_anything_that_decides_it_changed(
    change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "package"
    (package / "core").mkdir(parents=True)
    (package / "core" / "devices.py").write_text("x = 1\n")
    monkeypatch.setattr(machine, "PACKAGE", package)
    monkeypatch.setattr(fingerprint, "PACKAGE", package)
    for name in machine.DEVICE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    compute = Counted("cpu")
    machine.remembered(tmp_path, "devices", compute)
    if change == "package":
        _append(package / "core" / "devices.py")
    elif change == "corrupt file":
        (tmp_path / machine.FILE_NAME).write_text("{")
    else:
        monkeypatch.setenv(change, "0")
    assert machine.remembered(tmp_path, "devices", compute) == "cpu"
    assert compute.runs == 2


# ---- rebuilds of a small book built with a scratch copy of the package ----

@dataclass(frozen=True)
class Step:
    """One build of the scratch book, and what it left."""

    log: str
    mark: str  # the mark the chapter's page shows
    page_written: int  # the page's modification time (ns)
    ledger: bytes
    verified: subprocess.CompletedProcess[str]  # `python -m checks` right after the build


@dataclass(frozen=True)
class Builds:
    package: Path
    first: Step
    unchanged: Step  # a rebuild with nothing changed, its import times recorded (python -X importtime)
    writer: Step  # after an edit to the notebook writer
    stale: subprocess.CompletedProcess[str]  # `python -m checks` after an edit to checks.core, before rebuilding
    core: Step  # after that edit
    teaching: Step  # after an edit to the teaching code


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    project = tmp_path_factory.mktemp("scope")
    package = _package_copy(project)
    source = small_book(project, {"marked": MARKED})
    html = source / "_build" / "html"
    # The build, its kernel and `python -m checks` import the scratch copy, whatever else is installed.
    env = {**os.environ, "PYTHONPATH": str(project)}
    env.pop("CHECKS_BUILD_PROCESSES", None)

    def verify() -> subprocess.CompletedProcess[str]:
        # From the project's folder: `python -m` puts the working directory first on sys.path.
        return subprocess.run([sys.executable, "-m", "checks", str(html)], capture_output=True, text=True, env=env,
                              cwd=project)

    def build(*python_options: str) -> Step:
        result = subprocess.run([sys.executable, *python_options, JUPYTER_BOOK, "build", str(source)],
                                capture_output=True, text=True, env=env, cwd=project)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
        page = html / "book" / "marked.html"
        mark = MARK.search(page.read_text(encoding="utf-8"))
        assert mark is not None and Path(mark.group(2)).is_relative_to(package), "the chapter ran the scratch copy"
        return Step(result.stdout + result.stderr, mark.group(1), page.stat().st_mtime_ns,
                    (html / "ledger.json").read_bytes(), verify())

    first = build()
    unchanged = build("-X", "importtime")
    _append(package / "sphinx" / "notebooks.py")
    writer = build()
    _append(package / "core" / "__init__.py")
    stale = verify()
    core = build()
    _append(package / "teaching" / "__init__.py")
    return Builds(package, first, unchanged, writer, stale, core, build())


@pytest.mark.kernels
def test_a_rebuild_with_nothing_changed_reads_nothing_and_imports_no_torch(builds: Builds) -> None:
    assert "no targets are out of date" in builds.unchanged.log
    imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", builds.unchanged.log, re.MULTILINE)
    assert "sphinx.application" in imported and "checks.sphinx.fingerprint" in imported, "import times recorded"
    assert not [name for name in imported if name == "torch" or name.startswith("torch.")]
    assert builds.unchanged.ledger == builds.first.ledger, "the ledger of the build before is published again"
    assert builds.unchanged.verified.returncode == builds.first.verified.returncode == 0, builds.unchanged.verified


@pytest.mark.kernels
def test_an_edit_to_the_notebook_writer_rewrites_the_pages_without_executing_a_chapter(builds: Builds) -> None:
    assert builds.writer.mark == builds.first.mark, "the chapter was executed again"
    assert builds.writer.page_written > builds.unchanged.page_written, "the pages were not written again"
    assert builds.writer.verified.returncode == 0, builds.writer.verified


@pytest.mark.kernels
def test_an_edit_to_the_checker_or_the_teaching_code_executes_every_chapter_again(builds: Builds) -> None:
    assert builds.stale.returncode == 2 and "checks source: built with" in builds.stale.stderr, builds.stale
    assert len({builds.writer.mark, builds.core.mark, builds.teaching.mark}) == 3
    assert builds.core.verified.returncode == builds.teaching.verified.returncode == 0
