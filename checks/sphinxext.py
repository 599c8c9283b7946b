"""Sphinx extension for the book: never show stale numbers, style the check tables, and keep the ledger.

Sphinx re-reads (and so re-executes) a chapter only when its source changes. The chapters' numbers also
depend on the `checks` package, the torch version and the devices present, so their fingerprint is a
config value with rebuild="env": when it changes, Sphinx re-reads every chapter.

The ledger works like sphinx.ext.todo's todolist: when a chapter is read, the records its check tables
embed are kept in the build environment (which Sphinx saves between builds, so a chapter that is not
re-read keeps its records); the `checks-ledger` directive is replaced by the table of all of them when
pages are written, and ledger.json is written beside the site's index.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import posixpath
import re
from collections.abc import Iterable, Set
from pathlib import Path

import torch
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.builders.html import StandaloneHTMLBuilder
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.util.docutils import SphinxDirective
from sphinx.util.fileutil import copy_asset

from . import ledger
from .devices import available_devices
from .display import RECORDS_MIME
from .records import Record

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


EMBEDDED = re.compile(rf'<script type="{re.escape(RECORDS_MIME)}">(.*?)</script>', re.DOTALL)


class ledger_placeholder(nodes.General, nodes.Element):
    """Where the ledger goes; replaced once every chapter has been read."""


class LedgerDirective(SphinxDirective):
    """``checks-ledger``: the table of every check in the build."""

    def run(self) -> list[nodes.Node]:
        _ledger_pages(self.env).add(self.env.docname)
        return [ledger_placeholder()]


def _records(env: BuildEnvironment) -> dict[str, list[dict]]:
    if not hasattr(env, "checks_records"):
        env.checks_records = {}
    return env.checks_records


def _ledger_pages(env: BuildEnvironment) -> set[str]:
    if not hasattr(env, "checks_ledger_pages"):
        env.checks_ledger_pages = set()
    return env.checks_ledger_pages


def _collect(app: Sphinx, doctree: nodes.document) -> None:
    """Keep the executed records a chapter's outputs embed, in page order; a table shown twice counts once."""
    found: dict[str, dict] = {}
    for raw in doctree.findall(nodes.raw):
        if "html" not in raw.get("format", "").split():
            continue
        for payload in EMBEDDED.findall(raw.astext()):
            for record in json.loads(payload):
                found.setdefault(json.dumps(record, sort_keys=True), record)
    if found:
        _records(app.env)[app.env.docname] = list(found.values())


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _records(env).pop(docname, None)
    _ledger_pages(env).discard(docname)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: Set[str], other: BuildEnvironment) -> None:
    for docname in docnames:
        if docname in _records(other):
            _records(env)[docname] = _records(other)[docname]
        if docname in _ledger_pages(other):
            _ledger_pages(env).add(docname)


def _reread_ledger(app: Sphinx, env: BuildEnvironment, added: Set[str], changed: Set[str],
                   removed: Set[str]) -> Iterable[str]:
    """Any chapter read again (or added, or removed) changes the ledger page too."""
    return sorted(_ledger_pages(env)) if added or changed or removed else []


def _book_order(env: BuildEnvironment) -> list[str]:
    """Documents in the order of the table of contents, then any others alphabetically."""
    order: list[str] = []

    def visit(docname: str) -> None:
        if docname in order:
            return
        order.append(docname)
        for child in env.toctree_includes.get(docname, ()):
            visit(child)

    visit(env.config.root_doc)
    return order + sorted(set(env.all_docs) - set(order))


def entries(app: Sphinx) -> list[ledger.Entry]:
    """Every record of the build as a ledger entry, in book order."""
    records = _records(app.env)
    return [
        ledger.entry(Record.from_dict(record), chapter=app.env.titles[docname].astext(),
                     page=app.builder.get_target_uri(docname))
        for docname in _book_order(app.env) if docname in records
        for record in records[docname]
    ]


def _place_ledger(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    placeholders = list(doctree.findall(ledger_placeholder))
    if not placeholders:
        return
    here = posixpath.dirname(app.builder.get_target_uri(docname))
    target = {app.builder.get_target_uri(name): name for name in app.env.all_docs}

    def link(item: ledger.Entry) -> str:
        return f"{app.builder.get_relative_uri(docname, target[item['page']])}#{item['anchor']}"

    table = ledger.ledger_html(entries(app), link=link, json_href=posixpath.relpath(ledger.LEDGER_JSON, here or "."),
                               table_library=posixpath.relpath(f"_static/{TABLE_LIBRARY}", here or "."))
    for placeholder in placeholders:
        placeholder.replace_self(nodes.raw("", table, format="html"))


def _write_json(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        (Path(app.outdir) / ledger.LEDGER_JSON).write_text(ledger.to_json(entries(app)), encoding="utf-8")


# DataTables (with SearchPanes) as the itables package ships it: one ES module and its stylesheet, copied
# into the site so the ledger filters and sorts offline.
TABLE_LIBRARY = "itables/dt_bundle.js"


def _copy_table_library(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or not isinstance(app.builder, StandaloneHTMLBuilder):
        return
    # Only the package's files are needed: find them without importing it.
    source = Path(importlib.util.find_spec("itables").submodule_search_locations[0]) / "html"
    target = Path(app.outdir, "_static", TABLE_LIBRARY).parent
    target.mkdir(parents=True, exist_ok=True)
    for name in ("dt_bundle.js", "dt_bundle.css"):
        copy_asset(source / name, target)


def _refresh_static(app: Sphinx, exception: Exception | None) -> None:
    """Copy the static folders when no page was out of date.

    Sphinx 7 returns early from such a build, before copying them, so an edited stylesheet would not
    reach the site until some page changed. Templates (``*_t``) need the page context Sphinx did not
    build, and this book has none; files already identical are left alone.
    """
    if exception is not None or not isinstance(app.builder, StandaloneHTMLBuilder):
        return
    if hasattr(app.builder, "globalcontext"):  # pages were written: Sphinx copied them itself
        return
    for entry in app.config.html_static_path:
        copy_asset(Path(app.confdir, entry), Path(app.outdir, "_static"),
                   excluded=lambda path: path.endswith("_t") or Path(path).name.startswith("."))


def setup(app: Sphinx) -> dict:
    app.add_config_value("checks_fingerprint", "", "env")
    app.connect("config-inited", _set_fingerprint)
    app.connect("builder-inited", _add_static)
    app.add_css_file("checks.css")
    app.add_node(ledger_placeholder)
    app.add_directive("checks-ledger", LedgerDirective)
    app.connect("doctree-read", _collect)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _reread_ledger)
    app.connect("doctree-resolved", _place_ledger)
    app.connect("build-finished", _write_json)
    app.connect("build-finished", _refresh_static)
    app.connect("build-finished", _copy_table_library)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 2}
