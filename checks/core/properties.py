"""What a correct derivative also needs besides the right values: checks that gradcheck runs beside its
Jacobian comparison (reentrancy, undefined output gradients, batched gradients) and one that MyGrad's tests
run (f does not change its inputs). Each compares two computations element by element, per input element
(or per output element, for forward mode), named by input and index.

- not mutated: f called once on copies of its inputs; every tensor argument must be unchanged after the call.
- reentrant: two backward passes over one graph with the same grad_output (a random vector, seeded) give
  the same gradient, within nondet_tol (gradcheck: "Backward is not reentrant"); a backward that keeps state
  between calls, or is nondeterministic (atomics on a GPU), differs.
- undefined output gradients: with every output's gradient undefined, the backward runs and returns zeros
  (or nothing); with one output's gradient undefined and the others given, it returns what zeros in its
  place give, within torch.testing.assert_close's tolerance (gradcheck's check_undefined_grad). A backward that ignores its grad_output (returns the
  derivative itself, a common bug that a scalar output's Jacobian cannot show) fails the first. In forward
  mode, the same for an input's undefined tangent (per output element), within torch.testing.assert_close's
  tolerance, as gradcheck's torch.allclose: a jvp that skips an undefined tangent sums the rest in another order.
- linear: the backward of -8·v is -8 times the backward of v (v a random grad_output); in forward mode, the
  same of the jvp and a random tangent. A vector–Jacobian product is linear in v; a backward that is not
  (g.sign(), g.abs(), a clamp of g, a term without g) can give the right row at every unit vector, so no
  Jacobian built from them shows it. Scaling by a power of two commutes with rounding, so the two agree
  exactly (up to nondet_tol), whatever the backward's cancellations or precision, but where an algorithm
  chooses its steps by the vector's size (matrix_exp): √ε of the largest entry is allowed.
- the output gradient unchanged: the backward does not write into the grad_output it receives (a
  backward that does fails plain y.sum().backward(), whose grad_output is an expanded tensor).
- batched backward: torch.autograd.grad with is_grads_batched=True (vmap over the backward, as
  gradcheck's check_batched_grad) equals one backward per grad_output; in forward mode, torch.func.vmap over
  the Jacobian-vector product equals one per tangent. Compared with torch.testing.assert_close's
  tolerance for the dtype: two computations of one thing, not an estimate.

Two of torch's private names are used, as gradcheck uses them: torch._C._functions.UndefinedGrad (an
undefined output gradient) and torch._vmap_internals._vmap (the vmap of is_grads_batched).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol

import torch

from .batching import quiet_fallback
from .dtypes import dtype_name
from .errors import in_place_named
from .forward import first_line
from .outcome import Outcome
from .signature import Argument, Signature

# torch.testing.assert_close's defaults (rtol, atol): a batched and a looped backward compute the same thing.
SAME_COMPUTATION = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}
# The linearity check's factor: a power of two (exact in rounding) and negative (g.abs() is not odd), large
# enough that a clamp of g at 1 clips it.
SCALE = -8.0
# How many grad_outputs (tangents) the batched check stacks.
BATCH = 2
# Each check's failure, as a message's headline.
FAILURES = {
    "not mutated": "f changes its input in place",
    "reentrant": "The backward is not reentrant",
    "undefined output gradients": "The backward mishandles undefined output gradients",
    "undefined tangents": "The forward-mode derivative mishandles undefined tangents",
    "batched": "Batched gradients differ from one at a time",
    "linear": "The backward is not linear in its output gradient (g.sign(), g.abs(), a clamp of g, or a term "
              "without g)",
    "linear tangents": "The forward-mode derivative is not linear in its tangent (t.sign(), t.abs(), a clamp of "
                       "t, or a term without t)",
    "output gradient unchanged": "The backward changes its output gradient in place",
}
# A check whose run raised, as a message's headline.
RAISED = {
    "reentrant": "The backward cannot run twice over one graph",
    "undefined output gradients": "The backward fails on undefined output gradients",
    "undefined tangents": "The forward-mode derivative fails on undefined tangents",
    "batched": "Gradients cannot be batched",
    "linear": "The backward cannot run on a random output gradient",
    "linear tangents": "The forward-mode derivative cannot run on a random tangent",
}


class Checked(Protocol):
    """What the properties need of a signature.Signature (or SecondOrder)."""

    arguments: tuple[Argument, ...]
    outputs: tuple[Argument, ...]
    x: torch.Tensor

    def __call__(self, flat: torch.Tensor) -> torch.Tensor: ...

    def outputs_at(self, flat: torch.Tensor) -> list[torch.Tensor]: ...


@dataclass(frozen=True)
class PropertyElement:
    """One element where a property check compared two computations: what each gave, the verdict."""

    check: str
    argument: str
    index: tuple[int, ...]
    observed: float
    expected: float
    verdict: Outcome


@dataclass(frozen=True, eq=False)
class PropertyCheck:
    """One property, per element (flattened over `arguments`): observed against expected.

    name      -- "not mutated", "reentrant", "output gradient unchanged", "undefined output gradients",
                 "undefined tangents", "linear", "linear tangents" or "batched"
    failure   -- what a failure means, as a message's headline ("f changes its input in place")
    compared  -- in words, the two computations compared
    observed, expected -- per element, float64 on the CPU
    failing   -- per element, where the two differ beyond what is allowed
    allowed   -- in words, what difference was allowed
    error     -- what the run raised ("" when it ran): then every element fails
    seed      -- the seed of the random grad_outputs (tangents), None where none was drawn
    """

    name: str
    failure: str
    compared: str
    arguments: tuple[Argument, ...]
    observed: torch.Tensor
    expected: torch.Tensor
    failing: torch.Tensor
    allowed: str
    error: str = ""
    seed: int | None = None

    @cached_property
    def outcome(self) -> Literal["pass", "fail"]:
        return "fail" if self.error or bool(self.failing.any()) else "pass"

    def argument_of(self, column: int) -> Argument:
        return next(a for a in reversed(self.arguments) if a.offset <= column)

    def elements(self) -> list[PropertyElement]:
        """Every element, in order, with its verdict."""
        failing = self.failing.tolist()
        rows = []
        for column, (observed, expected) in enumerate(zip(self.observed.tolist(), self.expected.tolist())):
            argument = self.argument_of(column)
            verdict = "fail" if self.error or failing[column] else "pass"
            rows.append(PropertyElement(self.name, argument.name, argument.index(column), observed, expected,
                                        verdict))
        return rows

    def message(self, limit: int = 3) -> list[str]:
        """Lines for a failure message: what was compared, where it differed, by how much."""
        if self.outcome == "pass":
            return []
        if self.error:
            return [f"{RAISED.get(self.name, self.failure)}: {self.compared} raised {self.error}"]
        wrong = [e for e in self.elements() if e.verdict == "fail"]
        by_argument = dict.fromkeys(e.argument for e in wrong)
        lines = [f"{self.failure}: {self.compared} differ at {len(wrong)} of {self.observed.numel()} "
                 f"elements, in {', '.join(f'`{a}`' for a in by_argument)} ({self.allowed})"]
        lines += [f"  `{e.argument}`, element {e.index}: {_pair(e.observed, e.expected)}" for e in wrong[:limit]]
        if len(wrong) > limit:
            lines.append(f"  and {len(wrong) - limit} more")
        return lines


def _pair(observed: float, expected: float) -> str:
    """Both values, to as many digits as tell them apart, and their difference."""
    digits = 10 if f"{observed:.10g}" != f"{expected:.10g}" else 17
    return f"{observed:.{digits}g} vs {expected:.{digits}g}, difference {abs(observed - expected):.3g}"


def _differ(observed: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Beyond atol + rtol·|expected|; NaN against NaN (or the same infinity) is no difference."""
    same = (observed == expected) | (torch.isnan(observed) & torch.isnan(expected))
    close = (observed - expected).abs() <= atol + rtol * expected.abs()
    return ~(same | close)


def _cpu(values: torch.Tensor) -> torch.Tensor:
    return values.detach().reshape(-1).to(torch.float64).cpu()


def _random(count: int, like: torch.Tensor, seed: int, rows: int | None = None) -> torch.Tensor:
    """Uniform in [-1, 1] (as gradgradcheck's grad_outputs), seeded, drawn on the CPU for every device alike."""
    generator = torch.Generator().manual_seed(seed)
    shape = (count,) if rows is None else (rows, count)
    return (2 * torch.rand(shape, generator=generator, dtype=torch.float64) - 1).to(like)


def _check(name: str, compared: str, arguments: tuple[Argument, ...], observed: torch.Tensor,
           expected: torch.Tensor, failing: torch.Tensor, allowed: str, seed: int | None = None) -> PropertyCheck:
    return PropertyCheck(name, FAILURES[name], compared, arguments, observed, expected, failing, allowed, seed=seed)


def _nothing(name: str, compared: str, arguments: tuple[Argument, ...], allowed: str, seed: int | None = None,
             error: str = "") -> PropertyCheck:
    """A check with nothing to compare (no output depends on the inputs: it passes), or one whose run raised
    (error: it fails at every element)."""
    zeros = torch.zeros(sum(a.numel for a in arguments), dtype=torch.float64)
    return PropertyCheck(name, FAILURES[name], compared, arguments, zeros, zeros, zeros.bool(), allowed, error, seed)


def unmutated(names: Sequence[str], before: Sequence[object], after: Sequence[object]) -> PropertyCheck:
    """Every tensor argument of f unchanged by a call (a complex one compared part by part)."""
    compared, allowed = "f's tensor arguments after a call and before it", "no change allowed"
    arguments, observed, expected, failing, offset = [], [], [], [], 0
    for name, old, new in zip(names, before, after):
        if not isinstance(old, torch.Tensor):
            continue
        if old.is_sparse:  # compared as the dense tensors they stand for
            old, new = old.to_dense(), new.to_dense()
        parts = ((f"{name}.real", old.real, new.real), (f"{name}.imag", old.imag, new.imag)) if old.is_complex() \
            else ((name, old, new),)
        for part, first, second in parts:
            arguments.append(Argument(part, tuple(first.shape), offset))
            offset += first.numel()
            changed = second.reshape(-1) != first.reshape(-1)
            if first.is_floating_point():
                changed &= ~(torch.isnan(first.reshape(-1)) & torch.isnan(second.reshape(-1)))
            failing.append(changed.cpu())
            observed.append(_cpu(second))
            expected.append(_cpu(first))
    if not arguments:
        return _nothing("not mutated", compared, (), allowed)
    return _check("not mutated", compared, tuple(arguments), torch.cat(observed), torch.cat(expected),
                  torch.cat(failing), allowed)


@dataclass(frozen=True)
class Graph:
    """One forward at x with grad mode on (the checker runs under no_grad), shared by the backward checks."""

    leaf: torch.Tensor
    outputs: list[torch.Tensor]
    arguments: tuple[Argument, ...]
    output_arguments: tuple[Argument, ...]

    @classmethod
    def of(cls, signature: Checked) -> Graph:
        leaf = signature.x.detach().clone().requires_grad_(True)
        with torch.enable_grad(), in_place_named():
            return cls(leaf, signature.outputs_at(leaf), signature.arguments, signature.outputs)

    @property
    def value(self) -> torch.Tensor:
        return torch.cat([output.reshape(-1) for output in self.outputs])

    def gradient(self, outputs: Sequence[torch.Tensor], vectors: Sequence[torch.Tensor] | torch.Tensor,
                 **options: bool) -> torch.Tensor:
        """torch.autograd.grad of outputs at the leaf (zeros where autograd returns None), graph retained."""
        with in_place_named():
            (gradient,) = torch.autograd.grad(outputs, self.leaf, vectors, retain_graph=True, allow_unused=True,
                                              **options)
        return torch.zeros_like(self.leaf) if gradient is None else gradient


def reentrant(graph: Graph, seed: int, nondet_tol: float) -> tuple[PropertyCheck, PropertyCheck]:
    """Two backward passes over one graph with one random grad_output (each given its own copy) agree within
    nondet_tol; and the first left its copy of the grad_output as it was."""
    compared = "two backward passes over one graph with the same grad_output"
    allowed = f"nondet_tol={nondet_tol:g} allowed"
    kept, unchanged = "the grad_output after a backward pass and before it", "no change allowed"
    value = graph.value
    if not value.requires_grad:
        return (_nothing("reentrant", compared, graph.arguments, allowed, seed),
                _nothing("output gradient unchanged", kept, graph.output_arguments, unchanged, seed))
    v = _random(value.numel(), value, seed)
    given = v.clone()
    try:
        first = _cpu(graph.gradient(value, given))
        second = _cpu(graph.gradient(value, v.clone()))
    except RuntimeError as error:  # e.g. a backward that frees what a second pass needs
        return (_nothing("reentrant", compared, graph.arguments, allowed, seed, first_line(error)),
                _nothing("output gradient unchanged", kept, graph.output_arguments, unchanged, seed))
    after, before = _cpu(given), _cpu(v)
    return (_check("reentrant", compared, graph.arguments, second, first, _differ(second, first, 0.0, nondet_tol),
                   allowed, seed),
            _check("output gradient unchanged", kept, graph.output_arguments, after, before,
                   _differ(after, before, 0.0, 0.0), unchanged, seed))


def _scaled(observed: torch.Tensor, once: torch.Tensor, tolerance: float,
            dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, str]:
    """SCALE·once (expected) and where `observed`, the product along SCALE times the vector, differs from it.
    Scaling by a power of two commutes with rounding, so most linear products agree exactly; an algorithm
    that chooses its steps by the vector's size (matrix_exp's backward, by the norm of a block holding the
    grad_output) rounds otherwise. Allowed: √ε of the product's largest entry (half the digits: no rounding,
    a g.sign() or a clamp of g far beyond), nondet_tol three passes' worth, and the absolute rounding below
    float's normal range."""
    expected = SCALE * once
    both = torch.cat([observed, expected])
    finite = both[torch.isfinite(both)]
    largest = float(finite.abs().max()) if finite.numel() else 0.0
    half = math.sqrt(torch.finfo(dtype).eps)
    allowed = half * largest + 3 * tolerance + 64 * torch.finfo(dtype).tiny
    failing = _differ(observed, expected, 0.0, allowed)
    words = f"up to √ε = {half:.2g} of the largest entry, {allowed:.3g}"
    if tolerance:
        words += f", with 3 × nondet_tol={tolerance:g}"
    return expected, failing, f"{words}: a linear product scales exactly, but for rounding"


def linear(graph: Graph, seed: int, nondet_tol: float) -> PropertyCheck:
    """The backward of SCALE·v against SCALE times the backward of v, per input element, v random."""
    compared = f"the backward of {SCALE:g}·v and {SCALE:g} × the backward of v, v a random grad_output,"
    value = graph.value
    if not value.requires_grad:
        return _nothing("linear", compared, graph.arguments, "", seed)
    v = _random(value.numel(), value, seed + 1)
    try:
        once, observed = (_cpu(graph.gradient(value, vector)) for vector in (v, SCALE * v))
    except RuntimeError as error:
        return _nothing("linear", compared, graph.arguments, "", seed, first_line(error))
    expected, failing, allowed = _scaled(observed, once, nondet_tol, graph.leaf.dtype)
    return _check("linear", compared, graph.arguments, observed, expected, failing, allowed, seed)


def _tangents(signature: Checked, x: torch.Tensor, tangent: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """The outputs' tangents at x along `tangent` (dual numbers), flat, in x's dtype and on its device; zeros
    for an output (of `sizes` elements each) that has none."""
    fw = torch.autograd.forward_ad
    with fw.dual_level():
        found = [fw.unpack_dual(output).tangent for output in signature.outputs_at(fw.make_dual(x, tangent))]
    return torch.cat([torch.zeros(size, dtype=x.dtype, device=x.device) if t is None else t.reshape(-1)
                      for size, t in zip(sizes, found)])


def linear_tangents(signature: Signature, seed: int, nondet_tol: float) -> PropertyCheck:
    """Forward mode, per output element: the jvp of SCALE·u against SCALE times the jvp of u, u random."""
    compared = f"the Jacobian-vector products of {SCALE:g}·u and {SCALE:g} × that of u, u a random tangent,"
    x = signature.x.detach()
    u = _random(x.numel(), x, seed + 1)
    sizes = [o.numel for o in signature.outputs]
    try:
        once, observed = (_cpu(_tangents(signature, x, tangent, sizes)) for tangent in (u, SCALE * u))
    except (RuntimeError, TypeError) as error:
        return _nothing("linear tangents", compared, signature.outputs, "", seed, first_line(error))
    expected, failing, allowed = _scaled(observed, once, nondet_tol, x.dtype)
    return _check("linear tangents", compared, signature.outputs, observed, expected, failing, allowed, seed)


# Wraps an output so that its gradient reaches the backward undefined (None), as gradcheck's
# check_undefined_grad does; torch has no public spelling of it.
_UNDEFINED = torch._C._functions.UndefinedGrad
# The vmap that is_grads_batched runs, which (unlike torch.func.vmap) batches dual numbers: gradcheck's
# _test_batched_grad_forward_ad uses it the same way.
_legacy_vmap = torch._vmap_internals._vmap


def undefined_gradients(graph: Graph, seed: int) -> PropertyCheck:
    """The backward with every output's gradient undefined returns zeros (or none); with one undefined among
    several outputs, what a zero gradient in its place gives. The case that differs most is reported."""
    name = "undefined output gradients"
    # Every output's gradient undefined: exactly zeros. One undefined among given ones: what a zero in its place
    # gives, up to rounding (the backward sums the other outputs' terms in another order: linalg.eig's
    # gradients differ in the last digits).
    exact, (rtol, atol, rounding) = "no difference allowed", _same_computation(graph.leaf.dtype)
    allowed = exact
    used = [output for output in graph.outputs if output.requires_grad]
    if not used:
        return _nothing(name, "the backward with undefined output gradients", graph.arguments, allowed)
    vectors = [_random(output.numel(), output, seed + k).reshape(output.shape) for k, output in enumerate(used)]
    # (in words, the outputs whose gradient is given; the others' are undefined)
    cases: list[tuple[str, set[int]]] = [("zeros and the gradient with every output's gradient undefined", set())]
    if len(used) > 1:
        cases += [(f"the gradients with output {k}'s gradient undefined and zero", set(range(len(used))) - {k})
                  for k in range(len(used))]
    worst: tuple[float, torch.Tensor, torch.Tensor, torch.Tensor, str] | None = None
    for words, given in cases:
        seeds = [vector if k in given else torch.zeros_like(vector) for k, vector in enumerate(vectors)]
        try:
            observed = graph.gradient([o if k in given else _UNDEFINED()(o) for k, o in enumerate(used)], seeds)
            expected = graph.gradient(used, seeds) if given else torch.zeros_like(graph.leaf)
        except (RuntimeError, TypeError) as error:  # a custom backward that cannot take None
            return _nothing(name, f"the backward, for {words},", graph.arguments, allowed, seed, first_line(error))
        observed, expected = _cpu(observed), _cpu(expected)
        failing = _differ(observed, expected, rtol, atol) if given else _differ(observed, expected, 0.0, 0.0)
        size = float((observed - expected).abs().nan_to_num(float("inf")).max()) if failing.any() else 0.0
        if worst is None or size > worst[0]:
            worst = (size, observed, expected, failing, words, rounding if given else exact)
    _, observed, expected, failing, words, allowed = worst
    return _check(name, words, graph.arguments, observed, expected, failing, allowed, seed)


def undefined_tangents(signature: Signature, seed: int) -> PropertyCheck:
    """Forward mode, per output element: with one argument's tangent undefined (a plain tensor, no dual) and
    random tangents for the others, the outputs' tangents equal those with a zero tangent in its place
    (gradcheck's _test_undefined_forward_mode). The argument whose case differs most is reported."""
    fw = torch.autograd.forward_ad
    name = "undefined tangents"
    x = signature.x.detach()
    # Rounding allowed, as gradcheck's torch.allclose allows it: a jvp that skips an undefined tangent's
    # terms sums the rest in another order (native_group_norm's rstd differs by 4e-19 in float64).
    rtol, atol, allowed = _same_computation(x.dtype)
    pieces = signature.pieces(x)
    tangents = signature.pieces(_random(x.numel(), x, seed))
    sizes = [o.numel for o in signature.outputs]

    def jvp(undefined: int, zero: bool) -> torch.Tensor:
        with fw.dual_level():
            duals = [piece if k == undefined and not zero else
                     fw.make_dual(piece, torch.zeros_like(piece) if k == undefined else tangent)
                     for k, (piece, tangent) in enumerate(zip(pieces, tangents))]
            found = [fw.unpack_dual(output).tangent for output in signature.outputs_of(duals)]
        return torch.cat([torch.zeros(size, dtype=x.dtype, device=x.device) if t is None else t.reshape(-1)
                          for size, t in zip(sizes, found)])

    worst: tuple[float, torch.Tensor, torch.Tensor, torch.Tensor, str] | None = None
    for k, argument in enumerate(signature.arguments):
        words = f"the tangents with `{argument.name}`'s tangent undefined and zero"
        try:
            observed, expected = _cpu(jvp(k, zero=False)), _cpu(jvp(k, zero=True))
        except (RuntimeError, TypeError) as error:  # a custom jvp that cannot take None
            return _nothing(name, f"the forward-mode derivative, for {words},", signature.outputs, allowed, seed,
                            first_line(error))
        failing = _differ(observed, expected, rtol, atol)
        size = float((observed - expected).abs().nan_to_num(float("inf")).max()) if failing.any() else 0.0
        if worst is None or size > worst[0]:
            worst = (size, observed, expected, failing, words)
    _, observed, expected, failing, words = worst
    return _check(name, words, signature.outputs, observed, expected, failing, allowed, seed)


def _same_computation(dtype: torch.dtype) -> tuple[float, float, str]:
    rtol, atol = SAME_COMPUTATION[dtype]
    return rtol, atol, f"torch.testing.assert_close's rtol={rtol:g}, atol={atol:g} for {dtype_name(dtype)}"


def batched(graph: Graph, seed: int) -> PropertyCheck:
    """torch.autograd.grad with is_grads_batched=True (vmap over the backward) against one backward per
    grad_output, per input element."""
    compared = f"is_grads_batched=True over {BATCH} grad_outputs and one backward per grad_output"
    value = graph.value
    rtol, atol, allowed = _same_computation(graph.leaf.dtype)
    if not value.requires_grad:
        return _nothing("batched", compared, graph.arguments, allowed, seed)
    vectors = _random(value.numel(), value, seed, rows=BATCH)
    try:
        one_by_one = torch.stack([graph.gradient(value, v) for v in vectors])
        with quiet_fallback():
            together = graph.gradient(value, vectors, is_grads_batched=True)
    except RuntimeError as error:  # a backward vmap cannot batch (.item(), data-dependent control flow)
        return _nothing("batched", compared, graph.arguments, allowed, seed, first_line(error))
    return _worst_row(compared, graph.arguments, together, one_by_one, rtol, atol, allowed, seed)


def batched_forward(signature: Checked, seed: int) -> PropertyCheck:
    """vmap over a dual-number Jacobian-vector product against one product per tangent, per output element."""
    compared = f"vmap over the Jacobian-vector products of {BATCH} tangents and one product per tangent"
    x, outputs = signature.x.detach(), signature.outputs
    rtol, atol, allowed = _same_computation(x.dtype)
    sizes = [o.numel() for o in signature.outputs_at(x)]  # once: f at x, not again at every product

    def jvp(tangent: torch.Tensor) -> torch.Tensor:
        return _tangents(signature, x, tangent, sizes)

    tangents = _random(x.numel(), x, seed, rows=BATCH)
    try:
        one_by_one = torch.stack([jvp(t) for t in tangents])
        with quiet_fallback():
            together = _legacy_vmap(jvp)(tangents)
    except (RuntimeError, NotImplementedError) as error:
        return _nothing("batched", compared, outputs, allowed, seed, first_line(error))
    return _worst_row(compared, outputs, together, one_by_one, rtol, atol, allowed, seed)


def _worst_row(compared: str, arguments: tuple[Argument, ...], observed: torch.Tensor, expected: torch.Tensor,
               rtol: float, atol: float, allowed: str, seed: int) -> PropertyCheck:
    """Per element, the row of the batch where the two differ most."""
    observed, expected = (t.detach().to(torch.float64).cpu().reshape(BATCH, -1) for t in (observed, expected))
    failing = _differ(observed, expected, rtol, atol)
    row = (observed - expected).abs().nan_to_num(float("inf")).argmax(0, keepdim=True)
    return _check("batched", compared, arguments, observed.gather(0, row)[0], expected.gather(0, row)[0],
                  failing.any(0), allowed, seed)
