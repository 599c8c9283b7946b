"""How the book build behaves: a raising chapter fails it (its traceback kept in reports/), chapters run in
their own folders with the build's environment, several at a time, and edits to `checks` are never shown
stale."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from sphinx.cmd.build import build_main

import checks.core.devices
import checks.sphinx.fingerprint
import checks.sphinx.parallel
import checks.sphinx.sphinxext

from ..conftest import jupyter_book

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

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
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: broken\n")
    (tmp_path / "broken.md").write_text(CHAPTER_HEADER + "# Broken\n\n```{code-cell} ipython3\n1 / 0\n```\n")
    result = jupyter_book("build", str(tmp_path))
    assert result.returncode != 0
    assert "ZeroDivisionError" in result.stdout + result.stderr
    report = tmp_path / "_build" / "html" / "reports" / "broken.err.log"
    assert "ZeroDivisionError" in report.read_text(), "the traceback is kept for the pull-request workflow"


MARKS = """def setup(app):
    app.connect("checks-kernel-environment", lambda app, docname: {"CHAPTER_MARK": docname.upper()})
    return {"parallel_read_safe": True}
"""
# Each chapter also prints when it ran: a few seconds of sleep make two chapters that run at once overlap.
WHERE = ("import os, time\nprint('cwd', os.getcwd(), os.environ['CHAPTER_MARK'], os.environ['BUILD_MARK'])\n"
         "start = time.time()\ntime.sleep(5)\nprint('ran', start, time.time())\n")
RAN = re.compile(r"ran ([0-9.]+) ([0-9.]+)")


def test_chapters_run_at_once_in_their_folders_with_the_build_environment_and_their_own_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "src"
    (source / "part").mkdir(parents=True)
    (source / "marks.py").write_text(MARKS)
    (source / "conf.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
                                    "extensions = ['myst_nb', 'checks.sphinx.parallel', 'marks']\n")
    (source / "index.md").write_text("# Index\n\n```{toctree}\none\npart/two\n```\n")
    for name in ("one", "part/two"):
        (source / f"{name}.md").write_text(CHAPTER_HEADER + f"# {name}\n\n```{{code-cell}} ipython3\n{WHERE}```\n")
    monkeypatch.setenv("BUILD_MARK", "inherited")
    monkeypatch.setenv(checks.sphinx.parallel.PROCESSES_VARIABLE, "2")
    assert build_main(["-b", "html", "-q", str(source), str(tmp_path / "out")]) == 0
    spans = []
    for name, folder in (("one", source), ("part/two", source / "part")):
        text = (tmp_path / "out" / f"{name}.html").read_text()
        assert f"cwd {folder.resolve()} {name.upper()} inherited" in text
        spans.append(tuple(map(float, RAN.search(text).groups())))
    (first_start, first_end), (second_start, second_end) = spans
    assert max(first_start, second_start) < min(first_end, second_end), f"the chapters ran one after another: {spans}"


def test_outputs_are_handed_over_only_to_the_text_that_was_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A chapter edited while the build ran is executed again by myst-nb, never shown with older outputs.
    executed = new_notebook(cells=[new_code_cell("x = 1", outputs=[new_output("stream", text="1")])])

    class Running:
        processes = 2

        def take(self, source: Path) -> tuple[None, checks.sphinx.parallel.Executed]:
            return None, checks.sphinx.parallel.Executed(executed, 1.0)

    monkeypatch.setattr(checks.sphinx.parallel, "_running", Running())
    monkeypatch.setattr(checks.sphinx.parallel, "_myst_create_client", lambda *arguments: "executed by myst-nb")
    edited = new_notebook(cells=[new_code_cell("x = 2")])
    assert checks.sphinx.parallel._create_client(edited, "chapter.md", None, None) == "executed by myst-nb"
    same = new_notebook(cells=[new_code_cell("x = 1")])
    assert isinstance(checks.sphinx.parallel._create_client(same, "chapter.md", None, None), checks.sphinx.parallel.PreExecuted)


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_number_of_build_processes_is_named(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(checks.sphinx.parallel.PROCESSES_VARIABLE, value)
    with pytest.raises(Exception, match=rf"CHECKS_BUILD_PROCESSES='{value}'.*at least 1"):
        checks.sphinx.parallel.processes()


def _sphinx_project(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text("extensions = ['checks.sphinx.sphinxext']\n")
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
    taken = checks.sphinx.fingerprint.components()
    monkeypatch.setattr(checks.sphinx.fingerprint, "components",
                        lambda known_devices=None: {**taken, "checks source": "edited"})
    assert build_main(["-b", "html", str(source), str(out)]) == 0
    assert "reading sources... [100%] index" in capsys.readouterr().out


@pytest.mark.parametrize("distribution", ["torch", "numpy", "pandas"])
def test_fingerprint_follows_the_versions_that_decide_the_numbers(
    distribution: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = checks.sphinx.fingerprint.components()
    assert before[distribution] == importlib.import_module(distribution).__version__
    installed = checks.sphinx.fingerprint.version
    monkeypatch.setattr(checks.sphinx.fingerprint, "version", lambda name: "0.0.0" if name == distribution else installed(name))
    after = checks.sphinx.fingerprint.components()
    assert after[distribution] == "0.0.0" and checks.sphinx.fingerprint.digest(after) != checks.sphinx.fingerprint.digest(before)


def test_fingerprint_follows_the_python_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = checks.sphinx.fingerprint.fingerprint()
    monkeypatch.setattr(checks.sphinx.fingerprint.platform, "python_version", lambda: "0.0.0")
    assert checks.sphinx.fingerprint.fingerprint() != before
    assert checks.sphinx.fingerprint.components()["python"] == "0.0.0"


def test_fingerprint_follows_the_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    before = checks.sphinx.fingerprint.components()["devices"]
    monkeypatch.setattr(checks.core.devices, "available_devices", lambda: ["cpu", "cuda"])
    assert checks.sphinx.fingerprint.components()["devices"] == "cpu,cuda" != before
