"""Each published notebook as a learner meets it: opened in JupyterLab (from PyPI, requirements.txt), "Run All
Cells" from the Run menu, and read from the screen in chromium once the kernel is idle.

What is measured, per notebook: it opens unchanged (JupyterLab marks nothing to save); Run All runs every cell
without an error; each exercise is followed by a cell to work in, in view and editable, and no solution's
output (a check's verdict or failure record) shows within the exercise; the solutions come after every
exercise; the environment line (where the text's numbers came from) is under the title; every failure record
shows each label beside its value; every verdict, in a table or a check's printed line, carries its mark
(✓/✗) and a colour of its own; a record's summary breaks lines at spaces only. One JupyterLab server serves
every notebook, two run at a time (each in a browser context and workspace of its own, with its own kernel,
shut down when it is done); the server is bound to 127.0.0.1 on a free port, with a token, and stopped at the
end. Screenshots of two notebooks at 1280 px go to _build/screenshots/jupyterlab-*.png.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from checks.sphinx.notebooks import WORK_TAG
from ..toc import ROOT, toc_chapters

# Without Playwright the browser fixture skips (tests/chromium.py); these names are needed before it runs.
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's Python package is not installed")
PlaywrightError, PlaywrightTimeout = sync_api.Error, sync_api.TimeoutError

pytestmark = [pytest.mark.browser, pytest.mark.kernels]  # kernels: it waits for the session's book build

CHAPTERS = toc_chapters()
VIEWPORT = {"width": 1280, "height": 900}
AT_ONCE = 2  # notebooks running at a time (a 2-core CI runner)
RUN_TIMEOUT_S = 900  # one notebook's Run All
SCREENSHOTS = ("book/small-function", "book/check-your-own-code")
ENVIRONMENT_LINE = "Numbers on this page were computed when the book was built"
# JupyterLab's settings for the test: every cell in the page (JupyterLab 4 otherwise leaves cells far out of
# view out of the DOM until scrolled to), and no news or update check (offline).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}


@dataclass
class Lab:
    url: str
    token: str
    root: Path

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(f"{self.url}api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernel(self, notebook: str) -> None:
        """The notebook's session ended, its kernel with it (a notebook opened again starts afresh)."""
        for session in self.api("GET", "sessions"):
            if session["path"] == notebook:
                self.api("DELETE", f"sessions/{session['id']}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lab(book_html: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab server over a folder holding each published notebook in a folder of its own (a notebook
    writes the files its chapter reads beside itself)."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is installed from requirements.txt")
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "notebooks"
    for chapter in CHAPTERS:
        name = chapter.split("/")[-1]
        (root / name).mkdir(parents=True)
        shutil.copy2(book_html / "_sources" / f"{chapter}.ipynb", root / name / f"{name}.ipynb")
    for name, settings in LAB_SETTINGS.items():
        (base / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (base / "settings" / name).write_text(json.dumps(settings), encoding="utf-8")
    token, port = os.urandom(16).hex(), _free_port()
    # The kernels import `checks` from this checkout, whatever else is installed (as the book's build does,
    # tests/conftest.py): the notebooks run the code under test.
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_DATA_DIR": str(base / "data"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime"), "PYTHONPATH": str(ROOT)}
    with open(base / "server.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={base / 'settings'}",
             f"--LabApp.workspaces_dir={base / 'workspaces'}", "--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=base, start_new_session=True)
    started = Lab(f"http://127.0.0.1:{port}/", token, root)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                started.api("GET", "status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(base / 'server.log').read_text(errors='replace')[-3000:]}")
                time.sleep(0.5)
        yield started
    finally:
        try:  # the server's own shutdown, which stops its kernels too
            started.api("POST", "shutdown")
            server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


# Read from the open notebook, in page coordinates of its scrolling panel.
MEASURE_JS = r"""() => {
    const panel = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden)");
    const scroller = panel.querySelector(".jp-WindowedPanel-outer") || panel;
    const top = element => element.getBoundingClientRect().top + scroller.scrollTop;
    const shown = element => { const r = element.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
    // A check printed as a line of text (checks.expect without checks.each_cell, whose table the book shows):
    // "✓ pass  label: expected 6, observed 6 (float32, cpu)"; its verdict's colour is that of the element
    // holding the verdict's word, the text's colour that of the output's <pre>.
    const printed = cell => [...cell.querySelectorAll(".jp-OutputArea-output pre")].flatMap(pre => {
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const nodes = [];  // each text node, with where it starts in the output's text
        let length = 0;
        for (let node = walker.nextNode(); node; node = walker.nextNode()) { nodes.push([node, length]); length += node.data.length; }
        const text = nodes.map(([node]) => node.data).join("");
        const colourAt = index => {
            const [node] = nodes.find(([node, start]) => start <= index && index < start + node.data.length);
            return getComputedStyle(node.parentElement).color;
        };
        return [...text.matchAll(/^(?:\S )?(pass|fail|inconclusive)\b.*: expected .*, observed .*$/gm)].map(found => ({
            text: found[0].split("  ")[0], colour: colourAt(found.index + found[0].indexOf(found[1])),
            textColour: getComputedStyle(pre).color}));
    });
    const cells = [...panel.querySelectorAll(".jp-Cell")].map(cell => {
        const input = cell.querySelector(".jp-Cell-inputWrapper");
        const editor = cell.querySelector(".jp-InputArea-editor");
        const output = cell.querySelector(".jp-OutputArea");
        return {
            code: cell.classList.contains("jp-CodeCell"),
            top: top(cell), bottom: top(cell) + cell.getBoundingClientRect().height,
            text: (cell.querySelector(".jp-RenderedMarkdown") || {}).innerText || "",
            editable: !!editor && shown(editor) && !!cell.querySelector(".cm-content[contenteditable=true]"),
            outputText: output ? output.innerText : "",
            verdicts: [...[...cell.querySelectorAll("td.checks-verdict")].map(td => {
                const other = td.parentElement.querySelector("td:not(.checks-verdict)");
                return {text: td.innerText.trim(), colour: getComputedStyle(td).color,
                        textColour: other ? getComputedStyle(other).color : ""};
            }), ...printed(cell)],
            failures: cell.querySelectorAll("div.checks-failure").length,
        };
    });
    // Each failure record's label beside its value: on the same line, the value to the label's right, in view.
    const records = [];
    for (const list of panel.querySelectorAll("div.checks-failure dl")) {
        const box = list.closest(".jp-OutputArea-output").getBoundingClientRect();
        for (const label of list.querySelectorAll(":scope > dt")) {
            const value = label.nextElementSibling;
            const l = label.getBoundingClientRect(), v = value.getBoundingClientRect();
            records.push({label: label.innerText, beside: Math.abs(l.top - v.top) <= 2 && v.left >= l.right - 1,
                          oneLine: l.height <= 1.6 * parseFloat(getComputedStyle(label).lineHeight || 20),
                          inView: v.right <= box.right + 1 && l.left >= box.left - 1});
        }
    }
    // Lines of a record's summary and of a failure record's text break at spaces, never inside a word.
    const broken = [];
    for (const pre of panel.querySelectorAll("pre.checks-summary, div.checks-failure pre")) {
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const chars = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode())
            for (let i = 0; i < node.data.length; i++) chars.push([node, i]);
        const range = document.createRange();
        let lineTop = null;
        chars.forEach(([node, i], k) => {
            if (node.data[i] === "\n") { lineTop = null; return; }
            range.setStart(node, i); range.setEnd(node, i + 1);
            const r = range.getBoundingClientRect();
            if (!r.height) return;
            if (lineTop !== null && r.top > lineTop + 2) {
                const [before, at] = [chars[k - 1][0].data[chars[k - 1][1]], node.data[i]];
                if (/\S/.test(before) && /\S/.test(at)) broken.push(pre.textContent.slice(Math.max(0, k - 12), k + 12));
            }
            lineTop = r.top;
        });
    }
    return {cells, records, broken,
            dirty: !!document.querySelector(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")};
}"""


@dataclass
class Ran:
    """One notebook after Run All: what the screen showed, the notebook saved afterwards, how long it took."""

    chapter: str
    opened_dirty: bool = False
    seconds: float = 0.0
    screen: dict = field(default_factory=dict)
    saved: nbformat.NotebookNode | None = None
    problem: str = ""


def _status(page) -> str:
    return page.evaluate("""() => {
        const indicator = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator");
        return indicator ? indicator.dataset.status || "" : "";
    }""")


def _queued(page) -> int:
    return page.evaluate("""() => [...document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt")]
        .filter(prompt => prompt.textContent.includes("*")).length""")


class Running:
    """A notebook open in a browser context of its own: opened, then Run All, then read."""

    def __init__(self, browser, lab: Lab, chapter: str, workspace: int, shots: Path) -> None:
        self.lab, self.ran = lab, Ran(chapter)
        self.name = chapter.split("/")[-1]
        self.path = f"{self.name}/{self.name}.ipynb"
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        try:
            self.run_all(workspace)
        except (PlaywrightError, RuntimeError):
            shots.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(shots / f"jupyterlab-{self.name}-not-run.png"))
            self.context.close()
            self.lab.shut_down_kernel(self.path)
            raise

    def run_all(self, workspace: int) -> None:
        lab = self.lab
        self.page.goto(f"{lab.url}lab/workspaces/w{workspace}/tree/{self.path}?token={lab.token}&reset",
                       timeout=300_000)
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=300_000)  # JupyterLab's first load, on a busy machine
        self.page.wait_for_function("""() => { const i = document.querySelector(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator"); return i && i.dataset.status === "idle"; }""",
                                    timeout=120_000)
        time.sleep(3)  # JupyterLab writes what it adds to a notebook's metadata once the kernel has said who it is
        self.ran.opened_dirty = self.page.evaluate(
            "() => !!document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')")
        self.started = time.monotonic()
        prompts = """() => [...document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt")]
                     .map(prompt => prompt.textContent).join("|")"""
        before = self.page.evaluate(prompts)
        # Started: a cell queued or running ([*]), the kernel busy, or the prompts renumbered (a notebook whose
        # cells all ran between two looks).
        started = f"""() => {{ const now = ({prompts})();
            const indicator = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator");
            return now.includes("*") || (indicator && indicator.dataset.status === "busy") || now !== {json.dumps(before)}; }}"""
        for _ in range(5):  # on a busy machine the menu can open before the notebook has the focus it acts on
            # A dialog JupyterLab opened (a kernel message, a notification's prompt) takes the clicks: close it.
            if self.page.locator(".jp-Dialog").count():
                self.page.keyboard.press("Escape")
            self.page.click(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell .jp-InputPrompt >> nth=0")
            self.page.click(".lm-MenuBar-itemLabel:text-is('Run')")
            self.page.click(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel:text-is('Run All Cells')")
            try:
                self.page.wait_for_function(started, timeout=30_000)
                return
            except PlaywrightTimeout:
                self.page.keyboard.press("Escape")
        raise RuntimeError("Run All Cells started nothing (five tries)")

    def done(self) -> bool:
        if time.monotonic() - self.started > RUN_TIMEOUT_S:
            self.ran.problem = f"Run All did not finish in {RUN_TIMEOUT_S} s"
            return True
        return _queued(self.page) == 0 and _status(self.page) == "idle"

    def read(self, shots: Path) -> Ran:
        self.ran.seconds = time.monotonic() - self.started
        self.ran.screen = self.page.evaluate(MEASURE_JS)
        if self.ran.chapter in SCREENSHOTS:
            self.screenshots(shots)
        # Saved as a learner saves it, to read what ran (every cell, in order, without an error).
        self.page.keyboard.press("Control+s")
        self.page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                                    timeout=60_000)
        self.ran.saved = nbformat.read(self.lab.root / self.path, as_version=4)
        self.lab.shut_down_kernel(self.path)
        self.context.close()
        return self.ran

    def screenshots(self, shots: Path) -> None:
        """The first exercise with its work cell, and the first failure record, each scrolled into view."""
        shots.mkdir(parents=True, exist_ok=True)
        for what, find in (("exercise", """() => [...document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell")]
                                .find(cell => /^Exercise \\d/.test((cell.querySelector("blockquote") || {}).innerText || ""))"""),
                           ("failure", """() => document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) div.checks-failure")""")):
            if self.page.evaluate(f"() => {{ const found = ({find})(); if (found) found.scrollIntoView({{block: 'start'}}); return !!found; }}"):
                time.sleep(0.5)
                self.page.screenshot(path=str(shots / f"jupyterlab-{self.name}-{what}-1280.png"))


@pytest.fixture(scope="module")
def ran_all(browser, lab: Lab, book_html: Path) -> dict[str, Ran]:
    """Every notebook opened and run, AT_ONCE at a time; the whole takes minutes (printed)."""
    shots = book_html.parent / "screenshots"
    waiting, running, finished = list(CHAPTERS), [], {}
    began, opened, tried = time.monotonic(), 0, set()
    while waiting or running:
        while waiting and len(running) < AT_ONCE:
            chapter = waiting.pop(0)
            opened += 1
            try:
                running.append(Running(browser, lab, chapter, opened, shots))
            except (PlaywrightError, RuntimeError) as error:
                # Opened again once, in a fresh tab, as a learner would click again; then its tests fail, the
                # others run.
                if chapter not in tried:
                    tried.add(chapter)
                    waiting.append(chapter)
                else:
                    finished[chapter] = Ran(chapter, problem=f"not run (twice): {str(error)[:500]}")
        time.sleep(1)
        for current in [current for current in running if current.done()]:
            running.remove(current)
            finished[current.ran.chapter] = current.read(shots)
    print(f"\nJupyterLab Run All of {len(finished)} notebooks: {time.monotonic() - began:.0f} s "
          + ", ".join(f"{Path(chapter).name} {ran.seconds:.0f} s" for chapter, ran in finished.items()))
    return finished


def _regions(saved: nbformat.NotebookNode) -> tuple[list[tuple[int, int]], int]:
    """Each exercise's cells, (first, end) by index (its box to the next box or heading), and the index of
    the Solutions heading."""
    cells = saved.cells
    boxes = [index for index, cell in enumerate(cells) if cell.cell_type == "markdown" and cell.source.startswith("> **Exercise")]
    headings = [index for index, cell in enumerate(cells) if cell.cell_type == "markdown" and cell.source.startswith("#")]
    solutions = next(index for index in headings if cells[index].source.startswith("## Solutions"))
    regions = [(box, min([later for later in [*boxes, *headings] if later > box], default=len(cells))) for box in boxes]
    return regions, solutions


@pytest.fixture
def ran(ran_all: dict[str, Ran], request: pytest.FixtureRequest) -> dict[str, Ran]:
    """Every notebook's run; the chapter a test is about, where it names one, must have run."""
    chapter = getattr(request.node, "callspec", None) and request.node.callspec.params.get("chapter")
    if chapter:
        assert not ran_all[chapter].problem, f"{chapter}: {ran_all[chapter].problem}"
    return ran_all


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_notebook_opens_unchanged_and_runs_all_cells_without_an_error(ran: dict[str, Ran], chapter: str) -> None:
    result = ran[chapter]
    assert not result.opened_dirty, f"{chapter}: JupyterLab opened the notebook as changed"
    code = [cell for cell in result.saved.cells if cell.cell_type == "code"]
    errors = [output.get("ename") for cell in code for output in cell.outputs if output.output_type == "error"]
    assert not errors, f"{chapter}: Run All met {errors}"
    # Run All on a fresh kernel: every code cell ran, once, in order.
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), chapter


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_exercise_has_a_cell_to_work_in_and_no_solution_beside_it(ran: dict[str, Ran], chapter: str) -> None:
    result = ran[chapter]
    screen, saved = result.screen["cells"], result.saved
    assert len(screen) == len(saved.cells), f"{chapter}: {len(screen)} cells on screen, {len(saved.cells)} saved"
    regions, solutions = _regions(saved)
    assert regions, f"{chapter}: no exercise on screen"
    for first, end in regions:
        title = saved.cells[first].source.split("\n", 1)[0]
        work = [index for index in range(first, end) if WORK_TAG in saved.cells[index].metadata.get("tags", [])]
        assert work, f"{chapter}: {title} has no cell to work in"
        for index in work:
            assert screen[index]["code"] and screen[index]["editable"], f"{chapter}: {title}'s work cell is not in view to edit"
            assert screen[index]["top"] >= screen[first]["top"]
        # What the screen shows within the exercise: no verdict and no failure record (a solution's output).
        for index in range(first, end):
            assert not screen[index]["verdicts"] and not screen[index]["failures"], \
                f"{chapter}: a check's outcome shows within {title}: {screen[index]['outputText'][:300]}"
        assert screen[end - 1]["bottom"] <= screen[solutions]["top"], f"{chapter}: {title} is below the solutions"
    # The solutions, all after the last exercise, ran: their checks are on the screen there.
    assert any(cell["verdicts"] for cell in screen[solutions:]), f"{chapter}: no solution's check shows"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_environment_line_stands_under_the_title(ran: dict[str, Ran], chapter: str) -> None:
    screen = ran[chapter].screen["cells"]
    first = next(cell for cell in screen if not cell["code"])
    lines = first["text"].splitlines()
    assert any(line.startswith(ENVIRONMENT_LINE) for line in lines[1:3]), f"{chapter}: under the title: {lines[:3]}"
    assert "your machine" in first["text"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_records_read_as_on_the_page(ran: dict[str, Ran], chapter: str) -> None:
    result = ran[chapter].screen
    apart = [record["label"] for record in result["records"] if not (record["beside"] and record["inView"] and record["oneLine"])]
    assert not apart, f"{chapter}: failure-record labels not beside their values: {apart}"
    for verdict in [verdict for cell in result["cells"] for verdict in cell["verdicts"]]:
        mark = verdict["text"][:1]
        assert mark in "✓✗○", f"{chapter}: a verdict without its mark: {verdict['text']!r}"
        if mark != "○":
            assert verdict["colour"] != verdict["textColour"], f"{chapter}: verdict {verdict['text']!r} in the text's colour"
    assert not result["broken"], f"{chapter}: lines broken inside a word: {result['broken'][:5]}"


def test_records_were_on_screen_to_measure(ran: dict[str, Ran]) -> None:
    """The book's check tables and failure records (a chapter of them, and exercises' demonstrations) reached
    the screen: the measures above read something."""
    labels = sum(len(result.screen.get("records", [])) for result in ran.values())
    verdicts = sum(len(cell["verdicts"]) for result in ran.values() for cell in result.screen.get("cells", []))
    assert labels > 20 and verdicts > 100, f"measured {labels} failure-record labels and {verdicts} verdicts"


def test_the_pytest_report_shows_once(ran: dict[str, Ran]) -> None:
    screen = ran["book/check-your-own-code"].screen["cells"]
    reports = [cell["outputText"] for cell in screen if "short test summary info" in cell["outputText"]]
    assert len(reports) == 1 and reports[0].count("short test summary info") == 1, reports


@pytest.mark.parametrize("chapter", ["book/how-good-is-a-check", "book/precision"])
def test_the_figures_are_drawn_by_the_notebooks_own_code(ran: dict[str, Ran], chapter: str) -> None:
    saved = ran[chapter].saved
    drawn = [cell for cell in saved.cells if cell.cell_type == "code"
             and any("image/png" in output.get("data", {}) for output in cell.outputs)]
    assert drawn, f"{chapter}: no cell drew a figure on Run All"
    attached = [cell for cell in saved.cells if cell.cell_type == "markdown" and re.search(r"!\[[^]]*\]\(attachment:", cell.source)]
    assert not attached, f"{chapter}: a figure is a picture in the text, not drawn by a cell"
