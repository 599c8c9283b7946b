"""The doctree-to-notebook writer on what the chapters do not use yet (admonitions, tables, links between
pages, emphasis Markdown cannot open), read back as Jupyter renders the Markdown."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from docutils import nodes
from docutils.core import publish_doctree
from myst_nb.core.utils import coalesce_streams

from checks.sphinx.notebooks import WORK_TAG, Page, merged_streams, reader_notebook

from ..book.test_notebooks import MARKDOWN, visible_text

SITE = "https://example.github.io/book/"


def notebook_of(rst: str, tmp_path: Path) -> nbformat.NotebookNode:
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=nbformat.v4.new_notebook())
    notebook, unknown = reader_notebook(publish_doctree(rst), page, "gradient-checks[notebook] @ git+https://x/y@main")
    assert not unknown, f"written as plain text: {unknown}"
    return notebook


def markdown(notebook: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def test_an_admonition_is_a_block_quote_under_its_title(tmp_path: Path) -> None:
    cells = markdown(notebook_of("Before.\n\n.. note::\n\n   Keep the *graph*.\n\n   Twice.\n\nAfter.\n", tmp_path))
    assert cells == ["Before.", "> **Note**\n>\n> Keep the *graph*.\n>\n> Twice.", "After."]


def test_a_table_is_a_markdown_table(tmp_path: Path) -> None:
    rst = "=====  =====\ndtype  eps\n=====  =====\nf32    1.2e-07\nf64    2.2e-16\n=====  =====\n"
    html = MARKDOWN.render(markdown(notebook_of(rst, tmp_path))[0])
    assert "<th>dtype</th>" in html and "<td>2.2e-16</td>" in html


def test_links_to_other_pages_and_anchors_point_at_the_published_site(tmp_path: Path) -> None:
    document = nodes.document("", None)
    paragraph = nodes.paragraph()
    paragraph += nodes.reference("", "the ledger", refuri="ledger.html#failures", internal=True)
    paragraph += nodes.Text(", ")
    paragraph += nodes.reference("", "above", refid="the-check", internal=True)
    paragraph += nodes.Text(", ")
    paragraph += nodes.reference("", "home", refuri="../index.html", internal=True)
    paragraph += nodes.Text(", ")
    paragraph += nodes.reference("", "torch", refuri="https://pytorch.org/docs")
    document += paragraph
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=nbformat.v4.new_notebook())
    notebook, _ = reader_notebook(document, page, "x")
    assert markdown(notebook) == [f"[the ledger]({SITE}book/ledger.html#failures), [above]({SITE}book/chapter.html#the-check), "
                                  f"[home]({SITE}index.html), [torch](https://pytorch.org/docs)"]


def test_strong_text_reads_as_strong_where_stars_could_not_open_it(tmp_path: Path) -> None:
    # "**The factor c =** 10**.**": CommonMark does not open ** between a digit and a full stop.
    rst = "**The factor c =** 10\\ **.** Then **bold** and *x*.\n"
    html = MARKDOWN.render(markdown(notebook_of(rst, tmp_path))[0])
    assert "**" not in visible_text(html)
    assert "<strong>.</strong>" in html and "<strong>bold</strong>" in html and "<em>x</em>" in html


def test_text_that_looks_like_markdown_stays_text(tmp_path: Path) -> None:
    rst = "A price of $5 and $6, a_b_c, 2*3*4 and <b>.\n"
    source = markdown(notebook_of(rst, tmp_path))[0]
    assert visible_text(MARKDOWN.render(source)) == "A price of $5 and $6, a_b_c, 2*3*4 and <b>."


# sphinx-exercise's nodes, as the writer knows them: by their names.
class exercise_enumerable_node(nodes.Element):  # noqa: N801 (sphinx-exercise's name)
    pass


class solution_node(nodes.Element):  # noqa: N801 (sphinx-exercise's name)
    pass


def executed_cell(container: nodes.Element, executed: nbformat.NotebookNode, source: str, **fields) -> None:
    """A code cell as myst-nb leaves it in the doctree: a container naming its index in the executed notebook."""
    container += nodes.container(nb_element="cell_code", cell_index=len(executed.cells))
    executed.cells.append(nbformat.v4.new_code_cell(source, **fields))


def chapter_with_exercises(executed: nbformat.NotebookNode) -> nodes.document:
    """Text, two exercises (one with starter code in a Markdown block) each with its solution, as a chapter's end."""
    document = nodes.document("", None)
    section = nodes.section(ids=["chapter"])
    section += nodes.title("", "Chapter")
    section += nodes.paragraph("", "Some text.")
    executed_cell(section, executed, "x = 1", execution_count=1)
    first = exercise_enumerable_node(ids=["first"])
    first += nodes.title("", "")
    first += nodes.paragraph("", "This function is wrong:")
    first += nodes.literal_block("", "def broken(x):\n    return x", language="python")
    first += nodes.paragraph("", "Fix it.")
    section += first
    solution = solution_node()
    solution += nodes.title("", "Solution to Exercise 1")
    solution += nodes.paragraph("", "Return 2x.")
    executed_cell(solution, executed, "print('fixed')", execution_count=2,
                  outputs=[nbformat.v4.new_output("stream", name="stdout", text="fixed\n")])
    section += solution
    second = exercise_enumerable_node(ids=["second"])
    second += nodes.title("", "")
    second += nodes.paragraph("", "Write a check.")
    section += second
    other = solution_node()
    other += nodes.title("", "Solution to Exercise 2")
    executed_cell(other, executed, "print('checked')", execution_count=3)
    section += other
    document += section
    return document


def test_solutions_come_after_every_exercise_and_each_exercise_gets_a_cell_to_work_in(tmp_path: Path) -> None:
    executed = nbformat.v4.new_notebook()
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=executed,
                exercise_numbers={"first": "1", "second": "2"})
    notebook, unknown = reader_notebook(chapter_with_exercises(executed), page, "x")
    assert not unknown
    cells = notebook.cells[1:]  # after the install cell
    kinds = [(cell.cell_type, cell.source.splitlines()[0] if cell.source else "") for cell in cells]
    assert kinds == [
        ("markdown", "# Chapter"), ("code", "x = 1"),
        ("markdown", "> **Exercise 1**"), ("code", "# Exercise 1: its code. Run it, then write your answer below it."),
        ("markdown", "> Fix it."),
        ("markdown", "> **Exercise 2**"), ("code", "# Exercise 2: your answer. Write here the code the exercise asks for, and run it;"),
        ("markdown", "## Solutions"),
        ("markdown", "### Solution to Exercise 1"), ("code", "print('fixed')"),
        ("markdown", "### Solution to Exercise 2"), ("code", "print('checked')"),
    ]
    # The starter code runs as written; the work cells are marked and were never run.
    starter = cells[3]
    assert starter.source.split("\n", 1)[1] == "def broken(x):\n    return x" and "def broken" not in cells[2].source
    work = [cell for cell in cells if WORK_TAG in cell.metadata.get("tags", [])]
    assert work == [cells[3], cells[6]] and all(not cell.outputs and cell.execution_count is None for cell in work)
    assert '"Solutions"' in cells[6].source
    # A solution's code is not hidden (no JupyterLab setting to undo): it is out of the exercise's way instead.
    assert "jupyter" not in cells[9].metadata and cells[9].outputs[0].text == "fixed\n"


def test_a_cell_whose_output_the_page_hides_is_written_as_jupyterlab_writes_it(tmp_path: Path) -> None:
    executed = nbformat.v4.new_notebook()
    document = nodes.document("", None)
    executed_cell(document, executed, "1 + 1", execution_count=1, metadata={"tags": ["hide-output"]})
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=executed)
    cell = reader_notebook(document, page, "x")[0].cells[1]
    # JupyterLab adds collapsed beside outputs_hidden on opening: written here, the notebook opens unchanged.
    assert cell.metadata["jupyter"] == {"outputs_hidden": True} and cell.metadata["collapsed"] is True


def test_a_figure_drawn_by_a_cell_keeps_its_caption_under_it(tmp_path: Path) -> None:
    executed = nbformat.v4.new_notebook()
    document = nodes.document("", None)
    executed_cell(document, executed, "figure", execution_count=1, metadata={"tags": ["remove-input"]})
    figure = nodes.figure()
    figure += nodes.caption("", "The error against the step.")
    document.children[0] += figure
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=executed)
    cells = reader_notebook(document, page, "x")[0].cells[1:]
    assert [cell.cell_type for cell in cells] == ["code", "markdown"]
    assert cells[0].source == "figure" and cells[0].metadata["jupyter"] == {"source_hidden": True}
    assert cells[1].source == "*The error against the step.*"


def test_the_environment_line_stands_under_the_title(tmp_path: Path) -> None:
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=nbformat.v4.new_notebook(),
                environment="Numbers on this page were computed when the book was built, on cpu (a CPU).")
    notebook, _ = reader_notebook(publish_doctree("Title\n=====\n\nText.\n", settings_overrides={"doctitle_xform": False}), page, "x")
    lines = notebook.cells[1].source.split("\n\n")
    assert lines[0] == "# Title" and lines[1].startswith("*Numbers on this page were computed when the book was built")
    assert "your machine's" in lines[1] and lines[2] == "Text."


def test_stream_pieces_are_one_output_as_on_the_page() -> None:
    pieces = [nbformat.v4.new_output("stream", name="stdout", text=text) for text in (".", "F", "\n== FAILURES ==\n")]
    page = ".\nF\n\n== FAILURES ==\n"  # as myst-nb shows them merged (nb_merge_streams)
    assert [output.text for output in merged_streams(copy.deepcopy(pieces))] == [page]
    # myst-nb merges the pieces into the first for the page, in the executed notebook too, and leaves them.
    mutated = copy.deepcopy(pieces)
    assert [output.text for output in coalesce_streams(mutated)] == [page] and mutated[0].text == page
    assert [output.text for output in merged_streams(mutated)] == [page]
    # Other outputs stay where they were; stderr is a stream of its own.
    mixed = [pieces[0], nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
             nbformat.v4.new_output("execute_result", data={"text/plain": "0"}, execution_count=1), pieces[1]]
    assert [(output.output_type, output.get("text")) for output in merged_streams(copy.deepcopy(mixed))] == [
        ("stream", ".\nF\n"), ("stream", "warning\n"), ("execute_result", None)]


def test_the_kernel_is_named_as_jupyterlab_names_it(tmp_path: Path) -> None:
    """JupyterLab writes the kernel's own display name into a notebook it opens: written here, it opens unchanged."""
    executed = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                                 "name": "python3"}})
    page = Page(url=f"{SITE}book/chapter.html", site=SITE, folder=tmp_path, executed=executed)
    notebook, _ = reader_notebook(publish_doctree("Text.\n"), page, "x")
    assert notebook.metadata["kernelspec"] == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    assert executed.metadata["kernelspec"]["display_name"] == "Python 3"  # the build's notebook is left as it was
