"""The build's fingerprint: what, besides a chapter's own text, decides the numbers the book shows.

The code a chapter's kernel runs (NUMBERS_SOURCE: the checker library, the teaching code, the package's entry
checks.cached and the kernels' start-up file), the versions of torch, Python, numpy and pandas, and the devices the checks run on. The
code that only renders pages or writes notebooks (the rest of checks.sphinx) is left out: an edit to it
rebuilds the pages without executing a chapter. checks.sphinx.sphinxext re-executes every chapter when the
fingerprint changes; the ledger is stamped with it, and `python -m checks` refuses a ledger whose fingerprint
differs from the one of the sources beside it.
"""

from __future__ import annotations

import hashlib
import json
import platform
from importlib.metadata import version
from pathlib import Path

# The package's folder.
PACKAGE = Path(__file__).resolve().parents[1]
# Relative to the package: every .py file of a folder, or the file named.
NUMBERS_SOURCE = ("__init__.py", "core", "teaching", "sphinx/cache.py", "sphinx/kernel_startup.py")


def numbers_source() -> list[Path]:
    """The package's files whose code can change a number a chapter shows."""
    files = []
    for name in NUMBERS_SOURCE:
        path = PACKAGE / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def package_digest(paths: list[Path]) -> str:
    """One hash of the given files' names (relative to the package) and contents, in a stable order."""
    source = hashlib.sha256()
    for path in sorted(paths):
        source.update(path.relative_to(PACKAGE).as_posix().encode())
        source.update(path.read_bytes())
    return source.hexdigest()


def devices() -> str:
    """The devices the checks run on, comma separated (torch is imported to ask)."""
    from ..core.devices import available_devices

    return ",".join(available_devices())


def components(known_devices: str | None = None) -> dict[str, str]:
    """Each part of the fingerprint by name, so a mismatch can say which part differs.

    known_devices: what devices() answered on this machine, where the caller kept it (the build reads it
    back with checks.sphinx.machine, so a build that executes nothing need not import torch).
    """
    return {
        "checks source": package_digest(numbers_source()),
        # The installed distributions' versions, read without importing torch or pandas.
        "torch": version("torch"),
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "pandas": version("pandas"),
        "devices": devices() if known_devices is None else known_devices,
    }


def digest(value: object) -> str:
    """A hash of a JSON-able value, independent of key order (the fingerprint's parts, a ledger's checks)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint() -> str:
    """One hash of every component."""
    return digest(components())
