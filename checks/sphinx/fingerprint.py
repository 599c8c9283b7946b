"""The build's fingerprint: what, besides a chapter's own text, decides the numbers the book shows.

The checks package's source, the versions of torch, Python, numpy and pandas, and the devices the checks
run on. checks.sphinx.sphinxext re-executes every chapter when it changes; the ledger is stamped with it, and
`python -m checks` refuses a ledger whose fingerprint differs from the one of the sources beside it.
"""

from __future__ import annotations

import hashlib
import json
import platform
from importlib.metadata import version
from pathlib import Path

from ..core.devices import available_devices

# The whole checks package (the checker, the teaching API and this build side): each can change a number.
PACKAGE = Path(__file__).resolve().parents[1]


def components() -> dict[str, str]:
    """Each part of the fingerprint by name, so a mismatch can say which part differs."""
    source = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        source.update(path.relative_to(PACKAGE).as_posix().encode())
        source.update(path.read_bytes())
    return {
        "checks source": source.hexdigest(),
        # The installed distributions' versions, read without importing pandas into the build's process.
        "torch": version("torch"),
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "pandas": version("pandas"),
        "devices": ",".join(available_devices()),
    }


def digest(value: object) -> str:
    """A hash of a JSON-able value, independent of key order (the fingerprint's parts, a ledger's checks)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def fingerprint() -> str:
    """One hash of every component."""
    return digest(components())
