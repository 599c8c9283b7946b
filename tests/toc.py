"""The book's chapters, read from `_toc.yml` (the tests keep no list of their own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The ledger collects every chapter's checks; it is a page of the book, not a chapter contributing checks.
LEDGER = "book/ledger"
# The API reference documents the checker library from its docstrings: a reference page, executing nothing.
API = "book/api"
# The words the book coins, defined: a reference page, executing nothing.
GLOSSARY = "book/glossary"
# What a learner sees (a value, an error message) -> the section that explains it: an index, executing nothing.
SYMPTOMS = "book/symptoms"
# Pages of the book that are not chapters: they execute no checks and have no exercises.
REFERENCE = (SYMPTOMS, GLOSSARY, API, LEDGER)


def _files(entries: list[dict[str, Any]]) -> list[str]:
    """Every `file:` in a list of toc entries, depth first (sections nest inside chapters)."""
    found = []
    for entry in entries:
        if "file" in entry:
            found.append(str(Path(entry["file"]).with_suffix("")))
        found += _files(entry.get("sections", []))
    return found


def toc_files(root: Path = ROOT) -> list[str]:
    """The root and every chapter (with its sections), parts included, as docnames without suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    if not isinstance(toc, dict) or "root" not in toc:
        raise ValueError(f"{root / '_toc.yml'} has no 'root:' entry")
    chapters = list(toc.get("chapters", []))
    for part in toc.get("parts", []):
        chapters += part.get("chapters", [])
    return [str(Path(toc["root"]).with_suffix("")), *_files(chapters)]


def toc_part(caption: str, root: Path = ROOT) -> list[str]:
    """The chapters of the part with this caption, as docnames without suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        if part.get("caption") == caption:
            return _files(part.get("chapters", []))
    raise ValueError(f"{root / '_toc.yml'} has no part captioned {caption!r}")


def toc_chapters(root: Path = ROOT) -> list[str]:
    """The chapters that must each execute and show checks: the toc without its root page and the reference
    pages (the API reference and the ledger)."""
    return [name for name in toc_files(root)[1:] if name not in REFERENCE]


def chapters_outside_toc(root: Path = ROOT, folder: str = "book") -> list[str]:
    """Chapter sources under folder that the toc never names (templates, `_*.md`, are not chapters)."""
    listed = set(toc_files(root))
    sources = sorted((root / folder).rglob("*.md")) + sorted((root / folder).rglob("*.ipynb"))
    return [
        path.relative_to(root).as_posix()
        for path in sources
        if not path.name.startswith("_")
        and not any(part.startswith(".") or part == "_build" for part in path.relative_to(root).parts)
        and path.relative_to(root).with_suffix("").as_posix() not in listed
    ]
