"""Issue 30's expert re-read, read back from the built pages: each wrong, contradictory or imprecise claim it
found is gone, and where the corrected fact is something the page shows (a row, an output, a documented
number) the page shows it as PyTorch and the checker behave today."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from checks.core.estimate import FIRST_LEVELS

from ..helpers import embedded_records, main_text, page

# The words of each claim the re-read refuted, on the page it was on.
REFUTED = {
    "book/hooks-and-functions": ["Only the first works with the transforms of torch.func"],
    "book/modules": ["plain data, not a leaf"],
    "book/api": ["3 for a smooth f"],
    "book/no-gradient": ["behind autograd's back", "the next chapter shows what happens without it"],
    "book/small-function": ["so a graph is used once"],
    "book/precision": ["smallest step refused", "max and relu, and comparisons break it silently"],
    "book/grad-is-none": ["Anything computed from it requires grad too", "Only floating-point tensors can"],
    "book/in-place": ["only inside torch.no_grad()"],
    "book/non-scalar": ["at most 1e-16"],
    "book/finite-differences": ["is the same for every element", "sized by the largest step"],
    "book/how-good-is-a-check": ["a relative error below it passes", "Both return True"],
    "book/failures": ["worst element index ()"],
}


@pytest.mark.parametrize("name", sorted(REFUTED))
def test_no_refuted_claim_is_left(book_html: Path, name: str) -> None:
    # Sphinx typesets ' as ’: read the page with plain apostrophes, as the claims are written.
    text = " ".join(main_text(page(book_html, f"{name}.html")).replace("\u2019", "'").split())
    assert "'" in text or name == "book/api", "the apostrophes were not normalised"
    left = [claim for claim in REFUTED[name] if claim in text]
    assert not left, f"{name}: {left}"


def test_relu_refuses_a_complex_input_in_the_precision_chapter(book_html: Path) -> None:
    with pytest.raises(NotImplementedError):
        torch.relu(torch.tensor([1 + 2j], dtype=torch.complex128))
    rows = [r for r in embedded_records(page(book_html, "book/precision.html")) if r["function"] == "torch.relu(z)"]
    assert rows and all(r["verdict"] == "pass" and r["dtype"] == "complex128" for r in rows), rows


def test_the_api_page_states_the_levels_a_smooth_f_takes(book_html: Path) -> None:
    text = " ".join(main_text(page(book_html, "book/api.html")).split())
    assert f"FIRST_LEVELS, {FIRST_LEVELS}, for a smooth f" in text


def test_modules_shows_the_batch_is_a_leaf_that_does_not_require_grad(book_html: Path) -> None:
    X = torch.randn(4, 3)
    shown = f"{X.is_leaf} {X.requires_grad} {X.grad}"
    outputs = [div.get_text() for div in page(book_html, "book/modules.html").select("div.cell_output")]
    assert any(shown in output for output in outputs), shown
