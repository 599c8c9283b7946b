"""The pytest plugin: registered under `pytest11` by the distribution gradient-checks, its fixture runs a test
once per dtype and device; the README's engineer example passes through it, from a fresh virtual environment
outside the checkout into which `pip install <checkout>` brought torch and numpy's company only."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..toc import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
# What the book needs and a test suite must not get.
BOOK_STACK = ("sphinx", "myst-nb", "myst-parser", "jupyter-book", "pandas", "matplotlib", "ipython", "ipykernel",
              "nbformat", "docutils")


def readme_example() -> str:
    section = re.search(r"^## Check gradients in your own tests\n(.*?)(?=^## )", README, re.MULTILINE | re.DOTALL)
    assert section, "README.md has no '## Check gradients in your own tests' section"
    # The first block is the test file; the second, how to accept inconclusive elements (see
    # test_second_order_grad_outputs).
    return re.findall(r"```python\n(.*?)```", section.group(1), re.DOTALL)[0]


def run_pytest(python: str, folder: Path, *arguments: str, environment: dict[str, str] | None = None):
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-v", *arguments], cwd=folder,
                          capture_output=True, text=True, timeout=600, env=environment)


def test_the_plugin_is_registered_under_pytest11_by_the_distribution() -> None:
    entry_points = importlib.metadata.distribution("gradient-checks").entry_points
    assert [(e.group, e.value) for e in entry_points if e.group == "pytest11"] == [
        ("pytest11", "checks.core.pytest_plugin")]


def test_loading_the_plugin_imports_no_torch() -> None:
    """pytest loads every installed plugin in every session: one that uses no fixture of ours must not pay
    for importing torch (seconds), nor import checks' teaching API."""
    program = ("import sys, checks, checks.core.pytest_plugin\n"
               "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'checks.teaching') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_the_readme_example_is_five_lines_and_installs_from_the_cpu_wheel_first() -> None:
    assert len(readme_example().strip().splitlines()) == 5
    section = README[README.index("## Check gradients in your own tests"):]
    commands = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)[0].strip().splitlines()
    url = "https://github.com/gradient-checks/checking-pytorch-gradients"
    assert commands == ["pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
                        f'pip install "gradient-checks @ git+{url}@main"']
    for outcome in ("pass", "fail", "inconclusive"):
        assert f"- **{outcome}**:" in section


BUGGY = '''
import pytest
import torch


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        return grad * (s + beta * x * s * (1 - s)), (grad * x * x * s * (1 - s)).sum().reshape(beta.shape) * 1.01


def test_swish(check_gradients):
    check_gradients(Swish.apply, torch.linspace(-2.0, 2.0, 5), torch.tensor([1.5]))


@pytest.mark.gradient_checks(dtypes=["float64"], devices=["cpu"])
def test_narrowed(check_gradients, grad_dtype, grad_device):
    assert (str(grad_dtype), grad_device) == ("torch.float64", "cpu")
    report = check_gradients(torch.tanh, torch.tensor([0.5, -1.0]))
    assert report.dtype == "float64"


def test_module(check_gradients):
    torch.manual_seed(0)
    check_gradients.module(torch.nn.Linear(3, 2), lambda out: (out ** 2).sum(), torch.randn(4, 3))
'''


def test_the_fixture_runs_each_dtype_and_device_and_names_the_wrong_gradient(tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(readme_example() + BUGGY, encoding="utf-8")
    environment = {**os.environ, "CHECKS_DEVICES": "cpu"}
    run = run_pytest(sys.executable, tmp_path, environment=environment)
    assert run.returncode == 1, run.stdout[-4000:]
    outcomes = dict(re.findall(r"^test_example\.py::(\S+) (PASSED|FAILED)", run.stdout, re.MULTILINE))
    assert outcomes == {"test_sigmoid[float64-cpu]": "PASSED", "test_sigmoid[float32-cpu]": "PASSED",
                        "test_swish[float64-cpu]": "FAILED", "test_swish[float32-cpu]": "FAILED",
                        "test_narrowed[float64-cpu]": "PASSED",
                        "test_module[float64-cpu]": "PASSED", "test_module[float32-cpu]": "PASSED"}
    # Counted in the failure reports only: where CI is set, pytest's short summary repeats messages in full.
    reports = run.stdout.split("short test summary info")[0]
    assert reports.count("the gradient with respect to input `beta` is wrong") == 2
    assert "(float32, cpu)" in run.stdout and "(float64, cpu)" in run.stdout


SKIPPED_IN_FLOAT32 = '''
import torch


def test_clamp_just_beyond_its_bound(check_gradients):
    check_gradients(lambda t: t.clamp(min=-1.0), torch.tensor([-1.0004, 1.0]))


def test_relu_just_beside_its_kink(check_gradients):
    check_gradients(lambda t: torch.relu(t - 0.5) + t, torch.tensor([0.5000403, 0.2]))
'''


def test_a_skipped_float32_run_is_listed_at_its_test(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPPED_IN_FLOAT32, encoding="utf-8")
    run = run_pytest(sys.executable, tmp_path, "-rs", environment={**os.environ, "CHECKS_DEVICES": "cpu"})
    assert run.returncode == 0, run.stdout[-4000:]
    listed = re.findall(r"^SKIPPED \[1\] (\S+?):(\d+): float32", run.stdout, re.MULTILINE)
    lines = SKIPPED_IN_FLOAT32.splitlines()
    tests = ("test_clamp_just_beyond_its_bound", "test_relu_just_beside_its_kink")
    assert listed == [("test_skips.py", str(lines.index(f"def {name}(check_gradients):") + 1)) for name in tests], \
        run.stdout[-3000:]


def test_a_bad_marker_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "test_marker.py").write_text(
        "import pytest, torch\n\n@pytest.mark.gradient_checks(dtypes=['int64'])\n"
        "def test_x(check_gradients):\n    check_gradients(torch.sin, torch.ones(2))\n", encoding="utf-8")
    run = run_pytest(sys.executable, tmp_path)
    assert run.returncode != 0
    assert "@pytest.mark.gradient_checks: dtype int64 cannot carry gradients" in run.stdout + run.stderr


def _visible(names: tuple[str, ...]) -> dict[str, importlib.metadata.Distribution]:
    """The distributions named and everything they require to run (no extras), as installed here."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            found[name] = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional requirement for another platform (colorama on Windows)
        for line in found[name].requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def test_a_fresh_environment_gets_torch_and_numpy_only_and_the_example_passes(tmp_path: Path) -> None:
    """`pip install <checkout>` into a virtual environment outside the checkout that sees only torch, numpy,
    pytest, what they need, and pip and setuptools to install with (symlinked into one folder on its path):
    no index, so a dependency beyond those makes the install fail. The README's example then passes through
    the plugin of the installed copy."""
    venv = tmp_path / "venv"
    # --without-pip and no --system-site-packages: the venv sees the standard library and its own folder.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    shared = tmp_path / "visible"
    shared.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    visible = _visible(("torch", "numpy", "pytest", "pip", "setuptools"))
    for distribution in visible.values():
        tops = {Path(str(path)).parts[0] for path in distribution.files or [] if not str(path).startswith("..")}
        for top in tops:
            if (here / top).exists() and not (shared / top).exists():
                (shared / top).symlink_to(here / top)
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "visible.pth").write_text(f"{shared}\n", encoding="utf-8")
    package = tmp_path / "package"  # a copy: building leaves nothing in the checkout
    shutil.copytree(ROOT / "checks", package / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, package / name)
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PIP_FIND_LINKS")}
    environment.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, CHECKS_DEVICES="cpu")
    install = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", str(package)],
                             capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=600)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert "Successfully installed gradient-checks-" in install.stdout
    # Installed into the venv's own folder: the package and its record, nothing else.
    own = {path.name for path in Path(purelib).iterdir()} - {"visible.pth", "__pycache__"}
    assert {name for name in own if not name.startswith("gradient_checks-")} == {"checks"}, own
    listing = subprocess.run([python, "-c", "import importlib.metadata as m; print('\\n'.join(sorted("
                              "d.metadata['Name'].lower() for d in m.distributions())))"],
                             capture_output=True, text=True, check=True, env=environment).stdout.split()
    assert not set(listing) & set(BOOK_STACK), listing
    assert "gradient-checks" in listing and "torch" in listing and "numpy" in listing

    reader = tmp_path / "reader"  # outside the checkout: only the installed copy can be imported
    reader.mkdir()
    (reader / "test_readme.py").write_text(readme_example(), encoding="utf-8")
    run = run_pytest(python, reader, environment=environment)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "gradient-checks-" in run.stdout  # the plugin, listed by pytest's header
    assert re.findall(r"test_readme\.py::(\S+) PASSED", run.stdout) == ["test_sigmoid[float64-cpu]",
                                                                        "test_sigmoid[float32-cpu]"]
    where = subprocess.run([python, "-c", "import checks; print(checks.__file__)"], capture_output=True, text=True,
                           cwd=reader, env=environment, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv)
