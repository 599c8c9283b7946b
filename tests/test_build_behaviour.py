"""How the book build behaves: a raising chapter fails it, and edits to `checks` are never shown stale."""

from __future__ import annotations

from pathlib import Path

import pytest
from sphinx.cmd.build import build_main

import checks.fingerprint
import checks.sphinxext

from .conftest import jupyter_book

CHAPTER_HEADER = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def test_a_chapter_whose_code_raises_fails_the_build(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: broken\n")
    (tmp_path / "broken.md").write_text(CHAPTER_HEADER + "# Broken\n\n```{code-cell} ipython3\n1 / 0\n```\n")
    result = jupyter_book("build", str(tmp_path))
    assert result.returncode != 0
    assert "ZeroDivisionError" in result.stdout + result.stderr


def _sphinx_project(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text("extensions = ['checks.sphinxext']\n")
    (source / "index.rst").write_text("Index\n=====\n")
    return source, tmp_path / "out"


def test_no_change_rebuild_reads_nothing_but_a_changed_checks_package_rereads_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = _sphinx_project(tmp_path)
    assert build_main(["-b", "html", "-q", str(source), str(out)]) == 0
    capsys.readouterr()
    assert build_main(["-b", "html", str(source), str(out)]) == 0
    assert "no targets are out of date" in capsys.readouterr().out
    monkeypatch.setattr(checks.sphinxext, "fingerprint", lambda: "the checks package was edited")
    assert build_main(["-b", "html", str(source), str(out)]) == 0
    assert "reading sources... [100%] index" in capsys.readouterr().out


def test_fingerprint_follows_the_package_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "checks"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(checks.fingerprint, "PACKAGE", package)
    before = checks.sphinxext.fingerprint()
    assert checks.sphinxext.fingerprint() == before
    (package / "a.py").write_text("x = 2\n")
    assert checks.sphinxext.fingerprint() != before


@pytest.mark.parametrize(("module", "attribute"), [("torch", "__version__"), ("numpy", "__version__"),
                                                   ("pandas", "__version__"), ("platform", "python_version")])
def test_fingerprint_follows_the_versions_that_decide_the_numbers(
    module: str, attribute: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = checks.sphinxext.fingerprint()
    target = getattr(checks.fingerprint, module)
    replacement = (lambda: "0.0.0") if attribute == "python_version" else "0.0.0"
    monkeypatch.setattr(target, attribute, replacement)
    assert checks.sphinxext.fingerprint() != before
    assert "0.0.0" in checks.fingerprint.components().values()


def test_fingerprint_follows_the_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    before = checks.fingerprint.components()["devices"]
    monkeypatch.setattr(checks.fingerprint, "available_devices", lambda: ["cpu", "cuda"])
    assert checks.fingerprint.components()["devices"] == "cpu,cuda" != before
