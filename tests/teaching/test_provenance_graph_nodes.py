"""A value a node of the graph returned, called by hand, is named as such, not as the forward's; and reading a
saved tensor after backward() freed it, or calling a node then, is named as what raised (issue 30's chapter on
what backward() does, one node at a time)."""

from __future__ import annotations

import torch

import checks
from checks.teaching import records
from checks.teaching.provenance import words
from checks.teaching.rows import line


def last() -> records.Record:
    return records.collected()[-1]


def test_what_a_node_called_by_hand_returns_is_the_node_s() -> None:
    x = torch.tensor(2.0, requires_grad=True)
    s = torch.sin(x)
    y = s * x
    mul_node = y.grad_fn
    sin_node = mul_node.next_functions[0][0]
    d_s, d_x = mul_node(torch.ones_like(y))
    checks.expect(d_x, lambda x: torch.sin(x), "nodes: ∂y/∂x direct", at=x)
    assert (last().how, last().verdict) == ("node", "pass")
    via_sin = sin_node(d_s)
    checks.expect(via_sin, lambda x: x * torch.cos(x), "nodes: via sin", at=x)
    assert last().how == "node"
    by_hand = via_sin + d_x  # computed from what nodes returned
    checks.expect(by_hand, lambda x: torch.sin(x) + x * torch.cos(x), "nodes: by hand", at=x)
    assert (last().how, last().verdict) == ("node", "pass")
    assert words(last().how) == "returned by a grad_fn called by hand"  # the row's "observed how"
    checks.expect(y.grad_fn(2 * torch.ones_like(y))[1], lambda x: 2 * torch.sin(x), "nodes: direct call", at=x)
    assert last().how == "node"
    # A saved tensor read is the forward's value; the forward itself is still the forward.
    checks.expect(mul_node._saved_self, lambda x: torch.sin(x), "nodes: saved sin x", at=x)
    assert last().how == "forward"
    checks.expect(s, lambda x: torch.sin(x), "nodes: the forward's s", at=x)
    assert last().how == "forward"
    # A call of something else on what a node returned is that call's, not the node's.
    checks.expect(torch.cos(by_hand), lambda x: torch.cos(torch.sin(x) + x * torch.cos(x)), "nodes: cos", at=x)
    assert last().how == "forward"


def _raised(code: str, tmp_path) -> records.Record:
    path = tmp_path / f"cell{len(list(tmp_path.iterdir()))}.py"  # linecache keeps a file's first text
    path.write_text("import torch, checks\nx = torch.tensor(2.0, requires_grad=True)\ny = torch.sin(x) * x\n"
                    "mul_node = y.grad_fn\ny.backward()\nwith checks.raises(RuntimeError):\n"
                    f"    {code}\n")
    exec(compile(path.read_text(), str(path), "exec"), {})
    return last()


def test_a_freed_saved_tensor_read_or_a_node_called_after_backward_is_what_raised(tmp_path) -> None:
    read = _raised("mul_node._saved_self", tmp_path)
    assert (read.verdict, read.how) == ("pass", "saved")
    assert "reading a saved tensor raised RuntimeError" in line(read)
    assert "Trying to backward through the graph a second time" in read.message
    called = _raised("mul_node(torch.ones_like(y))", tmp_path)
    assert (called.verdict, called.how) == ("pass", "node")
    assert "a grad_fn called by hand raised RuntimeError" in line(called)
    # backward() a second time is still backward()'s.
    assert _raised("y.backward()", tmp_path).how == "stored"
