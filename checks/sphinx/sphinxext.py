"""Sphinx extension for the book: never show stale numbers, style the check tables, and keep the ledger.

Sphinx re-reads (and so re-executes) a chapter only when its source changes. The chapters' numbers also
depend on the code their kernels run (the checker library and the teaching code), the torch, Python, numpy
and pandas versions and the devices present (checks.sphinx.fingerprint), so their fingerprint is a config
value with rebuild="env": when it changes, Sphinx re-reads every chapter.

A build that reads nothing again imports neither torch nor the record and ledger modules built on it: the
fingerprint's devices are what torch answered on this machine before (checks.sphinx.machine), problem
warnings are worded once (when their chapter is read, or the package's code changed) and kept in the
environment, and ledger.json is kept when nothing it is made from changed. The package's code that only
writes pages and notebooks is not in the fingerprint: when it changes (config value checks_package_source,
rebuild="html"), every page is written again and no chapter executed.

The ledger holds every check executed, displayed or not (see checks.teaching.records, "Collection at execution"):

1. builder-inited: the previous ledger.json is moved out of the site into <doctreedir> (a failed or
   interrupted build leaves none that could verify) and the folder of per-chapter record files,
   <doctreedir>/checks-records/, is emptied.
2. source-read: CHECKS_RECORDS is set to the chapter's own file, records_path(doctreedir, docname), so
   the kernel myst-nb starts for it appends each executed record there. Chapters read in parallel
   (sphinx -j, forked workers) each get their own file. checks.sphinx.parallel, which starts the kernels of the
   chapters to be read before Sphinx reads them, gives each kernel kernel_environment(app, docname) through
   its checks-kernel-environment event, and the extension finds the file the same way.
3. doctree-read: the chapter's file is read back into the build environment with how the chapter was
   executed (myst-nb's execution data) and which records its cells displayed (records.displayed: the
   kernel says so in the same file, by cell, so the page's HTML is never read back); Sphinx saves the environment between builds, so a chapter that
   is not re-read keeps its records. The file is then removed.
4. Pages are written: the `checks-ledger` directive is replaced by the table of all records. The ledger
   page is read again whenever what the ledger is made from changed since the last finished build, so it
   is never left showing records that no longer exist.
5. build-finished, only without an exception: ledger.json is written atomically, stamped with the
   fingerprint's components, each chapter's source hash, execution and count of checks executed; or, when
   what it is made from (the records, the pages, the stamp and the package's code) is what the last
   finished build made it from, the one moved aside is put back.

A contributor is told at build time, by Sphinx warnings (so `jupyter-book build -W` fails on them):

- every build, including one that reads nothing again, warns once per problem record (an unexpected
  failure, or a declared expected failure that passed), naming the chapter, the check, expected, observed
  and the formula it came from (checks.sphinx.ledger.describe_problem, as `python -m checks` says it);
- a source file that _toc.yml leaves out (only_build_toc_files: sphinx-external-toc excludes it) is a
  warning, and the ledger's stamp lists it, so `python -m checks` names it too;
- a page no longer built (its chapter dropped from the toc, or deleted) has its HTML, its sources copies
  and its notebooks removed from the build folder, and its records leave the ledger: no stale page stays.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import posixpath
import shutil
from collections.abc import Iterable, Set
from pathlib import Path
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.builders.html import StandaloneHTMLBuilder
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.fileutil import copy_asset

from . import fingerprint as build_fingerprint
from . import machine, parallel
from .cache import CACHE_VARIABLE, SOURCE_VARIABLE

# checks.teaching.records and checks.sphinx.ledger import torch: they are imported where a chapter is read
# or the ledger written, never by a build that reads nothing again.

PACKAGE = Path(__file__).resolve().parent
RECORDS_FOLDER = "checks-records"
CACHE_FOLDER = ".checks-cache"
# checks.sphinx.ledger.LEDGER_JSON, named here so that a build that writes no ledger need not import it.
LEDGER_JSON = "ledger.json"
# Where the last finished build's ledger.json waits while a build runs, and what it was made from.
KEPT_LEDGER = "checks-ledger.json"
KEPT_LEDGER_SOURCE = "checks-ledger.sha256"
logger = logging.getLogger(__name__)


def records_path(doctreedir: str | os.PathLike[str], docname: str) -> Path:
    """The file a chapter's kernel appends its executed records to: one per chapter and build folder."""
    return Path(doctreedir) / RECORDS_FOLDER / f"{quote(docname, safe='')}.jsonl"


def kernel_environment(app: Sphinx, docname: str) -> dict[str, str]:
    """The environment variables a kernel executing docname needs: the file its checks reach the ledger
    through, the start-up file that records its library calls (kernel_startup.py), and for checks.cached,
    the chapter's source and the cache folder (CHECKS_CACHE if set, else .checks-cache in the book's source
    folder, which outlives the build folder)."""
    from ..teaching.records import RECORDS_VARIABLE

    return {RECORDS_VARIABLE: str(records_path(app.doctreedir, docname)),
            "PYTHONSTARTUP": str(PACKAGE / "kernel_startup.py"),
            SOURCE_VARIABLE: str(Path(app.env.doc2path(docname)).resolve()),
            CACHE_VARIABLE: os.environ.get(CACHE_VARIABLE) or str(Path(app.srcdir, CACHE_FOLDER))}


def _set_fingerprint(app: Sphinx, config: Config) -> None:
    # The ledger is stamped with what the chapters ran with: taken now, not when the build ends.
    # The devices are what torch answered before on this machine, kept in the build folder.
    known = machine.remembered(app.doctreedir, "devices", build_fingerprint.devices)
    app.checks_fingerprint = build_fingerprint.components(known_devices=known)
    # When it changes, every chapter is executed again (rebuild="env"); hashed from the parts just taken.
    config.checks_fingerprint = build_fingerprint.digest(app.checks_fingerprint)
    # The whole package, including the code that only renders pages and notebooks: when it changes, every
    # page is written again (rebuild="html"), and no chapter executed.
    config.checks_package_source = build_fingerprint.package_digest(list(build_fingerprint.PACKAGE.rglob("*.py")))


def _own_excludes(app: Sphinx, config: Config) -> None:
    """The book's own exclude patterns, before sphinx-external-toc adds the files its toc leaves out."""
    app.checks_own_excludes = list(config.exclude_patterns)


def _left_out(app: Sphinx, config: Config) -> None:
    """The source files the toc leaves out (app.checks_left_out), which the ledger's stamp lists."""
    own = getattr(app, "checks_own_excludes", None)
    excluded_by_toc = own is not None and getattr(config, "external_toc_exclude_missing", False)
    app.checks_left_out = sorted(set(config.exclude_patterns) - set(own)) if excluded_by_toc else []


def _add_static(app: Sphinx) -> None:
    app.config.html_static_path.append(str(PACKAGE / "_static"))


class ledger_placeholder(nodes.General, nodes.Element):
    """Where the ledger goes; replaced once every chapter has been read."""


class LedgerDirective(SphinxDirective):
    """``checks-ledger``: the table of every check in the build."""

    def run(self) -> list[nodes.Node]:
        _ledger_pages(self.env).add(self.env.docname)
        return [ledger_placeholder()]


def _chapters(env: BuildEnvironment) -> dict[str, dict]:
    """docname -> {"records": [...], "executed": n, "shown": ids displayed, "execution": how it was executed}."""
    if not hasattr(env, "checks_chapters"):
        env.checks_chapters = {}
    return env.checks_chapters


def _ledger_pages(env: BuildEnvironment) -> set[str]:
    if not hasattr(env, "checks_ledger_pages"):
        env.checks_ledger_pages = set()
    return env.checks_ledger_pages


def _start_build(app: Sphinx) -> None:
    """No ledger survives in the site into a build that may fail (it waits in the doctree folder, in case
    nothing it is made from changes); each chapter's record file starts empty."""
    if app.builder.format != "html":
        return
    previous, kept = Path(app.outdir) / LEDGER_JSON, Path(app.doctreedir) / KEPT_LEDGER
    if previous.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(previous, kept)
    source = Path(app.doctreedir) / KEPT_LEDGER_SOURCE
    app.checks_previous_source = source.read_text(encoding="utf-8") if kept.is_file() and source.is_file() else None
    folder = Path(app.doctreedir) / RECORDS_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)


def _before_execution(app: Sphinx, docname: str, source: list[str]) -> None:
    os.environ.update(kernel_environment(app, docname))


def _collect(app: Sphinx, doctree: nodes.document) -> None:
    """Keep every record the chapter's kernel executed (the last one per id), displayed or not."""
    from ..teaching.records import RECORDS_VARIABLE, read_collected, read_shown

    docname = app.env.docname
    os.environ.pop(RECORDS_VARIABLE, None)
    os.environ.pop(SOURCE_VARIABLE, None)
    path = records_path(app.doctreedir, docname)
    records, shown = read_collected(path), read_shown(path)
    path.unlink(missing_ok=True)
    execution = _execution(app.env, docname)
    if records or execution:
        # Shown: displayed by a cell whose output the page keeps (not a remove-output or remove-cell one).
        visible, in_exercises = _cells_shown(doctree), _cells_shown(doctree, EXERCISES_SECTION)
        _chapters(app.env)[docname] = {"records": records, "executed": len(records),
                                       "shown": {key for key, cells in shown.items() if cells & visible},
                                       "in_exercises": {key for key, cells in shown.items() if cells & in_exercises},
                                       "execution": execution or "not executed"}


def _problems(records: list[dict], title: str) -> list[str]:
    """A warning for each unexpected failure or unexpected pass, worded as `python -m checks` words it."""
    from . import ledger
    from ..teaching.records import PROBLEMS

    return ["\n".join(ledger.describe_problem(record, status, f"chapter {title!r}"))
            for record in records if (status := ledger.status_of(record)) in PROBLEMS]


# The closing section of every chapter (CONTRIBUTING.md): its solutions' checks are counted apart on the
# ledger's page, since a chapter's own sentences count the checks of its text.
EXERCISES_SECTION = "exercises"


def _cells_shown(doctree: nodes.document, section: str | None = None) -> set[int]:
    """The execution counts of the code cells whose outputs the page shows (myst-nb's cell containers with an
    output container); with section, only those inside the section of that id."""
    return {node["exec_count"] for node in doctree.findall(nodes.container)
            if node.get("nb_element") == "cell_code" and isinstance(node.get("exec_count"), int)
            and any(child.get("nb_element") == "cell_code_output" for child in node.children
                    if isinstance(child, nodes.Element))
            and (section is None or _inside(node, section))}


def _inside(node: nodes.Node, section: str) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.section) and section in parent.get("ids", ()):
            return True
        parent = parent.parent
    return False


def _execution(env: BuildEnvironment, docname: str) -> str:
    """How myst-nb executed the chapter ("" for a page without code): method, and the error if it failed."""
    try:
        from myst_nb.sphinx_ import NbMetadataCollector
    except ImportError:
        return ""
    data = NbMetadataCollector.get_exec_data(env, docname)
    if not data:
        return ""
    return f"{data['method']}: " + ("succeeded" if data["succeeded"] else f"failed ({data['error']})")


def _warn_problems(app: Sphinx, env: BuildEnvironment) -> None:
    """One warning per unexpected failure or unexpected pass, every build (read again or not).

    Each chapter's warnings are worded once, when it was read or the package's code changed, and kept in
    the environment: a build that reads nothing again need not import the ledger (and torch) to repeat them.
    """
    chapters = _chapters(env)
    code = app.config.checks_package_source
    reworded = getattr(env, "checks_problems_code", None) != code
    for docname in _book_order(env):
        chapter = chapters.get(docname)
        if chapter is None:
            continue
        if reworded or "problems" not in chapter:
            chapter["problems"] = _problems(chapter["records"], env.titles[docname].astext())
        for problem in chapter["problems"]:
            logger.warning(problem, location=docname, type="checks", subtype="problem")
    env.checks_problems_code = code


def _remove_outputs(app: Sphinx, docname: str) -> None:
    """What an earlier build wrote for a page this one does not build: its HTML, the copies of its source,
    its notebooks and its execution report."""
    outdir = Path(app.outdir)
    stale = [Path(app.builder.get_outfilename(docname)), outdir / "reports" / f"{docname}.err.log"]
    for folder in (outdir / "_sources", outdir.parent / "jupyter_execute", outdir.parent / "notebooks"):
        target = folder / docname
        stale += target.parent.glob(f"{target.name}.*") if target.parent.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)


def _left_out_pages(app: Sphinx) -> None:
    """Warn of each file the toc leaves out, and remove what an earlier build made of it, in any build (a
    fresh environment knows no earlier pages)."""
    toc = os.path.relpath(app.config.external_toc_path, app.srcdir) if app.checks_left_out else ""
    for source in app.checks_left_out:
        # Not a document of this build, so the warning names the file itself rather than a location.
        logger.warning(f"{Path(app.srcdir, source)} is not in {toc}, so it is not built and none of its checks "
                       f"run: add '- file: {posixpath.splitext(source)[0]}' to {toc} (and a line to the "
                       f"introduction's list of chapters), or start its name with '_' if it is a template",
                       type="checks", subtype="toc")
        if isinstance(app.builder, StandaloneHTMLBuilder):
            _remove_outputs(app, posixpath.splitext(source)[0])


def _remove_stale_pages(app: Sphinx, env: BuildEnvironment, added: Set[str], changed: Set[str],
                        removed: Set[str]) -> Iterable[str]:
    """A page the last build made and this one does not (dropped from the toc, or deleted)."""
    if isinstance(app.builder, StandaloneHTMLBuilder):
        for docname in removed:
            _remove_outputs(app, docname)
    return []


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _chapters(env).pop(docname, None)
    _ledger_pages(env).discard(docname)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: Set[str], other: BuildEnvironment) -> None:
    for docname in docnames:
        if docname in _chapters(other):
            _chapters(env)[docname] = _chapters(other)[docname]
        if docname in _ledger_pages(other):
            _ledger_pages(env).add(docname)


def _reread_ledger(app: Sphinx, env: BuildEnvironment, added: Set[str], changed: Set[str],
                   removed: Set[str]) -> Iterable[str]:
    """The ledger page is read again when any chapter is, or when what the ledger is made from differs from
    what the last finished build made it from (a build interrupted after reading, say)."""
    stale = added or changed or removed or _ledger_source(app) != getattr(app, "checks_previous_source", None)
    return sorted(_ledger_pages(env)) if stale else []


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


def entries(app: Sphinx) -> list[dict]:
    """Every record of the build as a ledger entry, in book order."""
    from . import ledger
    from ..teaching.records import Record

    chapters = _chapters(app.env)
    return [
        ledger.entry(Record.from_dict(record), chapter=app.env.titles[docname].astext(),
                     page=app.builder.get_target_uri(docname), shown=record["id"] in chapters[docname]["shown"],
                     exercise=record["id"] in chapters[docname].get("in_exercises", ()))
        for docname in _book_order(app.env) if docname in chapters
        for record in chapters[docname]["records"]
    ]


def _stamp(app: Sphinx) -> dict:
    """What the ledger was built from: the fingerprint's parts and each executed chapter's source.

    sources is the source folder relative to the ledger's, so only it differs between two builds of the
    same sources into different folders; each chapter's source is relative to that folder.
    """
    chapters = _chapters(app.env)
    return {
        "finished": True,
        "fingerprint": app.checks_fingerprint,
        "sources": Path(os.path.relpath(app.srcdir, app.outdir)).as_posix(),
        "left_out": getattr(app, "checks_left_out", []),
        "chapters": [
            {"chapter": app.env.titles[docname].astext(), "page": app.builder.get_target_uri(docname),
             "source": Path(app.env.doc2path(docname)).relative_to(app.srcdir).as_posix(),
             "source_sha256": hashlib.sha256(Path(app.env.doc2path(docname)).read_bytes()).hexdigest(),
             "executed": chapters[docname]["executed"], "execution": chapters[docname]["execution"]}
            for docname in _book_order(app.env) if docname in chapters
        ],
    }


def _ledger_source(app: Sphinx) -> str:
    """A hash of what ledger.json and the ledger page are made from, computed without importing them: each
    chapter's records as collected, title and page, the stamp, and the package's code (which turns them into
    entries)."""
    chapters = _chapters(app.env)
    return build_fingerprint.digest({
        "chapters": [{**chapters[docname], "shown": sorted(chapters[docname]["shown"]),
                      "in_exercises": sorted(chapters[docname].get("in_exercises", ())),
                      "title": app.env.titles[docname].astext(), "page": app.builder.get_target_uri(docname)}
                     for docname in _book_order(app.env) if docname in chapters],
        "stamp": _stamp(app),
        "code": app.config.checks_package_source,
    })


def _place_ledger(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    placeholders = list(doctree.findall(ledger_placeholder))
    if not placeholders:
        return
    from . import ledger

    here = posixpath.dirname(app.builder.get_target_uri(docname))
    target = {app.builder.get_target_uri(name): name for name in app.env.all_docs}

    def link(item: dict) -> str:
        uri = app.builder.get_relative_uri(docname, target[item["page"]])
        return f"{uri}#{item['anchor']}" if item["anchor"] else uri

    table = ledger.ledger_html(entries(app), link=link, json_href=posixpath.relpath(LEDGER_JSON, here or "."),
                               table_library=posixpath.relpath(f"_static/{TABLE_LIBRARY}", here or "."))
    for placeholder in placeholders:
        placeholder.replace_self(nodes.raw("", table, format="html"))


def _write_json(app: Sphinx, exception: Exception | None) -> None:
    """ledger.json, written again only when what it is made from changed since the last finished build."""
    if exception is not None or app.builder.format != "html":
        return
    path, kept = Path(app.outdir) / LEDGER_JSON, Path(app.doctreedir) / KEPT_LEDGER
    source = _ledger_source(app)
    if source == app.checks_previous_source:
        os.replace(kept, path)
        return
    from . import ledger

    ledger.write(path, entries(app), _stamp(app))
    kept.unlink(missing_ok=True)
    (Path(app.doctreedir) / KEPT_LEDGER_SOURCE).write_text(source, encoding="utf-8")


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
    app.add_config_value("checks_package_source", "", "html")
    app.connect("config-inited", _set_fingerprint)
    # sphinx-external-toc adds the files its toc leaves out to exclude_patterns at priority 900.
    app.connect("config-inited", _own_excludes, priority=850)
    app.connect("config-inited", _left_out, priority=950)
    app.connect("builder-inited", _add_static)
    app.add_css_file("checks.css")
    app.add_node(ledger_placeholder)
    app.add_directive("checks-ledger", LedgerDirective)
    app.connect("builder-inited", _start_build)
    app.connect("builder-inited", _left_out_pages)
    app.connect("source-read", _before_execution)
    app.setup_extension("checks.sphinx.parallel")  # executes the chapters; each kernel gets its record file
    app.connect(parallel.ENVIRONMENT_EVENT, kernel_environment)
    app.connect("doctree-read", _collect)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _reread_ledger)
    app.connect("env-get-outdated", _remove_stale_pages)
    app.connect("env-updated", _warn_problems)
    app.connect("doctree-resolved", _place_ledger)
    app.connect("build-finished", _write_json)
    app.connect("build-finished", _refresh_static)
    app.connect("build-finished", _copy_table_library)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 5}
