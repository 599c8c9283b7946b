"""A row of checks.raises shows PyTorch's error as a learner searches for it, its first sentence in view, and
the whole message a click away, every line of it (gradcheck's two Jacobians follow its first line)."""

from __future__ import annotations

import torch
from bs4 import BeautifulSoup

import checks
from checks.teaching import records, rows
from checks.teaching.mutants import mutant


# x³ with a backward that forgets the incoming gradient.
forgot = mutant(lambda x: x**3, lambda x, grad: 3 * x**2, "Forgot")


def test_an_error_of_several_lines_is_folded_whole_below_its_first_line() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with checks.raises(RuntimeError, "folded: gradcheck of a forgetful backward"):
        torch.autograd.gradcheck(forgot, (x,))
    record = records.collected()[-1]
    try:
        torch.autograd.gradcheck(forgot, (x,))
    except RuntimeError as error:
        message = str(error).strip()
    assert "\n" in message and "numerical" in message
    cell = BeautifulSoup(rows.rows_html([record]), "html.parser").select_one(
        "td.checks-observed_gradient details.checks-error")
    assert cell is not None
    assert cell.summary.get_text().startswith(f"GradcheckError: {message.splitlines()[0]}")
    assert cell.get_text().endswith(message.splitlines()[-1]) and "numerical" in cell.get_text()


def test_a_one_line_error_is_shown_as_it_is() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x**2
    with checks.raises(RuntimeError, "folded: backward of a vector"):
        y.backward()
    record = records.collected()[-1]
    assert rows.raised_whole(record) == "RuntimeError: grad can be implicitly created only for scalar outputs"
