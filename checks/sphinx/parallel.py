"""Sphinx extension: execute the chapters a build is about to read several at a time.

myst-nb executes a chapter while Sphinx reads it, one chapter after another, while the other cores idle.
When Sphinx has decided which documents to read (env-before-read-docs), this extension reads each notebook
among them the way myst-nb will, starts them all on a pool of kernels (CHECKS_BUILD_PROCESSES at a time,
by default one per core; the slowest chapter of the last build first, else the largest) and lets Sphinx
read on: pages without code first, then each chapter once its kernel is done. myst-nb is handed the
executed notebook instead of executing it again; what it does with outputs (glue, rendering, the ledger,
execute.raise_on_error) is unchanged.

A kernel runs as myst-nb would run it: in the chapter's folder, with the build's environment plus the
variables that handlers of the ``checks-kernel-environment`` event return for that chapter, and under the
configured timeout. A chapter whose code raises leaves its traceback in ``<outdir>/reports/<chapter>.err.log``
and fails the build when Sphinx reaches it. A chapter whose text changed after it was executed, or whose
execution myst-nb configures per notebook, is executed by myst-nb itself: a page never shows the outputs
of other code.
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import myst_nb.sphinx_
import zmq
from myst_nb.core.execute import ExecutionError, NotebookClientBase
from myst_nb.core.read import create_nb_reader
from myst_nb.sphinx_ import NbMetadataCollector
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from nbformat import NotebookNode
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ConfigError
from traitlets.config import Config

PROCESSES_VARIABLE = "CHECKS_BUILD_PROCESSES"
ENVIRONMENT_EVENT = "checks-kernel-environment"
# Errors of the chapter's own code (as myst-nb distinguishes them); anything else is a broken kernel.
CELL_ERRORS = (CellExecutionError, CellTimeoutError)
# The kernel manager gives each kernel CurveZMQ keys where its kernelspec declares it supports them
# (ipykernel's does): its messages are encrypted, and ipykernel no longer warns, once per kernel, that it
# runs "over TCP without encryption". A libzmq built without CurveZMQ keeps the default.
KERNEL_CONFIG = Config({"KernelManager": {"transport_encryption": "auto"}} if zmq.has("curve") else {})


def processes() -> int:
    """How many kernels run at once: CHECKS_BUILD_PROCESSES, else the cores this process may use."""
    raw = os.environ.get(PROCESSES_VARIABLE, "").strip()
    if not raw:  # sched_getaffinity (Linux) counts the cores this process may use; cpu_count all of them
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{PROCESSES_VARIABLE}={raw!r}: expected a whole number of kernels, at least 1")
    return int(raw)


@dataclass(frozen=True)
class Job:
    """One chapter to execute: the notebook as myst-nb reads it, where and how its kernel runs."""

    docname: str
    source: Path
    notebook: NotebookNode
    cwd: Path
    env: Mapping[str, str]
    timeout: int | None
    allow_errors: bool
    report: Path


@dataclass(frozen=True)
class Executed:
    """A chapter's notebook after execution, with the error that stopped it, if one did."""

    notebook: NotebookNode
    seconds: float
    error: BaseException | None = None
    traceback: str | None = None


async def execute(job: Job) -> Executed:
    """Run one chapter in a kernel of its own; an error of its code is returned, not raised."""
    notebook = copy.deepcopy(job.notebook)
    client = NotebookClient(notebook, timeout=job.timeout, allow_errors=job.allow_errors, record_timing=False,
                            resources={"metadata": {"path": str(job.cwd)}}, config=KERNEL_CONFIG)
    start = time.perf_counter()
    try:
        await client.async_execute(env=dict(job.env))
    except Exception as error:  # reported where Sphinx reads the chapter, as myst-nb would report it
        executed = Executed(notebook, time.perf_counter() - start, error, traceback.format_exc())
        job.report.parent.mkdir(parents=True, exist_ok=True)
        job.report.write_text(executed.traceback, encoding="utf-8")
        return executed
    return Executed(notebook, time.perf_counter() - start)


class Executions:
    """Jobs running on a background event loop, at most `processes` kernels at a time, in the given order."""

    def __init__(self, jobs: Sequence[Job], processes: int) -> None:
        self.processes = processes
        self._jobs = {job.source: job for job in jobs}
        self._futures: dict[Path, Future[Executed]] = {job.source: Future() for job in jobs}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Future[Any] | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(jobs),), name="checks-parallel",
                                        daemon=True)
        self._thread.start()
        self._started.wait()

    async def _run(self, jobs: Sequence[Job]) -> None:
        slots = asyncio.Semaphore(self.processes)  # wakes waiters first come, first served: the order holds

        async def run(job: Job) -> None:
            future = self._futures[job.source]
            try:
                async with slots:
                    future.set_result(await execute(job))
            except BaseException as error:  # cancelled when the build stops; a reader waiting on it re-raises
                future.set_exception(error)
                raise

        self._loop = asyncio.get_running_loop()
        self._main = asyncio.gather(*(run(job) for job in jobs), return_exceptions=True)
        self._started.set()
        await self._main

    def take(self, source: Path) -> tuple[Job, Executed] | None:
        """Wait for the chapter read from `source`; None if it is not one of these jobs (or was taken)."""
        future = self._futures.pop(source, None)
        return None if future is None else (self._jobs[source], future.result())

    def stop(self) -> None:
        """Cancel what still runs (its kernels shut down) and wait for the loop to end."""
        if self._loop is not None and self._main is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._main.cancel)
            except RuntimeError:  # the loop closed in between: nothing is left to cancel
                pass
        self._thread.join()


_running: Executions | None = None


def _job(app: Sphinx, env: BuildEnvironment, docname: str) -> Job | None:
    """The chapter's notebook as myst-nb will read it, or None where myst-nb must execute it itself."""
    config = env.mystnb_config
    source = Path(env.doc2path(docname)).resolve()
    text = source.read_text(encoding=app.config.source_encoding)
    reader = create_nb_reader(str(source), env.myst_config, config, text)
    if reader is None:  # a page without code
        return None
    notebook = reader.read(text)
    excluded = any(PurePosixPath(source.as_posix()).match(pattern) for pattern in config.execution_excludepatterns)
    # Per-notebook settings and kernel aliases change how myst-nb executes; it keeps those chapters.
    if excluded or config.metadata_key in notebook.metadata or config.kernel_rgx_aliases \
            or config.execution_in_temp:
        return None
    if config.execution_mode == "auto" and all(cell.get("outputs") for cell in notebook.cells
                                               if cell.cell_type == "code"):
        return None
    timeout, allow_errors = config.execution_timeout, config.execution_allow_errors
    overrides = notebook.metadata.get("execution", {})  # jupyter-cache lets the notebook override these two
    timeout, allow_errors = overrides.get("timeout", timeout), overrides.get("allow_errors", allow_errors)
    variables = dict(os.environ)
    for extra in app.emit(ENVIRONMENT_EVENT, docname):
        variables.update(extra or {})
    report = Path(app.outdir, "reports", *f"{docname}.err.log".split("/"))
    return Job(docname, source, notebook, source.parent, variables, timeout, allow_errors, report)


def _expected_seconds(env: BuildEnvironment, job: Job) -> tuple[float, int]:
    """Last build's execution time (unknown counts as longest), then size: the longest job starts first."""
    previous = NbMetadataCollector.get_doc_data(env).get(job.docname, {}).get("exec_data") or {}
    return previous.get("runtime") or float("inf"), job.source.stat().st_size


def _start(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    """Start executing every notebook to be read; read pages without code first, then in starting order."""
    global _running
    # sphinx-build -j forks readers, which would not see this process's kernels: myst-nb executes there.
    if app.parallel > 1 or env.mystnb_config.execution_mode not in ("force", "auto"):
        return
    count = processes()
    jobs = [job for job in (_job(app, env, docname) for docname in docnames) if job is not None]
    if not jobs:
        return
    jobs.sort(key=lambda job: _expected_seconds(env, job), reverse=True)
    executed = {job.docname for job in jobs}
    docnames[:] = [name for name in docnames if name not in executed] + [job.docname for job in jobs]
    _running = Executions(jobs, count)


def _stop(app: Sphinx, exception: Exception | None) -> None:
    global _running
    if _running is not None:
        _running.stop()
        _running = None


class PreExecuted(NotebookClientBase):
    """myst-nb's client for a notebook this extension executed: outputs are copied in, errors raised."""

    def start_client(self) -> None:
        job: Job = self._kwargs["job"]
        executed: Executed = self._kwargs["executed"]
        for cell, done in zip(self.notebook.cells, executed.notebook.cells):
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = done.outputs, done.execution_count
        self.notebook.metadata.update(executed.notebook.metadata)  # language_info, as the kernel reported it
        if executed.error is not None:
            if self.nb_config.execution_raise_on_error or not isinstance(executed.error, CELL_ERRORS):
                raise ExecutionError(f"{self.path} (traceback in {job.report})") from executed.error
            message = f"Executing notebook failed: {executed.error.__class__.__name__}"
            if self.nb_config.execution_show_tb:
                message += f"\n{executed.traceback}"
            self.logger.warning(message, subtype="exec")
        else:
            self.logger.info(f"Executed notebook in {executed.seconds:.2f} seconds "
                             f"({_running.processes if _running else 1} at a time)")
        self.exec_metadata = {
            "mtime": datetime.now().timestamp(),
            "runtime": executed.seconds,
            "method": self.nb_config.execution_mode,
            "succeeded": executed.error is None,
            "error": executed.error.__class__.__name__ if executed.error else None,
            "traceback": executed.traceback,
        }


def _same_text(a: NotebookNode, b: NotebookNode) -> bool:
    return [(cell.cell_type, cell.source) for cell in a.cells] == [(cell.cell_type, cell.source) for cell in b.cells]


_myst_create_client = myst_nb.sphinx_.create_client


def _create_client(notebook: NotebookNode, source: str, nb_config: Any, logger: Any,
                   read_fmt: dict | None = None) -> NotebookClientBase:
    """myst-nb's create_client, answering from the executed chapters where the text is unchanged."""
    taken = _running.take(Path(source).resolve()) if _running is not None else None
    if taken is None or not _same_text(taken[1].notebook, notebook):
        return _myst_create_client(notebook, source, nb_config, logger, read_fmt)
    job, executed = taken
    return PreExecuted(notebook, Path(source), nb_config, logger, job=job, executed=executed)


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    app.add_event(ENVIRONMENT_EVENT)
    # myst-nb (pinned, 1.4) has no hook for outputs executed elsewhere; its Sphinx parser calls this name.
    myst_nb.sphinx_.create_client = _create_client
    app.connect("env-before-read-docs", _start)
    app.connect("build-finished", _stop)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
