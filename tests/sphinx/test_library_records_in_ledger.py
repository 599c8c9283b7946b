"""A chapter's calls of the checker library reach ledger.json as records with their outcome, inconclusive
included, without the chapter wrapping them; `python -m checks` lists a declared inconclusive and reports an
undeclared one (a scratch book, built as a reader builds it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.sphinx import ledger

from ..conftest import build_book
from ..helpers import page, verify
from .test_build_behaviour import CHAPTER_HEADER
from .test_ledger_builds import small_book

pytestmark = pytest.mark.kernels  # see tests/conftest.py: it waits for the session's book build

# The first call comes before the chapter imports anything of the teaching API: the kernel's start-up
# subscribes the ledger to the library's reports.
CHAPTER = CHAPTER_HEADER + """# Library

```{code-cell} ipython3
import torch
import checks
x = torch.tensor([0.5, 1.5], dtype=torch.float64)
checks.check_jacobian(torch.sin, x).outcome
```

```{code-cell} ipython3
:tags: [remove-cell]
from checks.teaching.library import declare
declare("checks.check_jacobian(torch.relu, kink)", "inconclusive")
```

```{code-cell} ipython3
kink = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
(checks.check_jacobian(torch.relu, kink).outcome,
 checks.check_jacobian(torch.abs, kink).outcome)
```
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("library")
    return build_book(output, small_book(output / "src", {"library": CHAPTER}))


def test_each_library_call_is_a_ledger_record_with_its_outcome(built: Path) -> None:
    items = ledger.load(built)
    assert [item["code"]["call"] for item in items] == ["checks.check_jacobian(torch.sin, x)",
                                                          "checks.check_jacobian(torch.relu, kink)",
                                                          "checks.check_jacobian(torch.abs, kink)"]
    assert [item["outcome"] for item in items] == ["pass", "inconclusive", "inconclusive"]
    assert [item["status"] for item in items] == ["pass", "expected inconclusive", "unexpected inconclusive"]
    assert all(item["checker"] == "check_jacobian" and item["anchor"] == "" for item in items)
    assert [item["function"] for item in items] == ["torch.sin", "torch.relu", "torch.abs"]


def test_python_dash_m_checks_lists_the_declared_inconclusive_and_reports_the_undeclared_one(built: Path) -> None:
    result = verify(built)
    assert result.returncode == 1, result.stdout + result.stderr
    declared, problems = result.stdout.split("weak pass", 1)
    assert "1 declared inconclusive:" in declared and "checks.check_jacobian(torch.relu, kink)" in declared
    assert "unexpected inconclusive: checks.check_jacobian(torch.abs, kink)" in problems
    assert "torch.relu" not in problems


def test_the_ledger_page_counts_the_inconclusives(built: Path) -> None:
    summary = page(built, "book/ledger.html").select_one("div.checks-ledger-summary")
    counts = {" ".join(item.get_text().split()[1:]): int(item.strong.get_text()) for item in summary.select("li")}
    assert counts == {"unexpected inconclusive": 1, "expected inconclusive": 1, "pass": 1}
    assert "1 inconclusive" not in summary.p.get_text() and "2 inconclusive" in summary.p.get_text()
