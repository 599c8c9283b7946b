"""requires_grad_() on a tensor made earlier is named as what raised, not "the constructor" (grad-is-none's
integer tensor asked later to require grad)."""

from __future__ import annotations

import checks
from checks.teaching import records
from checks.teaching.rows import line


def _raised(code: str, tmp_path) -> records.Record:
    path = tmp_path / f"cell{len(list(tmp_path.iterdir()))}.py"  # linecache keeps a file's first text
    path.write_text("import torch, checks\nn = torch.tensor(3)\nwith checks.raises(RuntimeError):\n"
                    f"    {code}\n")
    exec(compile(path.read_text(), str(path), "exec"), {})
    return records.collected()[-1]


def test_requires_grad_on_an_integer_tensor_made_earlier_is_what_raised(tmp_path) -> None:
    record = _raised("n.requires_grad_()", tmp_path)
    assert (record.verdict, record.how) == ("pass", "requires_grad_")
    assert "requires_grad_() raised RuntimeError" in line(record)


def test_the_constructor_still_raises_for_requires_grad_true(tmp_path) -> None:
    record = _raised("torch.tensor(3, requires_grad=True)", tmp_path)
    assert (record.verdict, record.how) == ("pass", "constructor")
    # Chained on the constructor, it is requires_grad_() that raises: the tensor itself was made.
    assert _raised("torch.tensor(3).requires_grad_()", tmp_path).how == "requires_grad_"


def test_a_value_made_with_requires_grad_is_the_forwards() -> None:
    import torch

    x = torch.tensor(3.0).requires_grad_()
    checks.expect(x.requires_grad, True, "requires_grad_ value")
    assert records.collected()[-1].how == "forward"
