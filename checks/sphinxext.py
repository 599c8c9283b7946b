"""Sphinx extension for the book: never show stale numbers, and style the check tables.

Sphinx re-reads (and so re-executes) a chapter only when its source changes. The chapters' numbers also
depend on the `checks` package, the torch version and the devices present, so their fingerprint is a
config value with rebuild="env": when it changes, Sphinx re-reads every chapter.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from sphinx.application import Sphinx
from sphinx.config import Config

from .devices import available_devices

PACKAGE = Path(__file__).resolve().parent


def fingerprint() -> str:
    """A hash of the checks package's source, the torch version and the devices the checks run on."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    digest.update(torch.__version__.encode())
    digest.update(",".join(available_devices()).encode())
    return digest.hexdigest()


def _set_fingerprint(app: Sphinx, config: Config) -> None:
    config.checks_fingerprint = fingerprint()


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(PACKAGE / "_static"))


def setup(app: Sphinx) -> dict:
    app.add_config_value("checks_fingerprint", "", "env")
    app.connect("config-inited", _set_fingerprint)
    app.connect("builder-inited", _add_static)
    app.add_css_file("checks.css")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
