"""The doctree-to-notebook writer on what the chapters do not use yet (admonitions, tables, links between
pages, emphasis Markdown cannot open), read back as Jupyter renders the Markdown."""

from __future__ import annotations

from pathlib import Path

import nbformat
from docutils import nodes
from docutils.core import publish_doctree

from checks.sphinx.notebooks import Page, reader_notebook

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
