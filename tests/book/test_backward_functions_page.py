"""What backward() does, one node at a time (issue 30), read from the built page: the nodes called by hand give the
number backward() stores, the incoming gradient multiplies, and a saved tensor read after backward() raises;
each as recorded in the rows the page embeds, and the chapter's place in "First steps"."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup

from ..helpers import embedded_records, page, visible_code
from ..toc import toc_part

CHAPTER = "book/backward-functions"
FREED = "Trying to backward through the graph a second time (or directly access saved tensors after they have " \
        "already been freed)"


@pytest.fixture(scope="module")
def chapter(book_html: Path) -> BeautifulSoup:
    return page(book_html, f"{CHAPTER}.html")


def rows(soup: BeautifulSoup, label: str) -> dict[tuple[str, str], dict]:
    """The check's records by (dtype, device)."""
    found = {(r["dtype"], r["device"]): r for r in embedded_records(soup) if r["check"] == label}
    assert found, label
    return found


def test_it_follows_the_first_chapter_in_first_steps() -> None:
    part = toc_part("First steps")
    assert part.index(CHAPTER) == part.index("book/small-function") + 1


def test_the_walk_calls_the_nodes_in_plain_pytorch(chapter: BeautifulSoup) -> None:
    code = visible_code(chapter)
    for line in ("mul_node = y.grad_fn", "sin_node = mul_node.next_functions[0][0]", "d_s, d_x = mul_node(v)",
                 "via_sin = sin_node(d_s)", "y.backward()", "mul_node._saved_self", "make_dot(y",
                 "with checks.raises(RuntimeError"):
        assert line in code, line


def test_the_walk_by_hand_gives_what_backward_stores_in_every_row(chapter: BeautifulSoup) -> None:
    walked = rows(chapter, "walked by hand: sin x + x cos x")
    stored = rows(chapter, "backward(): sin x + x cos x")
    assert walked.keys() == stored.keys() and {dtype for dtype, _ in walked} == {"float32", "float64"}
    for key, record in walked.items():
        assert (record["how"], record["verdict"]) == ("node", "pass"), key
        assert (stored[key]["how"], stored[key]["verdict"]) == ("stored", "pass"), key
        assert record["observed_gradient"] == stored[key]["observed_gradient"], key
    # The same walk here, in float64: sin x + x cos x at 2.
    x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    y = torch.sin(x) * x
    d_s, d_x = y.grad_fn(torch.ones_like(y))
    by_hand = y.grad_fn.next_functions[0][0](d_s) + d_x
    assert walked["float64", "cpu"]["observed_gradient"] == by_hand.item()


def test_the_incoming_gradient_multiplies(chapter: BeautifulSoup) -> None:
    one = rows(chapter, "v = 1: ∂y/∂s = x")
    two = rows(chapter, "v = 2: 2 sin x")
    for key, record in two.items():
        assert (record["how"], record["verdict"], one[key]["how"]) == ("node", "pass", "node"), key
        assert record["observed_gradient"] == pytest.approx(2 * torch.sin(torch.tensor(2.0, dtype=torch.float64)).item(),
                                                            rel=1e-6), key


def test_a_saved_tensor_read_after_backward_raises_and_the_page_quotes_pytorch(chapter: BeautifulSoup) -> None:
    for key, record in rows(chapter, "a saved tensor read after backward()").items():
        assert (record["how"], record["verdict"]) == ("saved", "pass"), key
        assert FREED in record["message"], key
    text = " ".join(chapter.select_one("main").get_text().replace("\u201c", '"').replace("\u201d", '"').split())
    assert f'message begins "{FREED}"' in text


def test_the_exercise_s_walk_is_a_walk_by_hand(chapter: BeautifulSoup) -> None:
    for key, record in rows(chapter, "walked: exp(x·x) at 0.5").items():
        assert (record["how"], record["verdict"]) == ("node", "pass"), key
