"""What torch says about the build's machine, asked once per machine and kept in the build folder.

The build's fingerprint names the devices the checks run on, and each page names their hardware
(checks.sphinx.reader): answers only torch can give, and importing torch costs a build that executes nothing
more than all its other work. So the build asks torch once and keeps each answer in
``<doctreedir>/checks-machine.json`` under a signature of everything that can change it, read without
importing torch: torch's version and folder (so its environment), Python's version, the operating system and
host, the CPU model, the GPU device nodes and driver, the environment variables that hide or pick devices,
and the package's source (the code that computes the answers). A later build with the same signature reads
the answers back; any difference asks torch again, so an answer is never one of another machine or of other
code.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Callable
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

from .fingerprint import PACKAGE, package_digest

FILE_NAME = "checks-machine.json"
# Variables that decide which devices torch (and the checks) see.
DEVICE_VARIABLES = ("CHECKS_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# Device nodes of NVIDIA and AMD GPUs, and the NVIDIA driver's version file: a GPU or driver that appears,
# goes or changes changes the signature.
DEVICE_NODES = ("nvidia*", "kfd", "dri/*")
DRIVER_VERSION = Path("/proc/driver/nvidia/version")


def signature() -> str:
    """A hash of everything that can change what torch says about devices and hardware; no torch imported."""
    torch_spec = find_spec("torch")
    parts = {
        "torch": [version("torch"), torch_spec.origin if torch_spec else None],
        "python": platform.python_version(),
        "system": [platform.platform(), platform.node(), platform.machine(), _cpu_model()],
        "variables": {name: os.environ.get(name) for name in DEVICE_VARIABLES},
        "device nodes": sorted(str(path) for pattern in DEVICE_NODES for path in Path("/dev").glob(pattern)),
        "driver": DRIVER_VERSION.read_text(errors="replace") if DRIVER_VERSION.is_file() else None,
        "package": package_digest(list(PACKAGE.rglob("*.py"))),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line for line in info if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def remembered(folder: str | os.PathLike[str], name: str, compute: Callable[[], str]) -> str:
    """compute() (which may import torch), or its answer from an earlier build on this machine and code.

    The answers live in folder (a build's doctree folder); one computed under another signature is dropped.
    """
    path = Path(folder) / FILE_NAME
    current = signature()
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        answers = kept["answers"] if kept["signature"] == current and isinstance(kept["answers"], dict) else {}
    except (OSError, ValueError, KeyError, TypeError):
        answers = {}
    if isinstance(answers.get(name), str):
        return answers[name]
    answers[name] = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # whole or not at all
    partial.write_text(json.dumps({"signature": current, "answers": answers}, indent=1), encoding="utf-8")
    os.replace(partial, path)
    return answers[name]
