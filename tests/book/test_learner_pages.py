"""The pages a learner opens first (issue 30): the introduction starts with an example, the leaf is defined
one way, the API reference's facts come from the code, and the new questions are answered by executed cells.
"""

from __future__ import annotations

from pathlib import Path

import torch

import checks
from checks.core.estimate import FIRST_LEVELS

from checks.sphinx import ledger

from ..helpers import embedded_records, main_text, page


def outputs(cell) -> str:
    return " ".join(cell.select_one("div.cell_output").get_text(" ").split()) if cell.select_one("div.cell_output") else ""


def test_the_introduction_starts_with_an_executed_example_expectation_first(book_html: Path) -> None:
    article = page(book_html, "book/intro.html").select_one("main article")
    first = article.select_one("section > p:not(.checks-build-environment)")
    cell = article.select_one("div.cell")
    assert "expect" in first.get_text() and first.find_next("div", class_="cell") is cell
    code = cell.select_one("div.cell_input").get_text()
    assert "backward()" in code and "x.grad" in code
    x = torch.tensor(3.0, requires_grad=True)
    (x * x).backward()
    assert outputs(cell) == repr(x.grad)
    # Nothing before the example but the title and the expectation.
    assert not first.find_previous("table") and not first.find_previous("div", class_="cell")


def test_the_introduction_tells_a_beginner_what_can_wait(book_html: Path) -> None:
    text = main_text(page(book_html, "book/intro.html"))
    assert "Checking numerically can wait" in text


def test_the_leaf_is_defined_one_way_and_the_definition_is_torch_s(book_html: Path) -> None:
    glossary = page(book_html, "book/glossary.html")
    entry = next(dt for dt in glossary.select("dl.glossary dt") if dt.get_text(strip=True).rstrip("¶#") == "leaf")
    definition = " ".join(entry.find_next_sibling("dd").get_text(" ").split())
    assert "did not compute from tracked tensors" in definition and "leaves that require grad" in definition
    # What the definition says, as torch says it: a tensor made without requires_grad is a leaf too, and
    # backward() fills the .grad of a leaf that requires grad only.
    data, x = torch.randn(3), torch.tensor(2.0, requires_grad=True)
    assert data.is_leaf and x.is_leaf and not (x * data).is_leaf
    (x * data).sum().backward()
    assert data.grad is None and x.grad is not None
    for name in ("book/intro", "book/grad-is-none", "book/non-scalar", "book/hooks-and-functions"):
        text = " ".join(main_text(page(book_html, f"{name}.html")).split())
        assert "did not compute from tracked tensors" in text, name
        assert "only **leaves** do" not in text and "is a tensor you created yourself with" not in text, name


def test_the_api_reference_shows_the_pytest_example_as_code_and_the_levels_the_code_uses(book_html: Path) -> None:
    api = page(book_html, "book/api.html")
    shown = [pre.get_text() for pre in api.select("main pre")]
    assert any("def test_swish(check_gradients):" in text for text in shown)
    assert not [dt for dt in api.select("main dl:not(.py) > dt") if "def test_swish" in dt.get_text()]
    smooth = checks.check_jacobian(torch.sin, torch.tensor([0.3, 1.2], dtype=torch.float64))
    assert set(smooth.levels.tolist()) == {FIRST_LEVELS}
    assert f"({FIRST_LEVELS} for a smooth f" in main_text(api) or f"{FIRST_LEVELS}, for a smooth f" in main_text(api)


def cell_with(soup, code: str):
    return next(c for c in soup.select("div.cell") if code in c.select_one("div.cell_input").get_text())


def test_detect_anomaly_names_the_operation_and_the_forward_line(book_html: Path) -> None:
    soup = page(book_html, "book/debugging.html")
    cell = cell_with(soup, "with torch.autograd.detect_anomaly():")
    assert "returned nan values" in outputs(cell) and "SqrtBackward0" in outputs(cell)
    report = " ".join(cell.find_next("blockquote", class_="checks-quote").get_text().split())
    assert report.startswith("Error detected in SqrtBackward0. Traceback of forward call that caused the error:")
    forward = report.split("Traceback of forward call", 1)[1]
    # The reader's own line, at its line of the cell.
    code = cell.select_one("div.cell_input").get_text().strip().splitlines()
    line = next(i for i, text in enumerate(code, 1) if "torch.sqrt(x)" in text)
    assert f"line {line}, in <module> y = torch.where(x > 0, torch.sqrt(x), 0.0)" in forward


def test_the_numpy_error_is_shown_and_its_fix_runs(book_html: Path) -> None:
    soup = page(book_html, "book/debugging.html")
    failing = cell_with(soup, "    y.cpu().numpy()")
    assert "Can't call numpy() on Tensor that requires grad" in outputs(failing)
    fixed = cell_with(soup, "y.detach().cpu().numpy()")
    assert "[1. 4. 9.]" in outputs(fixed)
    rows = {r["check"]: r for r in embedded_records(soup) if r["device"] == "cpu"}
    assert rows["d/dx Σ x² = 2x after .numpy()"]["observed_gradient"] == [2.0, 4.0, 6.0]


def test_the_straight_through_estimator_is_the_surrogate_and_a_check_of_the_derivative_fails(book_html: Path) -> None:
    soup = page(book_html, "book/debugging.html")
    records = embedded_records(soup)
    surrogate = [r for r in records if r["check"] == "straight-through: identity's 1"]
    slope = [r for r in records if r["check"] == "forward's slope"]
    assert surrogate and all(r["verdict"] == "pass" and r["observed_gradient"] == [1.0, 1.0, 1.0] for r in surrogate)
    assert slope and all(r["verdict"] == "fail" and r["expected_failure"] for r in slope)
    in_ledger = {item["anchor"] for item in ledger.load(book_html) if item["page"] == "book/debugging.html"}
    assert {r["id"] for r in surrogate + slope} <= in_ledger
    x = torch.tensor([0.2, 1.3, -0.8], dtype=torch.float64)
    outcome = checks.check_jacobian(lambda x: x + (torch.round(x) - x).detach(), x).outcome
    assert outcome == "fail" and f"check_jacobian reports {outcome}" in " ".join(main_text(soup).split())


def test_control_flow_gives_the_gradient_of_the_branch_taken(book_html: Path) -> None:
    records = embedded_records(page(book_html, "book/debugging.html"))
    observed = {(r["check"], r["dtype"]): r["observed_gradient"] for r in records if r["device"] == "cpu"}
    for dtype in ("float32", "float64"):
        assert observed["branchy at 3: d/dx x² = 2·3", dtype] == 6.0
        assert observed["branchy at -2: d/dx (-x) = -1", dtype] == -1.0
    assert all(r["verdict"] == "pass" for r in records if r["check"].startswith("branchy"))
