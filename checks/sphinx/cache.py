"""Results a chapter computes once and reuses while nothing that decides them has changed.

A chapter wraps a heavy computation (a suite of hundreds of checks, say) in `checks.cached(name, compute)`.
In a book build, checks.sphinx.sphinxext gives each chapter's kernel a cache folder (CHECKS_CACHE: by default
`.checks-cache` in the book's source folder, which survives `rm -rf _build`) and the chapter's source file
(CHECKS_SOURCE). The result is stored under a key made of everything that decides it:

- the build's fingerprint (checks.sphinx.fingerprint: the code a chapter's kernel runs, the torch, Python, numpy
  and pandas versions, the devices), which decides what the package computes;
- the chapter's source text, which holds `compute` and every cell run before it;
- the name, which tells apart two computations of one chapter.

A later build with the same key reads the result back instead of computing it again; any difference in
any part computes it again, so a page never shows a result of other code. The records (checks.teaching.records)
executed while computing are stored with the result and collected again when it is read back, so every one
reaches the ledger either way. Where there is no build (a notebook opened on Colab, a script, a test),
`compute` simply runs. CHECKS_CACHE=off turns the cache off in a build too.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..core.errors import CheckInputError
from .fingerprint import fingerprint

CACHE_VARIABLE = "CHECKS_CACHE"
SOURCE_VARIABLE = "CHECKS_SOURCE"
OFF = "off"
# Entries kept per chapter and name (other fingerprints: another checkout, an edit undone); older ones go.
KEPT = 4

T = TypeVar("T")


def cached(name: str, compute: Callable[[], T]) -> T:
    """compute(), or its result from an earlier build with the same fingerprint, chapter text and name."""
    # Imported here, where a chapter computes: the build's process reads this module's variable names only.
    from ..teaching import records

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise CheckInputError(f"a cached result needs a name of letters, digits, '-', '_' or '.', got {name!r}")
    if not callable(compute):
        raise CheckInputError(f"checks.cached({name!r}, compute) needs compute as a function of no arguments, "
                              f"got {compute!r}")
    path = entry_path(name)
    if path is None:
        return compute()
    try:
        value, executed = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        pass  # no entry yet, or one this Python cannot read: compute it again
    else:
        for record in executed:
            records.collect(record)
        return value
    before = {record.id: record for record in records.collected()}
    value = compute()
    executed = [record for record in records.collected() if before.get(record.id) is not record]
    try:
        payload = pickle.dumps((value, executed))
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        raise CheckInputError(f"checks.cached({name!r}, ...): its result cannot be stored ({error}); cache plain "
                              f"data (numbers, lists, dataclasses, frames), not functions or open files") from None
    _store(path, payload)
    return value


def entry_path(name: str) -> Path | None:
    """Where the result of `name` is kept for this chapter's text and this fingerprint; None without a build."""
    folder, source = os.environ.get(CACHE_VARIABLE, ""), os.environ.get(SOURCE_VARIABLE, "")
    if not folder or folder == OFF or not source:
        return None
    text = Path(source).read_bytes()
    key = hashlib.sha256(b"\0".join([fingerprint().encode(), text, name.encode()])).hexdigest()
    return Path(folder) / f"{_prefix(source, name)}{key[:32]}.pickle"


def _prefix(source: str, name: str) -> str:
    """The chapter's file name and the name: the part of an entry's file name that its older entries share."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', Path(source).stem)}--{name}--"


def _store(path: Path, payload: bytes) -> None:
    """Write the entry whole or not at all (builds may run at once), and drop the oldest of its kind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(payload)
    os.replace(partial, path)
    prefix = path.name[: path.name.rindex("--") + 2]
    older = sorted((entry for entry in path.parent.glob(f"{prefix}*.pickle") if entry != path),
                   key=lambda entry: entry.stat().st_mtime, reverse=True)
    for entry in older[KEPT - 1:]:
        entry.unlink(missing_ok=True)
