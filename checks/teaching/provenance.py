"""Provenance read off the reader's code: which statement produced a value, or raised.

A row's `how` says what produced its value, or what raised instead:

- a value: "stored" (a .grad read after backward()), "returned" (what torch.autograd.grad returned;
  "create_graph" with create_graph=True), torch.func's "jacrev" / "jacfwd" / "vjp" / "jvp" / "hessian",
  "forward" (computed by the reader's forward: y, or a tensor's property such as x.is_leaf), "node" (what a
  node of the graph returned, called by hand: y.grad_fn(v), or a node reached by next_functions);
- an error: "constructor" (torch.tensor(..., requires_grad=True) and the other factories),
  "requires_grad_" (t.requires_grad_() on a tensor made earlier), "forward",
  "in-place" (x -= ..., x[0] = ..., x.add_(...)), "stored" (backward() raised), "returned" (autograd.grad
  raised), "gradcheck" (torch.autograd.gradcheck raised: the backward disagrees with the forward),
  "conversion" (y.numpy(), y.item(), y.tolist() raised), "checks" (a call of the book's checks raised),
  "node" (a node called by hand raised), "saved" (reading a node's saved tensor, y.grad_fn._saved_self, raised).

Both are read from the statement's source: the cell's text (IPython keeps it in linecache, and so does
checks.teaching.cells for its re-runs) or the script's file. At a plain Python prompt there is no source; an
error is then classified by the PyTorch function it passed through (Tensor.backward, torch.autograd.grad), else
by PyTorch's message where it is unambiguous, and a value is "unknown".
"""

from __future__ import annotations

import ast
import linecache
import os
import re
import textwrap
from collections.abc import Sequence
from types import FrameType, TracebackType

import torch

from ..core.dtypes import dtype_name

# Words for the ways checks.teaching.display does not name: a value the forward computed, or none known.
OTHER_WORDS = {
    "forward": "computed by the forward",
    "node": "returned by a grad_fn called by hand",
    "unknown": "how it was produced is unknown (no source to read)",
}
# Which statement raised, and what it then did not deliver.
RAISER_WORDS = {
    "constructor": ("the constructor", "nothing made"),
    "requires_grad_": ("requires_grad_()", "nothing changed"),
    "forward": ("the forward", "nothing computed"),
    "conversion": ("the conversion", "nothing converted"),
    "checks": ("the checks call", "nothing returned"),
    "in-place": ("an in-place statement", "nothing changed"),
    "stored": ("backward()", "nothing stored"),
    "returned": ("torch.autograd.grad", "nothing returned"),
    "create_graph": ("torch.autograd.grad", "nothing returned"),
    "jacrev": ("torch.func.jacrev", "nothing returned"),
    "jacfwd": ("torch.func.jacfwd", "nothing returned"),
    "vjp": ("torch.func.vjp", "nothing returned"),
    "jvp": ("torch.func.jvp", "nothing returned"),
    "hessian": ("torch.func.hessian", "nothing returned"),
    "gradcheck": ("torch.autograd.gradcheck", "nothing returned"),
    "node": ("a grad_fn called by hand", "nothing returned"),
    "saved": ("reading a saved tensor", "nothing read"),
    "unknown": ("a statement", "nothing delivered"),
}

# Calls that make a tensor (a leaf, when they say requires_grad=True).
FACTORIES = {"tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "rand", "randn", "randint",
             "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like", "full_like", "empty_like",
             "rand_like", "randn_like", "Parameter"}
FUNC_CALLS = ("hessian", "jacfwd", "jacrev", "jvp", "vjp")
# A tensor turned into a NumPy array or Python numbers: a statement that raises there computed nothing.
CONVERSIONS = {"numpy", "item", "tolist"}
# Without source, PyTorch's own words say which statement raised (only where they are unambiguous).
MESSAGES = (
    ("Only Tensors of floating point and complex dtype can require gradients", "constructor"),
    ("a leaf Variable that requires grad is being used in an in-place operation", "in-place"),
    ("Trying to backward through the graph a second time", "stored"),
    ("does not require grad and does not have a grad_fn", "stored"),
    ("grad can be implicitly created only for scalar outputs", "stored"),
)
_TORCH = os.path.dirname(torch.__file__)
_CHECKS = os.path.dirname(os.path.dirname(__file__))
_STDLIB = os.path.dirname(os.__file__)


def _called(node: ast.AST) -> list[str]:
    """The names of the calls in a statement: torch.autograd.grad(...) -> 'autograd.grad', y.backward() -> 'backward'."""
    names = []
    for item in ast.walk(node):
        if isinstance(item, ast.Call):
            function = item.func
            if isinstance(function, ast.Attribute):
                owner = function.value
                prefix = owner.attr + "." if isinstance(owner, ast.Attribute) else (
                    owner.id + "." if isinstance(owner, ast.Name) else "")
                names.append(prefix + function.attr)
            elif isinstance(function, ast.Name):
                names.append(function.id)
    return names


def _creates_graph(node: ast.AST) -> bool:
    return any(isinstance(item, ast.keyword) and item.arg == "create_graph" and isinstance(item.value, ast.Constant)
               and item.value.value is True for item in ast.walk(node))


def statement_kind(node: ast.AST) -> str:
    """What a statement does, as a way of producing (or failing to produce) a value; see the module doc."""
    calls = _called(node)
    last = [name.rsplit(".", 1)[-1] for name in calls]
    if "backward" in last:
        return "stored"
    if "autograd.grad" in calls or ("grad" in calls and "grad" in last):
        return "create_graph" if _creates_graph(node) else "returned"
    for name in FUNC_CALLS:
        if name in last:
            return name
    if "gradcheck" in last:
        return "gradcheck"
    if "requires_grad_" in last:
        return "requires_grad_"  # asks an existing tensor to require grad: it constructs nothing
    if isinstance(node, ast.AugAssign) or _assigns_into(node) or any(
            name.endswith("_") and not name.endswith("__") and name != "requires_grad_" for name in last):
        return "in-place"
    if any(name in FACTORIES for name in last):
        return "constructor"
    return "forward"


def _assigns_into(node: ast.AST) -> bool:
    """x[0] = ... or x.data = ...: a write into an existing tensor."""
    return isinstance(node, ast.Assign) and any(isinstance(target, (ast.Subscript, ast.Attribute))
                                                for target in node.targets)


def source_lines(filename: str) -> list[str]:
    return linecache.getlines(filename)


def statement_at(source: str, lineno: int) -> ast.stmt | None:
    """The innermost simple statement of source that covers line lineno (1-based)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= lineno <= (node.end_lineno or node.lineno):
            if found is None or (node.lineno >= found.lineno and (node.end_lineno or 0) <= (found.end_lineno or 0)):
                found = node
    return found


def _is_user(filename: str) -> bool:
    return not (filename.startswith(_TORCH) or filename.startswith(_CHECKS) or filename.startswith(_STDLIB))


def raising_statement(traceback: TracebackType | None, history: Sequence[str] = ()) -> tuple[str, str]:
    """(source, kind) of the reader's statement that raised: the deepest frame of the reader's own code.

    The kind is read from the very expression that raised, where Python says which (its instruction's
    position): in `torch.ones(2, requires_grad=True) @ w` the product raised, not the constructor.
    """
    chosen = None
    while traceback is not None:
        if _is_user(traceback.tb_frame.f_code.co_filename):
            chosen = traceback
        traceback = traceback.tb_next
    if chosen is None:
        return "", "unknown"
    source = "".join(source_lines(chosen.tb_frame.f_code.co_filename))
    node = statement_at(source, chosen.tb_lineno) if source else None
    if node is None:
        return "", "unknown"
    part = _raising_part(node, chosen)
    kind = (_outer_call_kind(part) or _graph_kind(part, [source, *history])
            or (statement_kind(node) if part is None else _part_kind(part, node)))
    return ast.get_source_segment(source, node) or "", kind


def _graph_kind(part: ast.AST | None, history: Sequence[str]) -> str:
    """A raising expression that reads the graph itself: a node's saved tensor ("saved"), or a node called by
    hand ("node"); '' for any other."""
    if isinstance(part, ast.Attribute) and part.attr.startswith("_saved_"):
        return "saved"
    if isinstance(part, ast.Call) and _is_node(part.func, history):
        return "node"
    return ""


def _is_node(function: ast.AST, history: Sequence[str]) -> bool:
    """The called expression is a node of the graph: a grad_fn, a node of next_functions, or a name bound to
    one (mul = y.grad_fn)."""
    def reads_graph(node: ast.AST) -> bool:
        return any(isinstance(item, ast.Attribute) and item.attr in ("grad_fn", "next_functions")
                   for item in ast.walk(node))

    if isinstance(function, ast.Name):
        bound = _binding(function.id, history)
        return isinstance(bound, ast.Assign) and reads_graph(bound.value)
    return reads_graph(function)


def _calls_node(node: ast.AST, history: Sequence[str], seen: frozenset[str] = frozenset()) -> bool:
    """The statement (or expression) calls a node of the graph by hand, or computes from names bound to what one
    returned (by_hand = via_sin + d_x after via_sin = sin_node(d_s))."""
    if any(isinstance(item, ast.Call) and _is_node(item.func, history) for item in ast.walk(node)):
        return True
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else node
    if value is None or any(isinstance(item, ast.Call) for item in ast.walk(value)):
        return False  # only arithmetic on earlier results is followed back, not what a call made of them
    names = {item.id for item in ast.walk(value) if isinstance(item, ast.Name) and isinstance(item.ctx, ast.Load)}
    for name in sorted(names - seen):
        bound = _binding(name, history)
        if bound is not None and bound is not node and _calls_node(bound, history, seen | names):
            return True
    return False


def _outer_call_kind(part: ast.AST | None) -> str:
    """A raising call that neither computes nor differentiates: a conversion (y.numpy()) or a call of the
    book's checks, named by the call itself, not by what its arguments call ('' for any other)."""
    if not isinstance(part, ast.Call) or not isinstance(part.func, (ast.Attribute, ast.Name)):
        return ""
    if _last_called(part) in CONVERSIONS:  # ast.walk visits the call itself first
        return "conversion"
    return "checks" if _called(part)[0].startswith("checks.") else ""


def read_where(statement: str, frame: FrameType) -> tuple[str, str] | None:
    """The dtype and device of the floating-point (or complex) tensors a statement read, where they agree: a
    row of `torch.relu(z)` is z's complex128 in every run, not the run's default dtype. None when it read none
    (a constructor), or several that differ."""
    try:
        tree = ast.parse(textwrap.dedent(statement))
    except SyntaxError:
        return None
    places = set()
    # A tensor read through a cast (x.double(), x.to(torch.float64)) is read in the cast's dtype: its receiver
    # holds another one.
    casts = {id(node.func.value): node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in _CASTS}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        value = _looked_up(node.id, frame)
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
            where = (dtype_name(value.dtype), value.device.type)
            if id(node) in casts:
                where = _cast(casts[id(node)], where, frame)
                if where is None:
                    return None
            places.add(where)
    return places.pop() if len(places) == 1 else None


# Tensor methods that change a tensor's dtype or device: to its dtype (None: read from the arguments) and device.
_CASTS: dict[str, tuple[str | None, str | None]] = {
    "double": ("float64", None), "float": ("float32", None), "half": ("float16", None),
    "bfloat16": ("bfloat16", None), "cfloat": ("complex64", None), "cdouble": ("complex128", None),
    "cpu": (None, "cpu"), "cuda": (None, "cuda"), "to": (None, None), "type": (None, None)}


def _cast(call: ast.Call, where: tuple[str, str], frame: FrameType) -> tuple[str, str] | None:
    """(dtype, device) of a tensor after the cast call, from where it was; None where the arguments do not say
    (a dtype held in a variable the frame does not name, an integer dtype)."""
    dtype, device = where
    to_dtype, to_device = _CASTS[call.func.attr]  # type: ignore[union-attr]
    if call.func.attr in ("cpu", "cuda"):  # type: ignore[union-attr]
        return dtype, to_device or device
    if to_dtype is not None:
        return to_dtype, device
    for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
        named = _looked_up(ast.unparse(argument), frame) if isinstance(argument, (ast.Name, ast.Attribute)) else (
            argument.value if isinstance(argument, ast.Constant) else None)
        if isinstance(named, torch.dtype):
            if not (named.is_floating_point or named.is_complex):
                return None
            dtype = dtype_name(named)
        elif isinstance(named, torch.device):
            device = named.type
        elif isinstance(named, str):  # a device ("cuda:0"), or a tensor type's name for .type()
            try:
                device = torch.device(named).type
            except RuntimeError:
                return None
        elif isinstance(named, torch.Tensor):  # x.to(other): other's dtype and device
            dtype, device = dtype_name(named.dtype), named.device.type
        else:
            return None
    return dtype, device


def _raising_part(node: ast.stmt, traceback: TracebackType) -> ast.AST | None:
    """The expression of node at the position of the instruction that raised (None when unknown)."""
    positions = list(traceback.tb_frame.f_code.co_positions())
    index = traceback.tb_lasti // 2
    if not 0 <= index < len(positions) or None in positions[index]:
        return None
    line, end_line, column, end_column = positions[index]
    found = None
    for item in ast.walk(node):  # breadth first: the last match is the innermost (an Expr's own expression)
        if (getattr(item, "lineno", None), getattr(item, "col_offset", None), getattr(item, "end_lineno", None),
                getattr(item, "end_col_offset", None)) == (line, column, end_line, end_column):
            found = item
    return found


def _part_kind(part: ast.AST, statement: ast.stmt) -> str:
    """What the raising expression is: a call (by its name), a write into a tensor, or the forward's arithmetic."""
    if isinstance(part, ast.Call):
        return statement_kind(ast.Expr(part))
    if part is statement and isinstance(statement, ast.AugAssign) or (
            isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(part.ctx, ast.Store)):
        return "in-place"
    if part is statement:
        return statement_kind(statement)
    return "forward"


def raised_kind(traceback: TracebackType | None, message: str, history: Sequence[str] = ()) -> tuple[str, str]:
    """(statement, kind) of what raised: from the source, else from PyTorch's message, else unknown. history: the
    sources of earlier cells, newest first, where a name the statement calls was bound (mul = y.grad_fn)."""
    statement, kind = raising_statement(traceback, history)
    if kind == "unknown":
        kind = _torch_entry(traceback) or next((found for words, found in MESSAGES if words in message), "unknown")
    return statement, kind


def _torch_entry(traceback: TracebackType | None) -> str:
    """Without source: which of PyTorch's Python entry points the error passed through first ('' if none)."""
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code.co_filename.startswith(_TORCH):
            autograd = os.path.join(_TORCH, "autograd")
            if code.co_name == "backward":
                return "stored"
            if code.co_name == "grad" and code.co_filename.startswith(autograd):
                return "returned"
            return ""
        traceback = traceback.tb_next
    return ""


# Values ------------------------------------------------------------------------------------------------


def call_arguments(frame: FrameType, name: str) -> tuple[str, list[str], dict[str, str]]:
    """(statement source, source of each positional argument, of each keyword argument) of the call to `name`
    on the frame's line; empty where there is no source."""
    source = "".join(source_lines(frame.f_code.co_filename))
    node = statement_at(source, frame.f_lineno) if source else None
    if node is None:
        return "", [], {}
    for item in ast.walk(node):
        if isinstance(item, ast.Call) and _called(item)[:1] and _called(item)[0].rsplit(".", 1)[-1] == name:
            return (ast.get_source_segment(source, node) or "",
                    [ast.get_source_segment(source, argument) or "" for argument in item.args],
                    {keyword.arg: ast.get_source_segment(source, keyword.value) or ""
                     for keyword in item.keywords if keyword.arg})
    return ast.get_source_segment(source, node) or "", [], {}


def value_kind(expression: str, value: object, uses: Sequence[object], history: Sequence[str]) -> str:
    """How the value an expression names was produced (see the module doc).

    uses    -- the objects the calling code can name: a value that *is* the .grad of one of them (a tensor, a
               module's parameter, an optimizer's tensor) was stored by backward();
    history -- sources to search, newest first, for the statement that bound a name (the cell so far, and the
               cells before it).
    """
    from .witness import is_stored_grad

    if isinstance(value, torch.Tensor) and is_stored_grad(value, uses):
        return "stored"
    try:
        node = ast.parse(expression.strip(), mode="eval").body if expression.strip() else None
    except SyntaxError:
        node = None
    if node is None:
        return "unknown"
    if isinstance(node, ast.Attribute) and node.attr == "grad":
        return "stored"  # .grad read (None there: nothing stored yet)
    if isinstance(node, ast.Name):
        bound = _binding(node.id, history)
        if bound is None:
            return "unknown"
        func = _func_subject(bound, history)
        if func is not None:
            return func[2]
        node = bound
    if _calls_node(node, history):
        return "node"
    kind = statement_kind(node)
    if kind == "forward" and any(isinstance(item, ast.Attribute) and item.attr == "grad" for item in ast.walk(node)):
        return "stored"  # g = x.grad.clone()
    return "forward" if kind in ("constructor", "requires_grad_", "in-place") else kind


def _binding(name: str, history: Sequence[str]) -> ast.AST | None:
    """The last statement, in the newest source that has one, that assigns name."""
    for source in history:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        found = None
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = {item.id for target in targets for item in ast.walk(target) if isinstance(item, ast.Name)}
                if name in bound and (found is None or node.lineno >= found.lineno):
                    found = node
        if found is not None:
            return found
    return None


def source_before(frame: FrameType) -> str:
    """The calling file's (or cell's) source up to the end of the calling statement (a call may span lines)."""
    lines = source_lines(frame.f_code.co_filename)
    node = statement_at("".join(lines), frame.f_lineno) if lines else None
    return "".join(lines[:max(frame.f_lineno, getattr(node, "end_lineno", 0) or 0)])


def words(how: str, observed: object = 0) -> str:
    """How a value was produced, in the words of the book's tables (checks.teaching.display.HOW_WORDS)."""
    from .display import HOW_WORDS

    if how == "stored" and observed is None:
        return "read from .grad: none there"
    return HOW_WORDS.get(how) or OTHER_WORDS.get(how, how)


def raised_words(how: str, error: str) -> str:
    """'backward() raised RuntimeError: nothing stored'."""
    raiser, missing = RAISER_WORDS.get(how, (how, "nothing delivered"))
    return f"{raiser} raised {error}: {missing}"


def simple_name(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# The function and input a gradient is of --------------------------------------------------------------


def subject(expression: str, frame: FrameType, history: Sequence[str]) -> tuple[str, torch.Tensor | None]:
    """(f, x) of the gradient an expression names, read off the reader's code: ("x * x", the tensor x) for
    x.grad after `y = x * x; y.backward()`, and for g after `(g,) = torch.autograd.grad(y, x)`. f is the
    output backward() or autograd.grad was given, with the names bound in the code before it written out
    once (y.sum() after y = torch.sigmoid(x) is torch.sigmoid(x).sum()). For a name bound to anything else
    (estimate = (f(x + h) - f(x)) / h), (what it was bound to, None). ("", None) where the code does not say."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body if expression.strip() else None
    except SyntaxError:
        return "", None
    output = leaf = None
    if isinstance(node, ast.Attribute) and node.attr == "grad" and _dotted(node.value):
        leaf = ast.unparse(node.value)  # x, or a module's parameter: model.weight
        output = _last_backward(history)
    elif isinstance(node, ast.Name):
        bound = _binding(node.id, history)
        func = _func_subject(bound, history) if bound is not None else None
        if func is not None:  # what torch.func computed of f at x: ("f(x)", x)
            output, leaf, _ = func
            value = _looked_up(leaf, frame)
            return (_written_out(output, leaf, history), value) if isinstance(value, torch.Tensor) else ("", None)
        call = next((item for item in ast.walk(bound) if isinstance(item, ast.Call)
                     and _called(item)[:1] in (["autograd.grad"], ["grad"]) and len(item.args) >= 2), None) \
            if bound is not None else None
        if call is not None:
            output = call.args[0]
            inputs = _sole(call.args[1])
            leaf = inputs.id if isinstance(inputs, ast.Name) else None
        elif isinstance(bound, ast.Assign) and len(bound.targets) == 1 and isinstance(bound.targets[0], ast.Name):
            # Not a gradient autograd gave (a difference quotient, say): f is what the code computed it from,
            # and x is the check's at=. An estimate of a function the code defined names that function's body.
            value = bound.value
            called = getattr(value.func, "attr", getattr(value.func, "id", "")) if isinstance(value, ast.Call) else ""
            if called in ("estimate_gradient", "estimate_jacobian") and value.args and isinstance(value.args[0], ast.Name):
                body = _returned(value.args[0].id, history)
                if body is not None:
                    return ast.unparse(body), None
            return ast.unparse(value), None
    value = _looked_up(leaf, frame) if leaf else None
    if output is None or not isinstance(value, torch.Tensor):
        return "", None
    function = _written_out(output, leaf, history)
    if isinstance(value, torch.nn.Parameter):
        # A module's parameter is where the loss is differentiated, not where it was asked for: the input is
        # the data the loss reads (x in model(x).sum()), as at=(model, x, y) gives it.
        names = sorted((name for name in ast.walk(ast.parse(function, mode="eval")) if isinstance(name, ast.Name)),
                       key=lambda name: name.col_offset)  # as written: X before Y in (model(X) - Y)
        data = (_looked_up(name.id, frame) for name in names)
        value = next((item for item in data if isinstance(item, torch.Tensor)
                      and not isinstance(item, torch.nn.Parameter)), value)
    return function, value


def _returned(name: str, history: Sequence[str]) -> ast.AST | None:
    """What the newest `def name(...)` in the code returns, where its body is one return (a docstring and
    comments aside); None otherwise."""
    for source in history:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name]
        if found:
            body = [item for item in found[-1].body
                    if not (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant))]
            return body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    return None


def _dotted(node: ast.AST) -> bool:
    """A name, or attributes of one (model.weight)."""
    return isinstance(node, ast.Name) or isinstance(node, ast.Attribute) and _dotted(node.value)


def _looked_up(dotted: str, frame: FrameType) -> object:
    """The object a dotted name names in the frame (None where it names nothing): read, never evaluated."""
    first, *attributes = dotted.split(".")
    value = frame.f_locals.get(first, frame.f_globals.get(first))
    for attribute in attributes:
        value = getattr(value, attribute, None)
    return value


def _last_backward(history: Sequence[str]) -> ast.AST | None:
    """The tensor the newest backward() call in the code was called on (y for y.backward())."""
    for source in history:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        calls = [item for item in ast.walk(tree) if isinstance(item, ast.Call) and isinstance(item.func, ast.Attribute)
                 and item.func.attr == "backward"]
        if calls:
            return max(calls, key=lambda call: (call.lineno, call.col_offset)).func.value
    return None


def _written_out(output: ast.AST, leaf: str, history: Sequence[str]) -> str:
    """The output's source with each name (but the input's) replaced once by what the code bound it to."""

    class Expand(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.AST:  # noqa: N802 (ast's naming)
            bound = _binding(name.id, history) if name.id != leaf.split(".")[0] else None
            if isinstance(bound, ast.Assign) and len(bound.targets) == 1 and isinstance(bound.targets[0], ast.Name):
                return bound.value
            return name

    return ast.unparse(Expand().visit(ast.parse(ast.unparse(output), mode="eval")))


def _last_called(call: ast.Call) -> str:
    """The last part of the first name _called finds in a call: 'jacrev' for torch.func.jacrev(f); '' if none."""
    names = _called(call)
    return names[0].rsplit(".", 1)[-1] if names else ""


def _sole(inputs: ast.AST) -> ast.AST:
    """The one element of a one-element tuple or list of inputs, (x,); the node itself otherwise."""
    return inputs.elts[0] if isinstance(inputs, (ast.Tuple, ast.List)) and len(inputs.elts) == 1 else inputs


def _func_subject(bound: ast.AST, history: Sequence[str]) -> tuple[ast.AST, str, str] | None:
    """(f(x), x, kind) of a value torch.func gave: J = torch.func.jacrev(f)(x), _, jvp = torch.func.jvp(f, (x,),
    (u,)), or (vjp,) = vjp_fn(v) after _, vjp_fn = torch.func.vjp(f, x). None for any other statement."""
    for call in (item for item in ast.walk(bound) if isinstance(item, ast.Call)):
        inner = call.func
        kind = _last_called(inner) if isinstance(inner, ast.Call) else ""
        if kind in ("jacrev", "jacfwd", "hessian") and inner.args and call.args and isinstance(call.args[0], ast.Name):
            return ast.Call(func=inner.args[0], args=call.args, keywords=[]), call.args[0].id, kind
        name = _last_called(call)
        if name in ("jvp", "vjp") and len(call.args) >= 2:
            inputs = _sole(call.args[1])
            if isinstance(inputs, ast.Name):
                return ast.Call(func=call.args[0], args=[inputs], keywords=[]), inputs.id, name
        if isinstance(call.func, ast.Name):
            made = _binding(call.func.id, history)  # vjp_fn(v): the function torch.func.vjp returned
            if made is not None and made is not bound and any(
                    isinstance(item, ast.Call) and _called(item)[:1] and _called(item)[0].endswith("vjp")
                    for item in ast.walk(made)):
                return _func_subject(made, history)
    return None
