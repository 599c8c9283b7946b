"""The chapters on non-scalar outputs, kinks and NaN, and hooks and custom Functions, read from the built
HTML: the plain PyTorch each shows, the real errors it captured (recomputed here with torch and found word
for word), its checks (executed, failed only where declared), no plumbing in view, no machine path, and
the numbers glued into its prose (recomputed here with plain PyTorch)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup
from torch.autograd.function import once_differentiable
from torch.autograd.gradcheck import GradcheckError

from checks.sphinx import ledger

from ..helpers import embedded_records, main_text, page, visible_code, without_exercises

NON_SCALAR = "book/non-scalar.html"
KINKS = "book/kinks-and-nan.html"
HOOKS = "book/hooks-and-functions.html"
CHAPTERS = (NON_SCALAR, KINKS, HOOKS)

# What a reader must never see in a visible cell: the book's own plumbing.
PLUMBING = ("glue", "HTML(", "records_html", "checks.display", "checks.mutants", "checks.sensitivity",
            "subprocess", "junitxml", "myst_nb", "TABLE =")
# Paths of the machine that built the book.
MACHINE_PATHS = re.compile(r"/tmp/|/work/|/home/|/root/|site-packages|\.venv|/usr/lib/python")


@pytest.fixture(scope="module")
def pages(book_html: Path) -> dict[str, BeautifulSoup]:
    return {name: page(book_html, name) for name in CHAPTERS}


def plain_text(soup: BeautifulSoup) -> str:
    """The page's main text as PyTorch writes it: Sphinx's curly quotes straightened, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", main_text(soup))
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    # Inline markup (a glued number, inline code) is joined to the text by a space: "(2, 4, 6) , the".
    return re.sub(r"(?<=\S) (?=[,.;:)])|(?<=[(\"]) (?=\S)", "", " ".join(text.split()))


def code(soup: BeautifulSoup) -> str:
    """The visible code without whitespace (highlighted code is split into tokens)."""
    return "".join(visible_code(soup).split())


def shown(message: str) -> str:
    return " ".join(message.split())


def error_of(call) -> str:
    try:
        call()
    except (RuntimeError, GradcheckError) as error:
        return str(error)
    raise AssertionError("no error was raised")


def listed(values: torch.Tensor) -> str:
    """A vector as the chapters' prose writes it: (2, -4, 3)."""
    return "(" + ", ".join(format(value, "g") for value in values.tolist()) + ")"


def records_of(soup: BeautifulSoup) -> list[dict]:
    return embedded_records(soup)


@pytest.mark.parametrize("name", CHAPTERS)
def test_checks_ran_and_failed_only_where_declared(pages: dict[str, BeautifulSoup], name: str) -> None:
    records = records_of(pages[name])
    assert records and all(record["executed"] for record in records)
    unexpected = [record["check"] for record in records if (record["verdict"] == "fail") != record["expected_failure"]]
    assert not unexpected, unexpected
    assert len({record["id"] for record in records}) == len(records)


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_plumbing_in_visible_cells_and_no_machine_path_on_the_page(book_html: Path, pages: dict[str, BeautifulSoup],
                                                                      name: str) -> None:
    visible = visible_code(pages[name])
    assert visible, name
    assert not [word for word in PLUMBING if word in visible], name
    html = (book_html / name).read_text(encoding="utf-8")
    assert not MACHINE_PATHS.findall(html), sorted(set(MACHINE_PATHS.findall(html)))


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_visible_cells_run_when_pasted_in_order(pages: dict[str, BeautifulSoup], name: str) -> None:
    # Code pasted in order runs: run the visible cells alone, in order, in a fresh namespace.
    namespace: dict = {}
    cells = [cell.get_text() for cell in pages[name].select("div.cell_input pre")]
    assert len(cells) >= 8, name
    for cell in cells:
        exec(compile(cell, name, "exec"), namespace)  # noqa: S102 (the book's own code)


# --- Non-scalar outputs -------------------------------------------------------------------------------------


def test_non_scalar_shows_the_plain_pytorch(pages: dict[str, BeautifulSoup]) -> None:
    visible = code(pages[NON_SCALAR])
    for call in ("requires_grad=True", "y.backward()", "y.backward(gradient=v)",
                 "torch.autograd.grad(y,x,grad_outputs=v)", "y.sum().backward()",
                 "torch.autograd.functional.jacobian(f,x)", "torch.func.jacrev(f)(x)", "torch.func.jacfwd(f)(x)",
                 "torch.func.vjp(f,x)", "torch.func.jvp(f,(x,),(u,))"):
        assert call in visible, call


def raised(records: list[dict], label: str) -> set[str]:
    """PyTorch's whole messages that the checks.raises rows of one label kept (one per dtype)."""
    return {record["message"].split("\n", 1)[1] for record in records
            if record["check"] == label and record["verdict"] == "pass" and record["message"].startswith("PyTorch raised")}


def test_non_scalar_keeps_pytorch_s_own_errors(pages: dict[str, BeautifulSoup]) -> None:
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    scalar = error_of(lambda: (x**2).backward())
    shape = error_of(lambda: (x**2).backward(gradient=torch.ones(2)))
    assert "grad can be implicitly created only for scalar outputs" in scalar
    records = records_of(pages[NON_SCALAR])
    assert raised(records, "y.backward(), three outputs") == {scalar}
    assert raised(records, "gradient= with 2 weights, 3 outputs") == {shape}
    # The row shows the message's first sentence in view, on the page a learner reads.
    assert "grad can be implicitly created only for scalar outputs" in plain_text(pages[NON_SCALAR])


def test_non_scalar_records_the_products_pytorch_computes(pages: dict[str, BeautifulSoup]) -> None:
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    (vjp,) = torch.autograd.grad(x**2, x, grad_outputs=v)
    A = torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]], dtype=torch.float64)
    _, jvp = torch.func.jvp(lambda t: A @ t, (x.detach(),), (torch.ones(3, dtype=torch.float64),))
    observed = {}
    for record in records_of(pages[NON_SCALAR]):
        observed.setdefault(record["check"], []).append(record["observed_gradient"])
    for label, value in (("y.backward(gradient=v): vᵀJ", vjp), ("autograd.grad(..., grad_outputs=v)", vjp),
                         ("y.sum().backward(): 1ᵀJ", 2 * x.detach()), ("torch.func.jvp: Au", jvp),
                         ("y.sum().backward(): column sums", A.sum(dim=0))):
        assert len(observed[label]) >= 2 and all(seen == value.tolist() for seen in observed[label]), label
    text = plain_text(pages[NON_SCALAR])
    assert f"Summing first gave {listed(A.sum(dim=0))}" in text
    assert "shape 2×3 (outputs × inputs)" in text
    assert "the VJP has 3 elements, one per input, the JVP 2, one per output" in text


def test_non_scalar_records_each_way_against_the_hand_written_jacobian(pages: dict[str, BeautifulSoup]) -> None:
    records = records_of(without_exercises(pages[NON_SCALAR]))
    hows = {record["how"] for record in records}
    assert {"stored", "returned", "jacrev", "jacfwd", "vjp", "jvp"} <= hows
    jacobians = [record for record in records if record["check"].endswith(": A")]
    assert len(jacobians) >= 3
    assert all(record["analytical_gradient"] == [[1, 2, 0], [0, -1, 3]] and record["verdict"] == "pass"
               for record in jacobians)
    assert {record["dtype"] for record in records} == {"float32", "float64"}
    errors = {record["check"] for record in records if record["gradient_formula"] == "raises RuntimeError"}
    assert errors == {"y.backward(), three outputs", "gradient= with 2 weights, 3 outputs"}
    assert not [record for record in records if record["expected_failure"]]


def test_non_scalar_softmax_sum_is_glued_as_large_as_it_was(pages: dict[str, BeautifulSoup]) -> None:
    # Issue 30: the prose said "at most 1e-16" of a largest element 1.477e-16.
    record = next(record for record in records_of(pages[NON_SCALAR])
                  if record["check"] == "y.sum().backward(): zeros" and record["dtype"] == "float64")
    largest = max(abs(value) for value in record["observed_gradient"])
    x = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.softmax(x, dim=0).sum().backward()
    assert largest == x.grad.abs().max().item() and largest > 0
    said = re.search(r"at most (\S+) in size in float64", plain_text(pages[NON_SCALAR]))
    assert said and said.group(1) == format(largest, ".2g")
    assert abs(float(said.group(1)) - largest) <= 0.05 * largest


# --- Kinks and NaN ------------------------------------------------------------------------------------------


def test_kinks_shows_the_plain_pytorch(pages: dict[str, BeautifulSoup]) -> None:
    visible = code(pages[KINKS])
    for call in ("torch.relu(x).sum().backward()", "torch.abs(x).sum().backward()", "torch.max(x).backward()",
                 "torch.amax(x,dim=0).backward()", "torch.max(x,dim=0)", "x.clamp(0,1).sum().backward()",
                 "torch.sqrt(x).backward()", "y=torch.where(x>0,torch.sqrt(x),0.0)",
                 "torch.where(positive,x,1.0)", "torch.sqrt(x.clamp(min=0))",
                 "torch.autograd.gradcheck(torch.relu,(x,))", "torch.autograd.gradcheck(torch.abs,(x,))",
                 "checks.check_jacobian(f,x)"):
        assert call in visible, call


def _grad(function, values, dtype=torch.float64) -> torch.Tensor:
    x = torch.tensor(values, dtype=dtype, requires_grad=True)
    function(x).sum().backward()
    return x.grad


def test_kinks_glues_the_gradients_pytorch_returns(pages: dict[str, BeautifulSoup]) -> None:
    text = plain_text(pages[KINKS])
    relu0 = _grad(torch.relu, [0.0]).item()
    abs0 = _grad(torch.abs, [0.0]).item()
    assert (relu0, abs0) == (0.0, 0.0)  # the minimum-norm subgradients the chapter writes down first
    ties = [1.0, 3.0, 3.0]
    # The rows of relu, abs and the ties hold what PyTorch stores today (the prose names no number of them).
    stored = {"relu'(x), 0 at the kink": _grad(torch.relu, [-1.0, 0.0, 2.0]),
              "abs'(x) = sign(x)": _grad(torch.abs, [-1.0, 0.0, 2.0]),
              "max(x) at a tie": _grad(torch.max, ties), "amax(x, dim=0) at a tie": _grad(lambda t: t.amax(0), ties),
              "max(x, dim=0) at a tie": _grad(lambda t: t.max(dim=0).values, ties)}
    for label, value in stored.items():
        rows = [row for row in _rows(pages[KINKS], label) if row["dtype"] == "float64"]
        assert rows and all(row["observed_gradient"] == value.tolist() and row["verdict"] == "pass"
                            for row in rows), (label, rows)
    assert f"clamp stored {listed(_grad(lambda t: t.clamp(0, 1), [-0.5, 0.0, 0.5, 1.0, 1.5]))}" in text
    points = [-1.0, 0.0, 4.0]
    trap = _grad(lambda t: torch.where(t > 0, torch.sqrt(t), 0.0), points)
    assert trap[:2].isnan().all()
    safe = _grad(lambda t: torch.where(t > 0, torch.sqrt(torch.where(t > 0, t, 1.0)), 0.0), points)
    clamped = _grad(lambda t: torch.sqrt(t.clamp(min=0)), points)
    assert f"on the output alone gave {listed(trap)}" in text
    assert f"on the input too gave {listed(safe)}" in text
    assert f"clamping gave {listed(clamped)}" in text
    hardtanh = _grad(torch.nn.functional.hardtanh, [-1.0, 0.0, 1.0])
    assert f"hardtanh stored {listed(hardtanh)}" in text


def _rows(soup: BeautifulSoup, label: str) -> list[dict]:
    return [record for record in records_of(soup) if record["check"] == label]


def test_kinks_checks_run_in_both_dtypes_and_sqrt_s_infinity_is_matched_by_the_same_infinity(
        pages: dict[str, BeautifulSoup]) -> None:
    for label in ("relu'(x), 0 at the kink", "abs'(x) = sign(x)", "max(x) at a tie", "max(x, dim=0) at a tie",
                  "clamp: the bounds count as inside", "where on sqrt's input too"):
        rows = _rows(pages[KINKS], label)
        assert {row["dtype"] for row in rows} == {"float32", "float64"}, label
        assert all(row["verdict"] == "pass" for row in rows), label
    records = _rows(pages[KINKS], "sqrt'(0) = 1/(2·0) = inf")
    assert {record["dtype"] for record in records} == {"float32", "float64"}
    assert all(record["verdict"] == "pass" and record["observed_gradient"] == float("inf")
               and record["analytical_gradient"] == float("inf") for record in records)
    # clamp, then sqrt: the infinity at the bound is expected, and observed, in every dtype.
    assert all(record["observed_gradient"] == [0.0, float("inf"), 0.25] and record["verdict"] == "pass"
               for record in _rows(pages[KINKS], "clamp, then sqrt"))


def test_kinks_records_gradcheck_s_error_and_the_checker_s_outcome(book_html: Path,
                                                                  pages: dict[str, BeautifulSoup]) -> None:
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    relu_error = error_of(lambda: torch.autograd.gradcheck(torch.relu, (x,)))
    assert torch.autograd.gradcheck(torch.abs, (x,))
    # The raises row: gradcheck named as what raised, PyTorch's message kept whole (in the reader's float32 run
    # the message is word for word the one recomputed here; the float64 run prints its tensors without dtype=).
    raised = _rows(pages[KINKS], "gradcheck(torch.relu, (x,))")
    assert raised and all(record["verdict"] == "pass" and record["how"] == "gradcheck"
                          and "Jacobian mismatch" in record["message"] for record in raised)
    assert any(shown(relu_error) in shown(record["message"]) for record in raised)
    text = plain_text(pages[KINKS])
    assert f"For relu gradcheck raised with {relu_error.splitlines()[0].rstrip(',')} (the rest" in text
    assert ("The check of relu is inconclusive (reason kink), and so is the check of abs: inconclusive, reason kink"
            in text)
    assert "for abs it returned True" in text
    # The library calls reach the ledger with their outcome: gradcheck's two, check_jacobian's inconclusives.
    records = [record for record in ledger.load(book_html)
               if record["page"].endswith(KINKS.rsplit("/", 1)[-1]) and not record["exercise"]]
    gradcheck = [record for record in records if record["checker"] == "gradcheck"]
    assert {(record["function"], record["verdict"], record["expected_failure"]) for record in gradcheck} == {
        ("torch.relu", "fail", True), ("torch.abs", "pass", False)}
    judged = [record for record in records if record["checker"] == "check_jacobian"]
    assert judged and all(record["verdict"] == "inconclusive" and record["expected_inconclusive"]
                          for record in judged)
    assert {record["function"].rsplit(".", 1)[-1] for record in judged} == {"relu", "abs"}
    # The central difference at relu's kink averages the two slopes: 1/2, where autograd's backward gives 0.
    central = _rows(pages[KINKS], "relu, central")
    assert {record["dtype"] for record in central} == {"float32", "float64"}
    assert all(record["how"] == "numerical" and record["observed_gradient"] == [0.0, 0.5, 1.0]
               and record["verdict"] == "pass" for record in central)


def test_kinks_declares_exactly_the_failures_the_prose_predicts(pages: dict[str, BeautifulSoup]) -> None:
    records = records_of(pages[KINKS])
    declared = {record["check"] for record in records if record["expected_failure"] and not record.get("checker")}
    assert declared == {"where on sqrt's output", "clamp: the minimum-norm rule", "by hand, at 0"}
    for label in declared:
        assert all(record["verdict"] == "fail" for record in _rows(pages[KINKS], label)), label


# --- Hooks and custom Functions -----------------------------------------------------------------------------


def test_hooks_shows_the_plain_pytorch(pages: dict[str, BeautifulSoup]) -> None:
    visible = code(pages[HOOKS])
    for call in ("h.register_hook(seen.append)", "h.register_hook(lambdagrad:grad.clamp(-5,5))", "h.retain_grad()",
                 "handle=x.register_hook(lambdagrad:grad.sum())", "handle.remove()",
                 "classHypot(torch.autograd.Function):", "defforward(x,y):", "defsetup_context(ctx,inputs,output):",
                 "ctx.save_for_backward(x,y,output)", "ctx.saved_tensors", "ctx.needs_input_grad[0]",
                 "@once_differentiable", "Hypot.apply(x,y)", "defforward(ctx,x,y):",
                 "torch.autograd.gradcheck(Hypot.apply,(x64,y64))", "checks.assert_gradients(Hypot.apply",
                 "torch.func.jacrev(Hypot.apply)(x,y)", "generate_vmap_rule=True",
                 "torch.func.vmap(HypotBatched.apply)(x,y)", "torch.func.jacfwd(HypotBatched.apply)(x,y)",
                 "returnx/r,y/r#grad_rforgotten"):
        assert call in visible, call


class _Hypot(torch.autograd.Function):
    """The chapter's Hypot, written again here to recompute PyTorch's errors."""

    @staticmethod
    def forward(x, y):
        return torch.sqrt(x * x + y * y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs, output)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_r):
        x, y, r = ctx.saved_tensors
        return grad_r * x / r, grad_r * y / r


class _OneStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        r = torch.sqrt(x * x + y * y)
        ctx.save_for_backward(x, y, r)
        return r

    @staticmethod
    def backward(ctx, grad_r):
        x, y, r = ctx.saved_tensors
        return grad_r * x / r, grad_r * y / r


class _Forgot(_Hypot):
    @staticmethod
    def backward(ctx, grad_r):
        x, y, r = ctx.saved_tensors
        return x / r, y / r


class _Batched(_Hypot):
    generate_vmap_rule = True


def any_error_of(call) -> str:
    """The message of whatever call raises (NotImplementedError too)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 (the test compares the message, whatever its type)
        return f"{type(error).__name__}: {str(error).strip()}"
    raise AssertionError("no error was raised")


def raised_whole(records: list[dict], label: str) -> set[str]:
    """'Type: PyTorch's whole message' of the checks.raises rows of one label (one per dtype), as kept."""
    found = set()
    for record in records:
        if record["check"] == label and record["verdict"] == "pass" and record["message"].startswith("PyTorch raised"):
            first, whole = record["message"].split("\n", 1)
            found.add(first.removeprefix("PyTorch raised ").split(":", 1)[0] + ": " + whole)
    return found


def test_hooks_keeps_pytorch_s_own_errors(pages: dict[str, BeautifulSoup]) -> None:
    x = torch.tensor([3.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([4.0, 1.0, 0.5], dtype=torch.float64)
    (first,) = torch.autograd.grad((_Hypot.apply(x, y) ** 2).sum(), x, create_graph=True)
    x64, y64 = x.detach().requires_grad_(), y.clone().requires_grad_()
    leaf = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    leaf.register_hook(lambda grad: grad.sum())
    expected = {
        "jacrev(HypotOldStyle)": any_error_of(lambda: torch.func.jacrev(_OneStep.apply)(x, y)),
        "Hypot: a second derivative": any_error_of(lambda: first.sum().backward()),
        "gradcheck(HypotForgot)": any_error_of(lambda: torch.autograd.gradcheck(_Forgot.apply, (x64, y64))),
        "a hook returning one number": any_error_of(lambda: ((leaf * leaf) ** 2).sum().backward()),
        "jacfwd(Hypot)": any_error_of(lambda: torch.func.jacfwd(_Hypot.apply)(x, y)),
        "jacfwd(HypotBatched)": any_error_of(lambda: torch.func.jacfwd(_Batched.apply)(x, y)),
    }
    # The reader's run (float32 the default dtype, as here): a float64 run prints tensors without their dtype.
    # gradcheck's raise reads float64 tensors in every run: its one row is float64.
    records = [record for record in records_of(pages[HOOKS]) if record["dtype"] == "float32"
               or record["check"] == "gradcheck(HypotForgot)"]
    assert [r["dtype"] for r in records if r["check"] == "gradcheck(HypotForgot)"] == ["float64"]
    for label, message in expected.items():
        # PyTorch names the Function's class: the chapter's is Hypot where this file's is _Hypot.
        message = message.replace("_Hypot", "Hypot").replace("_Batched", "HypotBatched")
        assert raised_whole(records, label) == {message}, label
    assert "setup_context" in expected["jacrev(HypotOldStyle)"]
    assert "once_differentiable" in expected["Hypot: a second derivative"]
    assert "Jacobian mismatch" in expected["gradcheck(HypotForgot)"]


def test_hooks_transforms_are_stated_as_torch_func_behaves(pages: dict[str, BeautifulSoup]) -> None:
    # Issue 30: the page said the setup_context style "works with the transforms of torch.func (jacrev, jacfwd,
    # grad, vmap)"; without a batching rule it fails vmap and jacfwd, and jacfwd needs a jvp as well.
    x = torch.tensor([3.0, 1.0, -2.0], dtype=torch.float64)
    y = torch.tensor([4.0, 1.0, 0.5], dtype=torch.float64)
    r = torch.sqrt(x**2 + y**2)
    assert torch.allclose(torch.func.jacrev(_Hypot.apply)(x, y), torch.diag(x / r))
    assert torch.allclose(torch.func.grad(lambda t: _Hypot.apply(t, y).sum())(x), x / r)
    assert "vmap support" in any_error_of(lambda: torch.func.vmap(_Hypot.apply)(x, y))
    assert "vmap support" in any_error_of(lambda: torch.func.jacfwd(_Hypot.apply)(x, y))
    assert torch.allclose(torch.func.vmap(_Batched.apply)(x, y), r)
    assert "jvp" in any_error_of(lambda: torch.func.jacfwd(_Batched.apply)(x, y))
    records = records_of(pages[HOOKS])
    by_label = {}
    for record in records:
        by_label.setdefault(record["check"], []).append(record)
    for label, how in (("jacrev(Hypot)", "jacrev"), ("vmap(HypotBatched): r", "forward")):
        assert {(record["verdict"], record["how"]) for record in by_label[label]} == {("pass", how)}, label
        assert {record["dtype"] for record in by_label[label]} == {"float32", "float64"}
    assert {record["how"] for record in by_label["jacfwd(Hypot)"] + by_label["jacfwd(HypotBatched)"]} == {"jacfwd"}
    text = plain_text(pages[HOOKS])
    assert "Only the first works with the transforms" not in text
    assert "generate_vmap_rule = True" in text and "jvp" in text


def test_hooks_records_the_gradients_pytorch_computes(pages: dict[str, BeautifulSoup]) -> None:
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    seen = []
    h = x * x
    h.register_hook(seen.append)
    (h * h).sum().backward()
    hooked = x.grad.clone()
    x.grad = None
    h = x * x
    h.retain_grad()
    h.register_hook(lambda grad: grad.clamp(-5, 5))
    (h * h).sum().backward()
    expected = {"h's hook got 2h": seen[0], "x.grad: 4x³": hooked, "h.grad, retain_grad() first": h.grad,
                "x.grad, h's hook clips": x.grad}
    records = records_of(pages[HOOKS])
    for label, value in expected.items():
        observed = [record["observed_gradient"] for record in records if record["check"] == label]
        assert len(observed) == 2 and all(item == value.tolist() for item in observed), label
    assert {record["how"] for record in records if record["check"] == "h's hook got 2h"} == {"hook"}
    text = plain_text(pages[HOOKS])
    assert "the check of the buggy backward says pass" in text and "With weights it says fail, as declared" in text


def test_hooks_records_the_custom_function_and_the_declared_failures(pages: dict[str, BeautifulSoup]) -> None:
    records = records_of(without_exercises(pages[HOOKS]))
    failures = {record["check"] for record in records if record["expected_failure"] and not record["checker"]}
    assert failures == {"HypotForgot, weighted"}
    summed = [record for record in records if record["check"] == "HypotForgot, summed"]
    assert len(summed) == 2 and all(record["verdict"] == "pass" for record in summed)
    custom = [record for record in records if record["check"].startswith("Hypot, ")]
    assert {record["dtype"] for record in custom} == {"float32", "float64"}
    assert all(record["verdict"] == "pass" and "class Hypot" not in record["code"]["cell"] for record in custom)
    assert all(record["x"] == [3.0, 1.0, -2.0] for record in custom)
