"""The chapters of "When gradients surprise you" (the first three: grad-is-none, no-gradient, in-place), read
from the built HTML: the plain PyTorch in view, PyTorch's real messages on the page word for word (each one
produced again here, by the same calls), every check executed with failures only where declared, the numbers
in the prose glued from the records, no plumbing in view, no path of the building machine, and the visible
code running when pasted in order."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
import warnings
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup
from torch import nn

from ..helpers import embedded_records, main_text, page, visible_code, without_exercises
from ..toc import ROOT, toc_chapters

CHAPTERS = ("book/grad-is-none", "book/no-gradient", "book/in-place")

# What a reader of each chapter must see in its code cells: the PyTorch itself.
PLAIN_PYTORCH = {
    "book/grad-is-none": ("requires_grad=True", ".is_leaf", ".grad_fn", ".next_functions",
                          "next_functions[0][0].variable is x", "h.retain_grad()", "y.backward()",
                          "warnings.catch_warnings(record=True)", "x.grad", ".detach()", "requires_grad_()",
                          "with torch.no_grad():", "x.item()", "torch.tensor(3, "),
    "book/no-gradient": ("with torch.no_grad():", "with torch.inference_mode():", ".detach()", ".clone()",
                         "requires_grad_(False)", "torch.optim.SGD(model[1].parameters()", "optimizer.zero_grad()",
                         "model.zero_grad()", "optimizer.step()", "loss.backward()", ".grad"),
    "book/in-place": ("._version", ".add_(1)", "y = y + 1", "grad_fn._saved_result", "grad_fn._saved_self",
                      "x -= 0.1 * x.grad", "with torch.no_grad():", "y.relu_()", "y.mul_(2)", "torch.relu("),
}

# The passes each chapter declares as failures: PyTorch refused, so the derivative asked for never came.
EXPECTED_FAILURES = {
    "book/grad-is-none": {"integer_input: torch.tensor(3, requires_grad=True)",
                          "integer_input: torch.tensor(3), then .requires_grad_()",
                          "no_graph: forward inside torch.no_grad()", "no_graph: forward on x.detach()",
                          "no_graph: output rebuilt from x.item()", "(x**3).sum() at x=[0.5, 1.0], by broken(x)"},
    "book/no-gradient": {"features_then_head: inference_mode() features: head.weight.grad"},
    "book/in-place": {"exp_plus_one: in place: y = exp(x); y.add_(1)",
                      "step_by_hand: x -= 0.1 * x.grad, then 2x at the new x",
                      "sigmoid_then_relu: y.relu_() after sigmoid", "doubled: tanh, then mul_(2)"},
}

# Plumbing a reader must not meet in a visible cell (issue 24: "No plumbing in view").
PLUMBING = ("glue", "myst_nb", "HTML(", "records_html", "TABLE =", "checks.display", "checks.mutants",
            "checks.sensitivity", "subprocess", "junitxml")


def squeezed(text: str) -> str:
    """text without whitespace: glued values and inline code sit in elements of their own, and the page's text
    puts spaces around them that a reader does not see."""
    return "".join(text.split())


def prose(soup: BeautifulSoup) -> str:
    """The page's text, squeezed, with Sphinx's curly quotes turned back into PyTorch's ASCII."""
    text = unicodedata.normalize("NFKC", main_text(soup))
    for curly, plain in (("’", "'"), ("‘", "'"), ("“", '"'), ("”", '"')):
        text = text.replace(curly, plain)
    return squeezed(text)


def error_of(call) -> str:
    """The message of the error PyTorch raises for call(), produced here, now."""
    with pytest.raises(Exception) as caught:
        call()
    return str(caught.value)


def by_check(soup: BeautifulSoup, check: str, device: str = "cpu", dtype: str = "float64") -> dict:
    found = [r for r in embedded_records(soup) if r["check"] == check and r["device"] == device and r["dtype"] == dtype]
    assert len(found) == 1, (check, [r["check"] for r in embedded_records(soup)])
    return found[0]


@pytest.fixture(scope="module")
def pages(book_html: Path) -> dict[str, BeautifulSoup]:
    return {chapter: page(book_html, f"{chapter}.html") for chapter in CHAPTERS}


def test_the_three_chapters_follow_the_first_steps_in_the_toc() -> None:
    chapters = toc_chapters()
    start = chapters.index("book/modules") + 1
    assert chapters[start:start + 3] == list(CHAPTERS)
    assert chapters.index("book/in-place") < chapters.index("book/finite-differences")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_plain_pytorch_is_in_view(pages: dict[str, BeautifulSoup], chapter: str) -> None:
    code = visible_code(pages[chapter])
    missing = [call for call in PLAIN_PYTORCH[chapter] if call not in code]
    assert not missing, f"{chapter}: not in any visible code cell: {missing}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_plumbing_in_view(pages: dict[str, BeautifulSoup], chapter: str) -> None:
    code = visible_code(pages[chapter])
    shown = [name for name in PLUMBING if name in code]
    assert not shown, f"{chapter}: plumbing in a visible cell: {shown}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_check_executed_and_failed_only_where_declared(pages: dict[str, BeautifulSoup], chapter: str) -> None:
    records = embedded_records(pages[chapter])
    assert records and all(r["executed"] and r["code"] for r in records)
    unexpected = [r["check"] for r in records if r["verdict"] == "fail" and not r["expected_failure"]]
    assert not unexpected, f"{chapter}: unexpected failures {unexpected}"
    passed_anyway = [r["check"] for r in records if r["verdict"] == "pass" and r["expected_failure"]]
    assert not passed_anyway, f"{chapter}: declared failures that passed {passed_anyway}"
    declared = {r["check"] for r in records if r["expected_failure"]}
    assert declared == EXPECTED_FAILURES[chapter]
    # A declared failure is a refusal: no derivative came (never a wrong number passed off as a demonstration).
    assert all(r["observed_gradient"] is None for r in records if r["expected_failure"])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_path_of_the_building_machine_on_the_page(book_html: Path, chapter: str) -> None:
    text = (book_html / f"{chapter}.html").read_text(encoding="utf-8")
    for path in (str(ROOT), "/tmp/", ".venv", "site-packages", "ipykernel_", str(Path.home()) + "/"):
        assert path not in text, f"{chapter} shows {path!r}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_visible_code_runs_when_pasted_in_order(pages: dict[str, BeautifulSoup], chapter: str,
                                                    tmp_path: Path) -> None:
    script = tmp_path / "pasted.py"
    script.write_text(visible_code(pages[chapter]), encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != "CHECKS_RECORDS"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env=environment, timeout=300)
    assert run.returncode == 0, f"{chapter}: pasted in order, its code fails:\n{run.stderr[-3000:]}"


# --- When .grad is None ---------------------------------------------------------------------------------


def test_grad_is_none_shows_the_non_leaf_warning_word_for_word(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/grad-is-none"]
    x = torch.tensor(3.0, requires_grad=True)
    h = x**2
    (h**2).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert h.grad is None
    warning = " ".join(str(caught[0].message).split())
    outputs = [" ".join(cell.get_text().split()) for cell in soup.select("div.cell_output")]
    assert "tensor(108.) None UserWarning" in outputs
    quotes = [" ".join(quote.get_text().split()) for quote in soup.select("blockquote.checks-quote")]
    assert warning in quotes
    record = by_check(soup, "non_leaf: h.grad, not a leaf: None")
    assert record["observed_gradient"] is None and warning in " ".join(record["message"].split())


def test_grad_is_none_shows_the_real_errors(pages: dict[str, BeautifulSoup]) -> None:
    text = prose(pages["book/grad-is-none"])
    made = error_of(lambda: torch.tensor(3, requires_grad=True))
    later = error_of(lambda: torch.tensor(3).requires_grad_())
    with torch.no_grad():
        y = torch.tensor(3.0, requires_grad=True) ** 2
    no_graph = error_of(y.backward)
    assert squeezed(f'PyTorch said "{made}" when the tensor was made, and "{later}" when asked later') in text
    assert squeezed(f'All 3 passes raised "{no_graph}"') in text


def test_grad_is_none_reads_the_graph_and_glues_what_the_checks_observed(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/grad-is-none"]
    outputs = [cell.get_text().strip() for cell in soup.select("div.cell_output")]
    assert "(True, False, False)" in outputs
    assert "PowBackward0\n    PowBackward0\n        AccumulateGrad" in outputs
    assert "MulBackward0\n    None (an input that does not require grad)\n    PowBackward0\n        AccumulateGrad" in outputs
    assert any(re.fullmatch(r"\(\(<AccumulateGrad (object )?at 0x[0-9a-f]+>, 0\),\)", output) for output in outputs)
    text = prose(soup)
    stored = by_check(soup, "(x**2)**2 at x=3, by stored(x)")
    assert stored["analytical_gradient"] == stored["observed_gradient"] == 108
    assert squeezed("AccumulateGrad and stored 108 in x.grad") in text
    retained = by_check(soup, "non_leaf: h.grad after h.retain_grad(): 2h")["observed_gradient"]
    assert retained == 18 and squeezed("Without retain_grad(), h.grad was none ; with it, 18 .") in text
    converted = by_check(soup, "converted: x.grad, the float32 leaf: 4x³", dtype="float32")["observed_gradient"]
    assert converted == 108 and squeezed("w.grad was none and x.grad held 108") in text
    assert by_check(soup, "constant: c.grad, c requires grad: x²")["observed_gradient"] == 9
    assert squeezed("c.grad was none until c required grad, then 9") in text
    assert squeezed("h.grad held 18 and x.grad stayed none") in text


# --- No gradient on purpose -----------------------------------------------------------------------------


def test_no_gradient_shows_the_inference_mode_error_word_for_word(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/no-gradient"]
    with torch.inference_mode():
        features = nn.Linear(3, 2)(torch.ones(4, 3))
    message = " ".join(error_of(lambda: nn.Linear(2, 1)(features)).split())
    quotes = [" ".join(quote.get_text().split()) for quote in soup.select("blockquote.checks-quote")]
    assert message in quotes


def test_no_gradient_freezing_and_a_subset_do_different_things_to_grad(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/no-gradient"]
    for dtype in ("float32", "float64"):
        frozen = by_check(soup, "frozen: backbone weight.grad, None", dtype=dtype)
        assert frozen["observed_gradient"] is None and frozen["verdict"] == "pass"
        first = by_check(soup, "subset: step 1: backbone weight.grad, accumulated", dtype=dtype)
        second = by_check(soup, "subset: step 2: backbone weight.grad, accumulated", dtype=dtype)
        # Computed and stored although the optimizer never steps it, and summed over the two steps.
        assert first["observed_gradient"] is not None and second["observed_gradient"] is not None
        assert torch.tensor(second["observed_gradient"]).abs().sum() > torch.tensor(first["observed_gradient"]).abs().sum()
        cleared = by_check(soup, "subset: after model.zero_grad(): backbone weight.grad, None", dtype=dtype)
        assert cleared["observed_gradient"] is None
    text = prose(soup)
    first = by_check(soup, "subset: step 1: backbone weight.grad, accumulated")["observed_gradient"][0][0]
    second = by_check(soup, "subset: step 2: backbone weight.grad, accumulated")["observed_gradient"][0][0]
    assert squeezed(f"was {first:.4g} after the first step and {second:.4g} after the second") in text
    outputs = [cell.get_text().strip() for cell in soup.select("div.cell_output")]
    assert "['1.weight', '1.bias']" in outputs and "(None, True)" in outputs  # frozen: no .grad, weights unmoved


def test_no_gradient_glues_the_held_constant_and_the_detached_target(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/no-gradient"]
    text = prose(soup)
    held = by_check(soup, "held_constant: c made under no_grad(): dy/dx = c")["observed_gradient"]
    followed = by_check(soup, "held_constant: c made with its graph: dy/dx = 4x")["observed_gradient"]
    assert (held, followed) == (6, 12)
    assert squeezed("x.grad held 6 with c made under no_grad(), and 12 with c made normally") in text
    assert squeezed("The detached target gave [1.0, 2.0], the followed one [0.5, 1.0]") in text
    outputs = [cell.get_text().strip() for cell in soup.select("div.cell_output")]
    assert "tensor([10.,  2.], requires_grad=True)" in outputs  # .detach() shares memory


# --- In-place operations ---------------------------------------------------------------------------------


def test_in_place_shows_the_modified_by_an_inplace_operation_error_word_for_word(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/in-place"]
    x = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.exp(x)
    y.add_(1)
    message = " ".join(error_of(lambda: y.sum().backward()).split())
    assert "is at version 1; expected version 0" in message
    quotes = [" ".join(quote.get_text().split()) for quote in soup.select("blockquote.checks-quote")]
    assert message in quotes
    text = prose(soup)
    assert squeezed('and the versions, "is at version 1; expected version 0"') in text
    leaf = error_of(lambda: torch.tensor(3.0, requires_grad=True).sub_(1))
    assert squeezed(f'Written plainly, the step raised "{leaf}" and changed nothing') in text


def test_in_place_version_counters_and_the_fixes(pages: dict[str, BeautifulSoup]) -> None:
    soup = pages["book/in-place"]
    outputs = [cell.get_text().strip() for cell in soup.select("div.cell_output")]
    assert "0\n1\n3\n3 0" in outputs and "0\n1" in outputs
    assert "(tensor(2), None)" in outputs
    fixed = by_check(soup, "exp_plus_one: out of place: y = exp(x); y = y + 1")
    assert fixed["verdict"] == "pass" and fixed["observed_gradient"][0] == 1
    assert squeezed(f"backward() stored {fixed['observed_gradient']} in x.grad") in prose(soup)
    stepped = by_check(soup, "step_by_hand: the step inside torch.no_grad(), then 2x at the new x")
    assert stepped["analytical_gradient"] == 2 * (3.0 - 0.1 * 6.0) and stepped["verdict"] == "pass"
    harmless = [r for r in embedded_records(without_exercises(soup)) if r["check"].startswith("harmless:")]
    assert harmless and all(r["verdict"] == "pass" for r in harmless)
