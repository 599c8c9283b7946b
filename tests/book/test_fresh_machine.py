"""What the README tells a reader on a fresh machine: the test command runs the browser tests too, and a
browser test that cannot run says why at the end of the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from ..toc import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_the_readme_installs_chromium_before_the_tests() -> None:
    commands = re.findall(r"```bash\n(.*?)```", section("Run the tests"), re.DOTALL)
    assert commands[0].strip() == ".ci/run"
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install" in script and "chromium" in script and script.rstrip().endswith("python -m pytest")
    assert "CHECKS_REQUIRE_BROWSER=1" in script
    by_hand = commands[1].strip().splitlines()
    assert by_hand[0] == "sudo apt-get install chromium graphviz" and by_hand[-1].endswith("python -m pytest")


def test_the_readme_installs_the_package_from_the_configured_repository() -> None:
    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
    assert f'pip install "gradient-checks[notebook] @ git+{url}@main"' in section("Run a chapter as a notebook")


def test_a_skipped_browser_test_says_why_at_the_end_of_the_run(book_html: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-chromium-here"
    environment = {key: value for key, value in os.environ.items() if key != "CHECKS_REQUIRE_BROWSER"}
    environment.update(CHECKS_CHROMIUM=str(missing), CHECKS_BOOK_HTML=str(book_html))
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/browser", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, cwd=ROOT, env=environment, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    summary = run.stdout[run.stdout.index("short test summary info"):]
    skipped = [line for line in summary.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(f"no chromium at {missing} (apt-get install chromium" in line for line in skipped), summary
