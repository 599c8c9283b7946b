"""Autograd's side of a check: its Jacobian (reverse or forward mode), the property checks of the
derivatives it used, and the outputs cut off from the inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch

from .batching import direction, quiet_fallback, reproduces
from .dtypes import dtype_name
from .errors import in_place_named
from .forward import first_line, flat_jacobian, forward_jacobian
from .properties import (
    Graph,
    PropertyCheck,
    batched,
    batched_forward,
    linear,
    linear_tangents,
    reentrant,
    undefined_gradients,
    undefined_tangents,
)
from .signature import SecondOrder, Signature

Mode = Literal["reverse", "forward"]
MODES: tuple[Mode, ...] = ("reverse", "forward")
# Up to this many outputs, reverse mode runs one backward per output; beyond, the backwards are batched
# (torch.autograd.grad with is_grads_batched), the identity it is seeded with this many elements at a time.
FEW_OUTPUTS = 4
BATCHED_ROWS_LIMIT = 4_000_000
# Where f has more outputs than checked inputs, the columns of its backward's Jacobian instead.
DOUBLE_BACKWARD = "torch.autograd.grad of f's backward with respect to its output gradient, one column per input"


def autograd_jacobian(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, mode: Mode, outputs: int,
                       order: int = 1, name: str = "f") -> tuple[torch.Tensor, Mode, str, str]:
    """Autograd's Jacobian as (outputs, inputs) float64 on the CPU, the mode and the function that made it,
    and why a fallback happened ("" when none).

    Reverse mode is plain autograd, what loss.backward() runs: one forward, then the rows of the Jacobian
    from torch.autograd.grad, batched over the outputs (is_grads_batched) where there are more than a few,
    one backward per output otherwise or where the backward cannot be batched; where f has more outputs
    than checked inputs, the columns of the backward's own Jacobian instead. A table not made one backward
    per output must give what one plain backward of a random output gradient gives (_the_backward_s), else
    one backward per output makes it: what is checked is what the backward returns. (torch.func.jacrev would
    give the same rows, but imports torch._dynamo on first use, about a second in every fresh process.)
    Forward mode is checks.core.forward's (jacfwd, or dual numbers); for order 2, f is a vector–Jacobian
    product that calls autograd inside, which only dual numbers can differentiate (forward-over-reverse).
    Where f has no forward-mode derivative, NoForwardModeError names it (`name`): no fallback.
    """
    note = ""
    if mode == "forward":
        jacobian, method, note = forward_jacobian(f, x, outputs, name=name, transforms=order == 1,
                                                  differentiable=order == 2)
        return jacobian, mode, method, note
    leaf = x.clone().requires_grad_(True)
    with in_place_named():
        value = f(leaf)
        if not value.requires_grad:  # no output depends on x: a zero Jacobian, as autograd defines it
            return torch.zeros(outputs, x.numel(), dtype=torch.float64), "reverse", "torch.autograd.grad", note
        if outputs > FEW_OUTPUTS and x.numel() < outputs:
            try:
                columns = _columns_by_double_backward(value, leaf, x)
            except (RuntimeError, NotImplementedError) as error:  # a backward that cannot be differentiated
                note = f"f's backward could not be differentiated ({first_line(error)}); one row per output instead"
            else:
                if _the_backward_s(columns, value, leaf):
                    return columns, "reverse", DOUBLE_BACKWARD, note
                note = (f"f's backward differs from its own derivative with respect to the output gradient by "
                        f"more than {dtype_name(leaf.dtype)}'s rounding (a term that ignores the output gradient, "
                        f"a value computed outside autograd or in a lower precision); the backward's own rows instead")
        if outputs > FEW_OUTPUTS:
            try:
                # The identity it is seeded with, BATCHED_ROWS_LIMIT elements of it at a time, into one float64
                # table (numpy's: see _finite).
                block, jacobian = max(1, BATCHED_ROWS_LIMIT // outputs), np.zeros((outputs, x.numel()))
                for begin in range(0, outputs, block):
                    count = min(block, outputs - begin)
                    seeds = torch.zeros(count, outputs, dtype=value.dtype, device=value.device)
                    seeds[torch.arange(count), torch.arange(begin, begin + count)] = 1
                    with quiet_fallback():
                        (rows,) = torch.autograd.grad(value, leaf, seeds, retain_graph=True, is_grads_batched=True,
                                                      allow_unused=True)
                    if rows is not None:
                        jacobian[begin:begin + count] = flat_jacobian(rows, x).numpy()
                if _the_backward_s(torch.from_numpy(jacobian), value, leaf):
                    return (torch.from_numpy(jacobian), "reverse", "torch.autograd.grad with is_grads_batched=True",
                            note)
                note = "; ".join(filter(None, [note, f"the rows of torch.autograd.grad with is_grads_batched=True "
                                                     f"differ from a plain backward by more than "
                                                     f"{dtype_name(leaf.dtype)}'s rounding (a batching rule that does "
                                                     f"not hold for f's backward, or a backward that rounds in a "
                                                     f"lower precision); one backward per output instead"]))
            except (RuntimeError, NotImplementedError) as error:  # a backward vmap cannot batch
                note = "; ".join(filter(None, [note, f"torch.autograd.grad could not batch f's backward "
                                                     f"({first_line(error)}); one backward per output instead"]))
        rows = [torch.autograd.grad(value[i], leaf, retain_graph=i + 1 < outputs, allow_unused=True)[0]
                for i in range(outputs)]
    rows = [torch.zeros_like(x) if row is None else row for row in rows]
    return flat_jacobian(torch.stack(rows), x), "reverse", "torch.autograd.grad", note


def _columns_by_double_backward(value: torch.Tensor, leaf: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The Jacobian of f's backward, column by column, where f has more outputs than checked inputs (a
    sample of a large x): a backward's vᵀ·J is linear in v, so its derivative with respect to v along e_j
    is column j of the very J the backward computes. One backward of the backward per column, instead of one
    backward per output. That holds only for a backward linear in v and all inside autograd, which
    _the_backward_s checks of the result: a term that ignores v, a gradient computed in numpy, or a write
    whose derivative is not its value (gx[idx] += g with idx repeated) break it."""
    v = torch.zeros_like(value, requires_grad=True)
    (row,) = torch.autograd.grad(value, leaf, v, create_graph=True, allow_unused=True)
    if row is None:
        return torch.zeros(value.numel(), x.numel(), dtype=torch.float64)
    if not row.requires_grad:  # vᵀ·J does not depend on v: the backward returned a constant
        raise RuntimeError("the backward's result does not depend on the output gradient")
    columns = []
    for j in range(x.numel()):
        (column,) = torch.autograd.grad(row[j], v, retain_graph=True, allow_unused=True)
        columns.append(torch.zeros_like(value) if column is None else column.reshape(-1))
    return torch.stack(columns, 1).detach().to(torch.float64).cpu()


def _the_backward_s(jacobian: torch.Tensor, value: torch.Tensor, leaf: torch.Tensor) -> bool:
    """Whether a Jacobian obtained other than by one backward per output (the backward differentiated, or
    batched by vmap) is the backward's own: vᵀ·J against one plain backward of a random v."""
    v = direction(value.numel(), value.dtype)
    (plain,) = torch.autograd.grad(value, leaf, v.to(value.device).reshape(value.shape), retain_graph=True,
                                   allow_unused=True)
    plain = torch.zeros(leaf.numel(), dtype=torch.float64) if plain is None else flat_jacobian(plain, leaf)[0]
    return reproduces(jacobian.T, v, plain, leaf.dtype)


def detached_outputs(g: Signature | SecondOrder, graph: Graph | None) -> tuple[str, ...]:
    """The names of f's outputs that do not require grad at the inputs (first order)."""
    if not isinstance(g, Signature):
        return ()
    graph = Graph.of(g) if graph is None else graph
    return tuple(dict.fromkeys(a.name.removesuffix(".real").removesuffix(".imag")
                               for a, output in zip(g.outputs, graph.outputs) if not output.requires_grad))


def derivative_properties(g: Signature | SecondOrder, mode: Mode, seed: int, nondet_tol: float,
                           undefined: bool, vectorized: bool, graph: Graph | None = None) -> tuple[PropertyCheck, ...]:
    """The property checks of the derivatives the check used: reentrancy, an unchanged output gradient and
    undefined output gradients of the backward (reverse mode); undefined tangents (forward mode, first order:
    second order's tangents enter f's backward through one flat vector); linearity in the vector; batched
    gradients on request (either mode)."""
    checks = []
    if mode == "forward":
        if isinstance(g, Signature):
            if undefined:
                checks.append(undefined_tangents(g, seed))
            checks.append(linear_tangents(g, seed, nondet_tol))
        if vectorized:
            checks.append(batched_forward(g, seed))
        return tuple(checks)
    graph = Graph.of(g) if graph is None else graph
    checks.extend(reentrant(graph, seed, nondet_tol))
    if undefined:
        checks.append(undefined_gradients(graph, seed))
    checks.append(linear(graph, seed, nondet_tol))
    if vectorized:
        checks.append(batched(graph, seed))
    return tuple(checks)
