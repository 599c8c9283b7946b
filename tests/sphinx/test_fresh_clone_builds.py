"""Building the package in a fresh clone (`pip wheel .`, `pip install .`) leaves `git status` clean: what
setuptools leaves at the root (build/, *.egg-info) is ignored, and nothing of the package is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT


def _git(*arguments: str, cwd: Path) -> str:
    return subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _fresh_clone(target: Path) -> Path:
    """A repository holding this working tree's files (tracked, and untracked ones git does not ignore) as
    one commit: a fresh clone of the tree under test, uncommitted edits included."""
    for name in _git("ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT).split("\0"):
        if name and (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    _git("init", "-q", cwd=target)
    _git("add", "-A", cwd=target)
    _git("-c", "user.name=test", "-c", "user.email=test@example.org", "commit", "-q", "-m", "clone", cwd=target)
    assert _git("status", "--porcelain", cwd=target) == ""
    return target


def test_pip_wheel_and_pip_install_leave_a_fresh_clone_clean(tmp_path: Path) -> None:
    clone = _fresh_clone(tmp_path / "clone")
    # Offline and with the environment's setuptools: the build itself, not a download, is under test.
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    offline = ["--no-deps", "--no-build-isolation", "--no-index"]
    for command in (["wheel", *offline, "-w", str(tmp_path / "wheels"), "."],
                    ["install", *offline, "--target", str(tmp_path / "site"), "."]):
        run = subprocess.run([*pip, *command], cwd=clone, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert list((tmp_path / "wheels").glob("gradient_checks-*.whl")), "pip wheel wrote no wheel"
    assert (tmp_path / "site" / "checks" / "core" / "checker.py").is_file(), "pip install installed no package"
    assert _git("status", "--porcelain", "--ignored", cwd=clone), "the builds left nothing at all to ignore"
    assert _git("status", "--porcelain", cwd=clone) == ""
