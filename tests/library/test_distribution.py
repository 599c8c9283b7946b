"""The distribution gradient-checks: its wheel ships the checker library and its pytest plugin; building it
leaves a checkout clean; its floors are the versions CI runs the library's tests on."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from ..toc import ROOT

FLOOR = ROOT / ".ci" / "floor.txt"


def fresh_clone(target: Path) -> Path:
    """The checkout as a fresh clone would hold it, with the working tree's uncommitted changes: its tracked and
    untracked-but-not-ignored files, committed into a repository of their own."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.strip()}")
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run([*git, *command], cwd=target, check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`pip wheel .` in a fresh clone: the clone and the wheel."""
    clone = fresh_clone(tmp_path_factory.mktemp("clone"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(out), "."], cwd=clone, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = out.glob("gradient_checks-*.whl")
    return clone, path


def test_the_wheel_ships_the_library_and_its_pytest_plugin(wheel: tuple[Path, Path]) -> None:
    _, path = wheel
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        plugin = archive.read(entry_points).decode()
    core = sorted(path.name for path in (ROOT / "checks" / "core").glob("*.py"))
    assert sorted(Path(name).name for name in names if name.startswith("checks/core/")) == core
    assert "checks/__init__.py" in names
    assert "[pytest11]\ngradient_checks = checks.core.pytest_plugin" in plugin


def test_building_the_wheel_leaves_the_clone_clean(wheel: tuple[Path, Path]) -> None:
    clone, _ = wheel
    # What setuptools leaves (build/, *.egg-info) is ignored by .gitignore, never a change to commit.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", status.stdout


def test_the_floors_are_the_versions_ci_runs_the_librarys_tests_on() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floors = {Requirement(line).name: Requirement(line).specifier for line in project["dependencies"]}
    pinned = {}
    for line in FLOOR.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", "-")):
            requirement = Requirement(line)
            (pin,) = requirement.specifier
            assert pin.operator == "==", line
            pinned[requirement.name] = Version(pin.version)
    assert set(floors) == {"torch", "numpy"}
    for name, specifier in floors.items():
        (clause,) = specifier
        assert clause.operator == ">=" and pinned[name] == Version(clause.version), (name, specifier, pinned)
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "-r .ci/floor.txt" in script and "-m pytest tests/library -m unit" in script
