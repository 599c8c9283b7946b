"""A notebook's first cell where its install cannot be fetched: it stops "Run All" with one short message
naming the command to run by hand, not a subprocess traceback; where torch is missing and no GPU is
visible, the torch it asks for is the CPU build. Run in a kernel of a fresh environment, as a reader's
Jupyter runs it, with every connection refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from checks.sphinx.notebooks import TORCH_CPU_INDEX, install_cell

pytestmark = pytest.mark.kernels  # see tests/conftest.py

REQUIREMENT = "gradient-checks[notebook] @ git+https://github.com/gradient-checks/checking-pytorch-gradients@main"
# Distributions a torch-less environment leaves out (checks: its editable install is a .pth, left out too).
TORCH = ("torch", "functorch", "torchgen", "nvidia", "triton")

# Run by the fresh environment's Python: the install cell alone, in a kernel, errors kept as outputs.
EXECUTE = """
import sys
import nbclient
import nbformat
from traitlets.config import Config

notebook = nbformat.read(sys.argv[1], as_version=4)
nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                        config=Config({"KernelManager": {"transport": "ipc"}})).execute()
nbformat.write(notebook, sys.argv[1])
"""


class RefusingProxy:
    """An HTTP(S) proxy that notes which host each request was for, then closes the connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.hosts: list[str] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:  # closed
                return
            with connection:
                connection.settimeout(5)
                try:
                    request = connection.recv(4096).decode("latin-1").split("\r\n", 1)[0]
                except OSError:
                    continue
                # "CONNECT download.pytorch.org:443 HTTP/1.1", or "GET http://host/path HTTP/1.1"
                parts = request.split()
                if len(parts) >= 2:
                    self.hosts.append(parts[1].split("://")[-1].split("/")[0].split(":")[0])

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxy() -> Iterator[RefusingProxy]:
    refusing = RefusingProxy()
    yield refusing
    refusing.close()


def environment(folder: Path, *, torch: bool, proxy: RefusingProxy) -> tuple[Path, dict[str, str]]:
    """A virtual environment with this one's packages (torch left out where asked), without `checks`, where
    pip reaches no index and git no remote: every connection goes to the refusing proxy."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    outer = Path(sysconfig.get_paths()["purelib"])
    if torch:
        shared = outer
    else:  # links to every package of this environment but torch's
        shared = folder / "packages"
        shared.mkdir()
        for entry in outer.iterdir():
            if entry.suffix != ".pth" and not entry.name.lower().startswith(TORCH):
                (shared / entry.name).symlink_to(entry)
    # A path in a .pth file: its packages are importable, its own .pth files (checks' editable install) not run.
    (purelib / "outer.pth").write_text(f"{shared}\n", encoding="utf-8")
    # No GPU visible: a PATH without nvidia-smi.
    path = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV") and not key.lower().endswith("_proxy") and not key.startswith("PIP_")}
    env.update(PATH=path, HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, http_proxy=proxy.url, https_proxy=proxy.url,
               NO_PROXY="", PIP_RETRIES="0", PIP_TIMEOUT="5", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_CONFIG_FILE=os.devnull, GIT_TERMINAL_PROMPT="0")
    return python, env


def run_install_cell(folder: Path, python: Path, env: dict[str, str]) -> list[nbformat.NotebookNode]:
    notebook = nbformat.v4.new_notebook(cells=[install_cell(REQUIREMENT)])
    nbformat.write(notebook, folder / "chapter.ipynb")
    run = subprocess.run([str(python), "-c", EXECUTE, "chapter.ipynb"], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return nbformat.read(folder / "chapter.ipynb", as_version=4).cells[0].outputs


def said(outputs: list[nbformat.NotebookNode]) -> tuple[str, str]:
    """(what the reader reads under the cell, the error's name): all its text, tracebacks included."""
    errors = [output for output in outputs if output.output_type == "error"]
    assert len(errors) == 1, f"the cell did not stop with one error: {outputs}"
    text = "\n".join([*(output.get("text", "") for output in outputs if output.output_type == "stream"),
                      *errors[0].traceback])
    return text, errors[0].ename


def test_without_torch_or_a_gpu_it_asks_for_torchs_cpu_build_and_names_the_command(tmp_path: Path, proxy) -> None:
    python, env = environment(tmp_path, torch=False, proxy=proxy)
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'), u.find_spec('IPython') is not None)"],
                           capture_output=True, text=True, env=env)
    assert probe.stdout.split() == ["None", "True"], probe.stdout + probe.stderr
    text, name = said(run_install_cell(tmp_path, python, env))
    # pip went to torch's CPU index, nowhere else, and the reader is told what to run by hand.
    assert proxy.hosts and set(proxy.hosts) == {"download.pytorch.org"}, proxy.hosts
    assert name == "InstallFailed"
    assert f"%pip install torch --index-url {TORCH_CPU_INDEX}" in text
    assert "CPU build" in text and "No matching distribution found for torch" in text  # pip's reason, passed on
    assert "Traceback" not in text and "CalledProcessError" not in text
    assert len(text.splitlines()) <= 4, text


def test_where_the_package_cannot_be_fetched_it_names_the_command(tmp_path: Path, proxy) -> None:
    python, env = environment(tmp_path, torch=True, proxy=proxy)
    text, name = said(run_install_cell(tmp_path, python, env))
    assert name == "InstallFailed"
    assert f"%pip install '{REQUIREMENT}'" in text
    assert "fatal: unable to access 'https://github.com/" in text  # why: git's reason, passed on
    assert "Traceback" not in text and "CalledProcessError" not in text
    assert len(text.splitlines()) <= 4, text
