"""Sphinx extension: every chapter as a notebook that reads and runs like its page, for the download menu,
Colab and Binder.

The notebook is written from the page's resolved doctree (what the HTML is written from), not from the
MyST source: glued values are the text the page shows, the page's environment line (where its numbers
came from) stands under the title, exercises are block quotes each followed by a cell to work in (with
the exercise's starter code, where it gives some), solutions are gathered in a last section of their own,
"Solutions", after every exercise (JupyterLab shows a cell's output again when it runs, so a solution
beside its exercise, even folded, would be shown by "Run All"), literal includes are
`%%writefile` cells (so the notebook writes the files its chapter reads, and runs alone in an empty
folder), admonitions are block quotes, cross-references are links to the published pages, math stays
`$...$` / `$$...$$`, and cells the page removes (`remove-cell`) are left out. Code cells are myst-nb's
executed cells, with their outputs (taken from `_build/jupyter_execute/<page>.ipynb` by the cell index
myst-nb keeps on each cell node). A first cell installs what the chapter imports where it is missing:
the package with its `notebook` extra (pandas, matplotlib), and pytest for a chapter whose code runs it;
torch's CPU build where torch is missing and no GPU is visible; where pip fails, it stops with one message
naming the command to run by hand.

Why not sphinx-tojupyter (QuantEcon's doctree-to-notebook builder, 0.6.0, maintained, Sphinx >= 7): tried
on this book's first chapter with Sphinx 7.4, myst-nb 1.4 and sphinx-exercise 1.2, it resolves glued
text, but every code cell came out as a Markdown code block (myst-nb names the language `ipython3`, not
its `python3`: no cell to run), with no outputs (its writer skips myst-nb's cell outputs and executes
notebooks itself, with dask), exercises as `## Exercise 1` headings and each solution unfolded under
`## Solution to Exercise 1`, its code shown. It also loads only after myst-nb (loaded first, it defines
myst-nb's `nb_mime_priority_overrides` and myst-nb refuses to start), is a builder of its own (`-b
jupyter`: a second Sphinx run, which here executes every chapter again and knows nothing of the HTML
build's download menu and launch buttons), and brings dask[distributed], nbconvert and nbdime into the
build. Configuring and patching around all of that is more than the writer below, which is the part this
book needs, run on the doctree the HTML build already has.

sphinx-book-theme copies each executed notebook into `_sources/` and offers it in the page's download
menu; this extension writes the reader's notebook there instead, and collects the notebooks into
`_build/notebooks/`, the folder the Pages workflow publishes to the repository's notebooks branch: Colab
and Binder open notebooks from GitHub, and the launch buttons point there (the theme would point them at
the `.md` source on the main branch, which Colab cannot open). The repository URL and branch come from
`_config.yml` (`repository:`), the one place a fork changes; the published site's URL (for
cross-references) is `checks_site_url`, else `html_baseurl`, else the repository's GitHub Pages address.
"""

from __future__ import annotations

import base64
import copy
import mimetypes
import posixpath
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nbformat
from docutils import nodes
from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict
from sphinx.application import Sphinx
from sphinx.errors import ConfigError
from sphinx.util import logging

logger = logging.getLogger(__name__)

# Where the notebooks are collected, beside _build/html; the Pages workflow publishes this folder.
NOTEBOOKS_FOLDER = "notebooks"
# The distribution pyproject.toml names (its import package is `checks`), and the extra that adds what
# the chapters' tables and figures need.
DISTRIBUTION = "gradient-checks"
EXTRA = "notebook"
# Modules the package with its extra brings; a notebook installs it where any of them is missing.
PACKAGE_MODULES = ("checks", "pandas", "matplotlib")
# Tools a chapter's code may run, installed (pip name = module name) only where the chapter uses them.
TOOLS = ("pytest",)
INSTALL_TAG = "checks-install"
# The cells a reader works an exercise in: the page's own (with blanks), its starter code, or a blank one.
WORK_TAG = "checks-exercise"
THEME_PRIORITY = 501  # sphinx-book-theme's launch and download buttons
# A cell the reader completes; the book does not run it, the notebook does (checks.witness then says
# what to fill in instead of raising), so the tag is dropped there.
BLANKS_TAG = "skip-execution"
HIDDEN_SOURCE_TAGS = {"hide-input", "hide-cell", "remove-input"}
HIDDEN_OUTPUT_TAGS = {"hide-output", "hide-cell"}
# A Markdown code block of these languages inside an exercise is its starter code: a cell the reader runs.
STARTER_LANGUAGES = {"python", "ipython3", "ipython"}
SOLUTIONS_TITLE = "Solutions"
SOLUTIONS_NOTE = ("Each exercise's solution, after all of them: try the exercise in its own cell first. "
                  "\"Run All\" runs these cells too, last, after your own.")
# myst-nb's own names for a code cell's language and its text outputs, as Markdown fences name them.
FENCE_LANGUAGES = {"ipython3": "python", "ipython": "python", "myst-ansi": "", "default": ""}


def install_requirement(repository_url: str, branch: str) -> str:
    """The pip requirement that installs this package, with the notebook extra, from the repository."""
    return f"{DISTRIBUTION}[{EXTRA}] @ git+{repository_url.rstrip('/')}@{branch}"


# torch's CPU build, for an environment without torch and without a visible GPU: pip's default torch wheel
# brings several GB of CUDA libraries.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install_cell(requirement: str, tools: Sequence[str] = (), folders: Sequence[str] = ()) -> nbformat.NotebookNode:
    """The notebook's first cell: installs what the chapter imports where it is missing (torch's CPU build
    first where torch is missing and no GPU is visible), and makes the folders its %%writefile cells write
    into. Where pip fails (offline, say), it stops "Run All" with one short message naming the command to run
    by hand: IPython shows an exception's `_render_traceback_()` instead of its traceback."""
    needed = {module: "PACKAGE" for module in PACKAGE_MODULES} | {tool: repr(tool) for tool in tools}
    source = [
        "# Outside the book (Colab, Binder, your own Jupyter): install what this chapter imports where it is missing.",
        "import importlib.util",
        "import shlex",
        "import shutil",
        "import subprocess",
        "import sys",
        *(["from pathlib import Path"] if folders else []),
        "",
        f'PACKAGE = "{requirement}"',
        "NEEDED = {" + ", ".join(f'"{module}": {value}' for module, value in needed.items()) + "}",
        "# Without a GPU, torch's CPU build: pip's default torch brings several GB of CUDA libraries.",
        f'TORCH_CPU = ["torch", "--index-url", "{TORCH_CPU_INDEX}"]',
        "",
        "",
        "class InstallFailed(Exception):",
        "    def _render_traceback_(self):  # what IPython shows instead of a traceback",
        "        return [str(self)]",
        "",
        "",
        "def install(arguments, what):",
        '    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-color", *arguments],',
        "                         capture_output=True, text=True)",
        "    if run.returncode != 0:  # pip's last error (git's, where it could not clone), then what to do",
        "        lines = [line.strip() for line in run.stderr.splitlines() if line.strip()] or [\"pip said nothing\"]",
        '        said = [line for line in lines if line.startswith(("ERROR", "fatal:"))][-1:] or lines[-1:]',
        '        raise InstallFailed(f"Could not install {what}: {said[0]}\\n"',
        '                            f"Run this by hand, then run this cell again:\\n    %pip install {shlex.join(arguments)}")',
        "    importlib.invalidate_caches()  # so that the next cells find what was just installed",
        "",
        "",
        'if importlib.util.find_spec("torch") is None and shutil.which("nvidia-smi") is None:',
        '    install(TORCH_CPU, "torch (its CPU build: no GPU is visible)")',
        "missing = sorted({requirement for module, requirement in NEEDED.items() if importlib.util.find_spec(module) is None})",
        "if missing:",
        '    install(missing, ", ".join(missing))',
    ]
    if folders:
        source += ["", f"for folder in {list(folders)!r}:  # where this notebook's %%writefile cells write the chapter's files",
                   "    Path(folder).mkdir(parents=True, exist_ok=True)"]
    cell = nbformat.v4.new_code_cell("\n".join(source))
    cell.metadata["tags"] = [INSTALL_TAG]
    return cell


def binder_requirements(requirement: str) -> str:
    """requirements.txt for Binder on the notebooks branch: the torch that built the book (CPU), then this package."""
    return (
        "# Binder's environment for the book's notebooks, written when the book was built.\n"
        "--extra-index-url https://download.pytorch.org/whl/cpu\n"
        f"torch=={version('torch').split('+')[0]}\n"
        f"{requirement}\n"
    )


# ---------------------------------------------------------------------------------------------------
# The doctree, written as notebook cells


@dataclass
class Page:
    """What the writer needs to know about the page beyond its doctree."""

    url: str  # the published page, for links to anchors and other pages
    site: str  # the published site's root, ending in /
    folder: Path  # the chapter's folder (literal includes below it become %%writefile cells)
    executed: nbformat.NotebookNode  # myst-nb's executed notebook: each code cell's source and outputs
    exercise_numbers: Mapping[str, str] = field(default_factory=dict)  # exercise id -> "1"
    images: Mapping[str, Path] = field(default_factory=dict)  # the HTML's image name -> its file
    environment: str = ""  # the line the page shows under its title (checks.sphinx.reader): where its numbers came from


@dataclass
class _Frame:
    """A block quote the cells inside it are written in: an exercise or an admonition."""

    title: str  # the first Markdown cell's title
    exercise: bool = False
    written: int = 0  # Markdown cells written inside it so far
    work: int = 0  # cells to work in written inside it so far (an exercise's)

    def wrap(self, text: str) -> str:
        if not self.written:
            text = f"**{self.title}**\n\n{text}"
        return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


class NotebookWriter:
    """Walks a resolved doctree and writes the cells a reader meets in Jupyter."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.cells: list[nbformat.NotebookNode] = []
        self.blocks: list[str] = []  # Markdown blocks of the cell being written
        self.attachments: dict[str, dict[str, str]] = {}
        self.frames: list[_Frame] = []
        self.solutions: list[nbformat.NotebookNode] = []  # the solutions' cells, written after everything else
        self.written_files: list[str] = []  # files the notebook writes (%%writefile), relative to its folder
        self.unknown: set[str] = set()  # node types written as their plain text, for the build log

    # Structure: cells, and the boxes they are written in

    def write(self, document: nodes.document) -> list[nbformat.NotebookNode]:
        self.walk(document, level=0)
        self.flush()
        if self.solutions:
            self.cells.append(nbformat.v4.new_markdown_cell(f"## {SOLUTIONS_TITLE}\n\n{SOLUTIONS_NOTE}"))
            self.cells += self.solutions
        return self.cells

    def flush(self) -> None:
        text = "\n\n".join(block for block in self.blocks if block.strip())
        self.blocks = []
        if not text:
            return
        for frame in reversed(self.frames):
            text = frame.wrap(text)
            frame.written += 1
        cell = nbformat.v4.new_markdown_cell(text)
        if self.attachments:
            cell.attachments = self.attachments
            self.attachments = {}
        self.cells.append(cell)

    def framed(self, node: nodes.Element, frame: _Frame, level: int) -> None:
        """The node's content in a box of its own; its title is the frame's."""
        self.flush()
        self.frames.append(frame)
        for child in node.children:
            if not isinstance(child, nodes.title):
                self.walk(child, level)
        self.flush()
        self.frames.pop()

    def exercise(self, node: nodes.Element, level: int) -> None:
        """The exercise as a block quote, then a cell to work in where the exercise has none of its own."""
        number = self.page.exercise_numbers.get((node.get("ids") or [""])[0], "")
        subtitle = self.inline_children(node.children[0]) if node.children else ""
        title = " ".join(part for part in (f"Exercise {number}".strip(), subtitle) if part)
        frame = _Frame(title, exercise=True)
        self.framed(node, frame, level)
        if not frame.work:
            self.cells.append(work_cell(f"# {title}: your answer. Write here the code the exercise asks for, and run it;\n"
                                        f'# its solution is in the last section, "{SOLUTIONS_TITLE}".'))

    def solution(self, node: nodes.Element, level: int) -> None:
        """The solution under its title in the last section: set aside, written after everything else."""
        self.flush()
        cells, frames = self.cells, self.frames
        self.cells, self.frames = [], []
        self.blocks.append(f"### {node.children[0].astext().strip() or 'Solution'}")
        for child in node.children[1:]:
            self.walk(child, level)
        self.flush()
        self.solutions += self.cells
        self.cells, self.frames = cells, frames

    def starter_cell(self, node: nodes.literal_block) -> None:
        """An exercise's code, shown in a Markdown block on the page: a cell the reader runs and works in."""
        self.flush()
        frame = next(frame for frame in reversed(self.frames) if frame.exercise)
        frame.work += 1
        self.cells.append(work_cell(f"# {frame.title}: its code. Run it, then write your answer below it.\n"
                                    f"{node.astext().rstrip()}"))

    def in_exercise(self) -> bool:
        return any(frame.exercise for frame in self.frames)

    def walk(self, node: nodes.Node, level: int) -> None:
        if isinstance(node, (nodes.document, nodes.section)):
            title = node.next_node(nodes.title) if isinstance(node, nodes.section) else None
            if title is not None and title.parent is node:
                self.blocks.append("#" * min(level + 1, 6) + " " + self.inline_children(title))
                if level == 0 and self.page.environment:
                    self.blocks.append(environment_note(self.page.environment))
            for child in node.children:
                if child is not title:
                    self.walk(child, level + 1 if isinstance(node, nodes.section) and title is not None else level)
        elif node.tagname in ("exercise_enumerable_node", "exercise_unenumerable_node"):
            self.exercise(node, level)
        elif node.tagname == "solution_node":
            self.solution(node, level)
        elif isinstance(node, nodes.Admonition):
            title = node.next_node(nodes.title)
            name = self.inline_children(title) if title is not None and title.parent is node else node.tagname.title()
            self.framed(node, _Frame(name), level)
        elif isinstance(node, nodes.container) and node.get("nb_element") == "cell_code":
            self.code_cell(node)
        elif isinstance(node, nodes.literal_block) and self.written_file(node):
            self.writefile_cell(node)
        elif isinstance(node, nodes.literal_block) and self.in_exercise() and node.get("language") in STARTER_LANGUAGES:
            self.starter_cell(node)
        elif isinstance(node, (nodes.container, nodes.compound)):
            for child in node.children:
                self.walk(child, level)
        else:
            self.blocks.append(self.block(node))

    def code_cell(self, node: nodes.container) -> None:
        """myst-nb's executed cell (source, outputs, tags), hidden where the page hides it; inside an exercise,
        the cell the reader works in."""
        self.flush()
        executed = self.page.executed.cells[int(node["cell_index"])]
        tags = [tag for tag in executed.metadata.get("tags", []) if tag != BLANKS_TAG]
        if self.in_exercise():
            next(frame for frame in reversed(self.frames) if frame.exercise).work += 1
            tags.append(WORK_TAG)
        outputs = [] if "remove-output" in tags else [
            output for output in merged_streams(copy.deepcopy(executed.get("outputs", [])))
            # A stream the page removes (PyTorch's warning, with the kernel's file paths) is not shown here either.
            if not (output.get("output_type") == "stream" and f"remove-{output['name']}" in tags)]
        cell = nbformat.v4.new_code_cell(executed.source, outputs=outputs,
                                         execution_count=executed.get("execution_count"))
        if tags:
            cell.metadata["tags"] = tags
        hidden = {}
        if HIDDEN_SOURCE_TAGS & set(tags):
            hidden["source_hidden"] = True
        if HIDDEN_OUTPUT_TAGS & set(tags):
            hidden["outputs_hidden"] = True
            # What JupyterLab writes beside outputs_hidden when it opens the notebook: written here, the
            # notebook does not open as changed.
            cell.metadata["collapsed"] = True
        if hidden:
            cell.metadata["jupyter"] = hidden
        self.cells.append(cell)
        # A figure's caption (myst-nb's `mystnb: figure:` on the cell), under the figure as on the page.
        for caption in node.findall(nodes.caption):
            self.blocks.append(self.block(caption))

    def written_file(self, node: nodes.literal_block) -> str | None:
        """A literal include of a whole file in the chapter's folder: its path there, else None."""
        source = node.get("source")
        if not source or not Path(source).is_file():
            return None
        try:
            relative = Path(source).resolve().relative_to(self.page.folder.resolve()).as_posix()
        except ValueError:
            return None
        return relative if Path(source).read_text(encoding="utf-8").strip() == node.astext().strip() else None

    def writefile_cell(self, node: nodes.literal_block) -> None:
        """A literal include as the cell that writes the file: the reader reads it, and running it writes it."""
        self.flush()
        relative = self.written_file(node)
        text = (self.page.folder / relative).read_text(encoding="utf-8")
        self.cells.append(nbformat.v4.new_code_cell(f"%%writefile {relative}\n{text}"))
        self.written_files.append(relative)

    # Blocks: Markdown text of one block node

    def block(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.paragraph):
            return self.inline_children(node)
        if isinstance(node, (nodes.bullet_list, nodes.enumerated_list)):
            return self.list_block(node)
        if isinstance(node, nodes.literal_block):
            return self.fence(node.astext(), FENCE_LANGUAGES.get(node.get("language", ""), node.get("language", "")))
        if isinstance(node, nodes.math_block):
            return f"$$\n{node.astext().strip()}\n$$"
        if isinstance(node, nodes.raw):
            return self.raw_html(node)
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, nodes.figure):
            return "\n\n".join(self.block(child) for child in node.children)
        if isinstance(node, nodes.image):
            return self.image(node)
        if isinstance(node, nodes.caption):
            return f"*{self.inline_children(node)}*"
        if isinstance(node, nodes.rubric):
            return f"**{self.inline_children(node)}**"
        if isinstance(node, (nodes.block_quote, nodes.topic, nodes.sidebar)):
            inner = "\n\n".join(self.block(child) for child in node.children)
            return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
        if isinstance(node, nodes.definition_list):
            return "\n\n".join(
                f"**{self.inline_children(item.next_node(nodes.term))}**\n\n"
                + "\n\n".join(self.block(child) for child in item.next_node(nodes.definition).children)
                for item in node.children)
        if isinstance(node, nodes.transition):
            return "---"
        if isinstance(node, (nodes.comment, nodes.target, nodes.substitution_definition, nodes.system_message,
                             nodes.Invisible)):
            return ""
        if isinstance(node, (nodes.container, nodes.compound, nodes.legend)):
            return "\n\n".join(self.block(child) for child in node.children)
        if isinstance(node, nodes.Element) and all(isinstance(child, nodes.Body) for child in node.children):
            self.unknown.add(node.tagname)
            return "\n\n".join(self.block(child) for child in node.children)
        self.unknown.add(node.tagname)
        return self.inline(node)

    def list_block(self, node: nodes.Element) -> str:
        items = []
        start = int(node.get("start", 1))
        for number, item in enumerate(node.children, start=start):
            marker = f"{number}. " if isinstance(node, nodes.enumerated_list) else "- "
            text = "\n\n".join(self.block(child) for child in item.children)
            lines = text.split("\n")
            items.append(marker + "\n".join([lines[0], *((" " * len(marker) + line) if line else "" for line in lines[1:])]))
        return "\n".join(items)

    def table(self, node: nodes.table) -> str:
        rows = []
        for row in node.findall(nodes.row):
            cells = [" ".join(self.block(child) for child in entry.children).replace("|", "\\|").replace("\n", " ")
                     for entry in row.children]
            rows.append("| " + " | ".join(cells) + " |")
        if not rows:
            return ""
        width = rows[0].count(" | ") + 1
        return "\n".join([rows[0], "|" + "---|" * width, *rows[1:]])

    def image(self, node: nodes.image) -> str:
        """An image as a cell attachment (the notebook stands alone), or a link where it is on the web."""
        uri, alt = node["uri"], node.get("alt", "")
        if "://" in uri or uri.startswith("data:"):
            return f"![{alt}]({uri})"
        path = self.page.images.get(posixpath.basename(uri))
        if path is None or not path.is_file():
            logger.warning(f"checks.sphinx.notebooks: image {uri} not found; the notebook shows its alt text")
            return alt
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self.attachments[path.name] = {mime: base64.b64encode(path.read_bytes()).decode("ascii")}
        return f"![{alt}](attachment:{path.name})"

    @staticmethod
    def raw_html(node: nodes.raw) -> str:
        """Raw HTML as Jupyter shows it; scripts (the theme's Thebe configuration) are the page's, not the reader's."""
        text = node.astext()
        return text if "html" in node.get("format", "").split() and not text.lstrip().startswith("<script") else ""

    @staticmethod
    def fence(text: str, language: str) -> str:
        ticks = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
        return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"

    # Inline: Markdown text of a paragraph's content

    def inline_children(self, node: nodes.Element) -> str:
        parts = [self.inline(child) for child in node.children]
        for index, child in enumerate(node.children):
            if isinstance(child, (nodes.strong, nodes.emphasis)):
                before, after = "".join(parts[:index])[-1:], "".join(parts[index + 1:])[:1]
                parts[index] = self.emphasis(child, before, after)
        return "".join(parts).strip()

    def emphasis(self, node: nodes.Element, before: str, after: str) -> str:
        """**strong** or *emphasis*, or its HTML tag where Markdown would not read the stars as such:
        CommonMark opens `**` before punctuation only after a space or punctuation (`c =** 10**.**`)."""
        text = self.inline_children(node)
        mark, tag = ("**", "strong") if isinstance(node, nodes.strong) else ("*", "em")

        def loose(inside: str, outside: str) -> bool:  # punctuation inside, a letter or digit outside
            return not inside.isalnum() and outside.isalnum()

        if not text or text[0].isspace() or text[-1].isspace() or loose(text[0], before) or loose(text[-1], after):
            return f"<{tag}>{text}</{tag}>"
        return f"{mark}{text}{mark}"

    def inline(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Text):
            return escape(node.astext()).replace("\n", " ")
        if isinstance(node, nodes.strong):
            return f"**{self.inline_children(node)}**"
        if isinstance(node, nodes.emphasis):
            return f"*{self.inline_children(node)}*"
        if isinstance(node, nodes.literal):
            text = node.astext().replace("\n", " ")
            ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
            padding = " " if text.startswith("`") or text.endswith("`") else ""
            return f"{ticks}{padding}{text}{padding}{ticks}"
        if isinstance(node, nodes.math):
            return f"${node.astext().strip()}$"
        if isinstance(node, nodes.reference):
            return f"[{self.inline_children(node)}]({self.link(node)})"
        if isinstance(node, nodes.image):
            return self.image(node)
        if isinstance(node, nodes.raw):
            return self.raw_html(node)
        if isinstance(node, (nodes.target, nodes.footnote_reference, nodes.comment, nodes.system_message)):
            return ""
        if isinstance(node, nodes.subscript):
            return f"<sub>{self.inline_children(node)}</sub>"
        if isinstance(node, nodes.superscript):
            return f"<sup>{self.inline_children(node)}</sup>"
        if isinstance(node, nodes.Element):
            # inline (glued text: myst-nb's "pasted-text"), pending references, abbreviations: their text.
            return "".join(self.inline(child) for child in node.children)
        return escape(node.astext())

    def link(self, node: nodes.reference) -> str:
        """Where a reference points, from a notebook opened anywhere: other pages and anchors on the site."""
        if "refid" in node:
            return f"{self.page.url}#{node['refid']}"
        uri = node.get("refuri", "")
        if "://" in uri or uri.startswith("mailto:"):
            return uri
        if uri.startswith("#"):
            return self.page.url + uri
        base = self.page.url.rsplit("/", 1)[0] + "/"
        path, _, anchor = uri.partition("#")
        resolved = posixpath.normpath(posixpath.join(base.removeprefix(self.page.site), path)) if path else ""
        return self.page.site + resolved + (f"#{anchor}" if anchor else "")


def merged_streams(outputs: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """Each stream (stdout, stderr) as one output, at its first place, as the page shows it
    (`nb_merge_streams`). myst-nb merges them for the page by appending the later pieces' text to the
    first, in the executed notebook too, and leaves the pieces in place: a piece already in the first is
    dropped, not appended twice."""
    first: dict[str, nbformat.NotebookNode] = {}
    later: dict[str, list[str]] = {}
    kept = []
    for output in outputs:
        if output.get("output_type") != "stream":
            kept.append(output)
        elif output["name"] not in first:
            first[output["name"]] = output
            kept.append(output)
        elif output["text"].rstrip():
            later.setdefault(output["name"], []).append(f"{output['text'].rstrip()}\n")
    for name, pieces in later.items():
        text = first[name]["text"]
        if not text.endswith("".join(pieces)):
            first[name]["text"] = text.rstrip() + "\n" + "".join(pieces)
    return kept


def work_cell(source: str) -> nbformat.NotebookNode:
    """A cell the reader works an exercise in; the book never ran it."""
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [WORK_TAG]
    return cell


def environment_note(line: str) -> str:
    """The page's environment line, and what it means in a notebook: the text keeps the build's numbers."""
    return (f"*{escape(line)} The text keeps the build's numbers; the outputs of the cells you run are "
            f"your machine's.*")


MARKDOWN_SPECIAL = re.compile(r"([\\`*_$])")


def escape(text: str) -> str:
    """Plain text as Markdown shows it: the characters Markdown and MathJax would read as syntax escaped."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("<", "&lt;")


def reader_notebook(document: nodes.document, page: Page, requirement: str,
                    files: Sequence[str] = ()) -> tuple[nbformat.NotebookNode, set[str]]:
    """The page as a notebook: the install cell, then the page's cells; files the chapter reads that no
    literal include shows are written by hidden cells after the install cell. Also returns the node types
    written as plain text (unknown to the writer)."""
    writer = NotebookWriter(page)
    cells = writer.write(document)
    unshown = [name for name in files if name not in writer.written_files]
    hidden_files = []
    for name in unshown:
        cell = nbformat.v4.new_code_cell(f"%%writefile {name}\n{(page.folder / name).read_text(encoding='utf-8')}")
        cell.metadata["jupyter"] = {"source_hidden": True}
        hidden_files.append(cell)
    code = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    tools = [tool for tool in TOOLS if re.search(rf"\b{tool}\b", code)]
    folders = sorted({posixpath.dirname(name) for name in [*writer.written_files, *unshown]} - {""})
    metadata = {key: copy.deepcopy(page.executed.metadata[key]) for key in ("kernelspec", "language_info")
                if key in page.executed.metadata}
    if metadata.get("kernelspec", {}).get("name") == KERNEL_NAME:
        # ipykernel's own name for its kernel, which JupyterLab writes in on opening (the chapters say
        # "Python 3"): written here, the notebook does not open as changed.
        metadata["kernelspec"]["display_name"] = get_kernel_dict()["display_name"]
    notebook = nbformat.v4.new_notebook(cells=[install_cell(requirement, tools, folders), *hidden_files, *cells],
                                        metadata=metadata)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"  # the same ids every build: the notebooks branch changes only where the book did
    return notebook, writer.unknown


# ---------------------------------------------------------------------------------------------------
# Sphinx: where the notebooks go, and the buttons that open them


def _repository(app: Sphinx) -> tuple[str, str, str, str]:
    """(repository URL, branch, GitHub owner, repository name) from `_config.yml`'s `repository:`."""
    options = app.config.html_theme_options
    url = options.get("repository_url", "").rstrip("/")
    if not url.startswith("https://github.com/") or len(url.split("/")) != 5:
        raise ConfigError(f"repository.url in _config.yml must be https://github.com/<owner>/<name>, got {url!r}")
    owner, name = url.split("/")[3:5]
    return url, options.get("repository_branch", "main"), owner, name


def site_url(app: Sphinx) -> str:
    """The published book's root URL, ending in /: checks_site_url, html_baseurl, or GitHub Pages'."""
    _, _, owner, name = _repository(app)
    url = app.config.checks_site_url or app.config.html_baseurl or f"https://{owner.lower()}.github.io/{name}/"
    return url.rstrip("/") + "/"


def launch_url(app: Sphinx, service: str, pagename: str) -> str:
    """Where a launch button opens the page's notebook: the notebooks branch of the repository."""
    _, _, owner, name = _repository(app)
    launch = app.config.html_theme_options.get("launch_buttons", {})
    branch = app.config.checks_notebooks_branch
    path = f"{pagename}.ipynb"
    if service == "Colab":
        return f"{launch['colab_url'].rstrip('/')}/github/{owner}/{name}/blob/{branch}/{path}"
    if service == "Binder":
        interface = {"classic": "tree", "jupyterlab": "lab/tree"}[launch.get("notebook_interface", "classic")]
        return f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{owner}/{name}/{branch}?urlpath={quote(f'{interface}/{path}')}"
    raise ValueError(f"no launch URL for {service!r}: this book offers Colab and Binder")


def chapter_files(app: Sphinx, pagename: str) -> list[str]:
    """The files a chapter reads from its folder (checks_notebook_files), which its notebook writes."""
    folder = Path(app.srcdir, posixpath.dirname(pagename))
    files = list(app.config.checks_notebook_files.get(pagename, []))
    for relative in files:
        if not (folder / relative).is_file():
            raise ConfigError(f"checks_notebook_files: {pagename} names {relative}, which is not in {folder}")
    return files


def _exercise_numbers(app: Sphinx, pagename: str) -> dict[str, str]:
    numbers = app.env.toc_fignumbers.get(pagename, {}).get("exercise", {})
    return {ident: ".".join(map(str, number)) for ident, number in numbers.items()}


def _notebook_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Write the page's reader notebook (the download) and aim its launch buttons at the published copy."""
    if not context.get("ipynb_source") or doctree is None:
        return
    url, branch, _, _ = _repository(app)
    executed = nbformat.read(Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb", as_version=4)
    site = site_url(app)
    page = Page(url=f"{site}{pagename}.html", site=site, folder=Path(app.srcdir, posixpath.dirname(pagename)),
                executed=executed, exercise_numbers=_exercise_numbers(app, pagename),
                environment=getattr(app.config, "checks_build_environment", ""),
                # The HTML builder has renamed the page's images (_images/<name>) and copies them later.
                images={name: Path(app.srcdir, source) for source, name in getattr(app.builder, "images", {}).items()})
    files = chapter_files(app, pagename)
    notebook, unknown = reader_notebook(doctree, page, install_requirement(url, branch), files)
    for name in sorted(unknown):
        logger.info(f"checks.sphinx.notebooks: {pagename}: {name} nodes written as their text")
    nbformat.validate(notebook)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            for button in group["buttons"]:
                if button.get("type") == "link":
                    button["url"] = launch_url(app, button["text"], pagename)


def _collect_notebooks(app: Sphinx, exception: Exception | None) -> None:
    """Gather the book's notebooks (pages not rewritten this build included) and Binder's requirements.

    The folder is made afresh each build, so a chapter removed from the book leaves no notebook behind.
    """
    if exception is not None or app.builder.format != "html":
        return
    sources, folder = Path(app.outdir) / "_sources", Path(app.outdir).parent / NOTEBOOKS_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    for docname in sorted(app.env.found_docs):
        notebook = sources / f"{docname}.ipynb"
        if notebook.is_file():
            (folder / notebook.relative_to(sources)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, folder / notebook.relative_to(sources))
    if folder.is_dir():
        url, branch, _, _ = _repository(app)
        (folder / "requirements.txt").write_text(binder_requirements(install_requirement(url, branch)), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("checks_notebooks_branch", "notebooks", "html")
    # {chapter docname: [files it reads, relative to its folder]}: its notebook writes them (%%writefile).
    app.add_config_value("checks_notebook_files", {}, "html")
    # The published site's root URL, for the notebooks' links to pages ("": html_baseurl, else GitHub Pages').
    app.add_config_value("checks_site_url", "", "html")
    app.connect("html-page-context", _notebook_page, priority=THEME_PRIORITY + 1)
    app.connect("build-finished", _collect_notebooks)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}
