"""Fast mode: the Jacobian seen through random projections, as gradcheck's fast_mode sees it.

gradcheck's fast mode (torch/autograd/gradcheck.py, `_fast_gradcheck`) draws a random vector u per input and v
per output and compares one number per input–output pair, vᵀ·J·u: autograd's (a vector–Jacobian product vᵀ·J,
then a dot with u; in forward mode a Jacobian-vector product J·u, then a dot with v) against a central
difference of f along u projected on v. Its cost no longer grows with the number of elements: O(1)
evaluations of f per input instead of two per element.

Here the projections are a function of their own, F(s)_o = v_o · f_o(x + Σ_i s_i·u_i) (one variable s_i per
checked input, one output per output of f), whose Jacobian at s = 0 is exactly the matrix of projections
P_oi = v_oᵀ·J_oi·u_i. The checker then treats F as it treats any f: autograd differentiates F (through f's own
backward, or its forward-mode derivative), the adaptive Richardson search estimates F's Jacobian along each
direction with its error estimate, kink test and confirmation, and every projection gets one of the three
outcomes with an allowance derived from the estimate, as an element does in the full check.

- u and v are drawn uniformly from [-1, 1] (signed, unlike gradcheck's non-negative ones: with non-negative
  vectors the projection of a Jacobian whose entries take both signs cancels toward 0, where a wrong sign
  no longer shows), with the check's seed, on the CPU for every device alike, and rounded to x's dtype,
  so that autograd and the estimate project on the very same vectors.
- A point x + s·u is computed in float64 and rounded once to x's dtype, as the full check's points are;
  F's outputs are summed in float64 from f's outputs, so that the projection adds no rounding of its own
  in float32.
- The rounding of F's evaluations is bounded by ε·Σ_r |v_r|·|f_r(x)| (the rounding of f's outputs that the
  projection sums; the projection F(0) itself may cancel toward 0 and say nothing of it) beside what the
  estimate measures (its error estimate across windows).

A fail says that some element of the block J_oi is wrong, not which: rerun without fast=True to find it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .properties import Graph
from .signature import Argument, SecondOrder, Signature


@dataclass(frozen=True)
class Projections:
    """What a fast check compared: per checked input a direction u, per output a vector v, from the seed.

    inputs, outputs -- the checked inputs and outputs of f, as a full check names them (one projection per pair)
    u, v            -- the vectors, flat over the inputs' (outputs') elements, float64 on the CPU
    seed            -- the seed they were drawn with
    """

    inputs: tuple[Argument, ...]
    outputs: tuple[Argument, ...]
    u: torch.Tensor
    v: torch.Tensor
    seed: int

    def describe(self) -> str:
        """In words, what an "element" of the report is."""
        return (f"each element is a projection vᵀ·J·u of the Jacobian block of one output and one input "
                f"({len(self.outputs)} × {len(self.inputs)}), not a Jacobian entry: u and v uniform in [-1, 1] "
                f"with seed {self.seed}, one u per input and one v per output")


class Projection:
    """f seen through random projections: F(s)_o = v_o · f_o(x + Σ_i s_i·u_i), at s = 0 (one s_i per
    checked input). Offers what the checker reads of a Signature: arguments, outputs, x, value, call,
    skipped, shown(), calling it, outputs_at()."""

    def __init__(self, inner: Signature | SecondOrder, seed: int) -> None:
        self.inner = inner
        x = inner.x.detach()
        self.dtype = x.dtype
        generator = torch.Generator().manual_seed(seed)
        u = _uniform(x.numel(), generator, x.dtype)
        v = _uniform(inner.value.numel(), generator, x.dtype)
        # (elements, inputs) and (outputs' elements, outputs): u and v placed in their input's (output's) column.
        self._u = (_segments(inner.arguments, x.numel()) * u[:, None]).to(x.device)
        self._v = (_segments(inner.outputs, inner.value.numel()) * v[:, None]).to(x.device)
        self._x = x.to(torch.float64)
        self.projections = Projections(inner.arguments, inner.outputs, u, v, seed)
        self.arguments = tuple(Argument(a.name, (), k) for k, a in enumerate(inner.arguments))
        self.outputs = tuple(Argument(o.name, (), k) for k, o in enumerate(inner.outputs))
        self.skipped = inner.skipped
        self.x = torch.zeros(len(self.arguments), dtype=x.dtype, device=x.device)
        # F(0) is f at x itself (x + 0·u rounds to x), projected: no call of f needed.
        value = inner.value.detach().to(torch.float64)
        self.value = value @ self._v
        # The size of what each projection is summed from: its share of f's rounding.
        self.rounding_scale = ((value ** 2) @ (self._v ** 2)).sqrt().cpu().numpy()
        # f's outputs each rounded otherwise by as much as their largest |value| (a batched call of f) move
        # a projection by at most that times its ‖v‖₁.
        self.reference_size = float(value.abs().max()) * float(self._v.abs().sum(0).max()) if value.numel() else 0.0

    def __call__(self, s: torch.Tensor) -> torch.Tensor:
        # The point is made for this call alone: f needs no copy of it.
        point = (self._x + self._u @ s.to(torch.float64)).to(self.dtype)
        return self.inner.at_points(point).to(torch.float64) @ self._v

    def at_points(self, s: torch.Tensor) -> torch.Tensor:
        return self(s)

    def outputs_at(self, s: torch.Tensor) -> list[torch.Tensor]:
        return [self(s)]

    @property
    def vectorize(self) -> bool | None:
        return self.inner.vectorize

    def shown(self) -> str:
        return self.inner.shown()

    @property
    def call(self) -> str:
        return self.inner.call


def _uniform(count: int, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Uniform in [-1, 1], drawn in float64 on the CPU and rounded to dtype (returned in float64)."""
    return (2 * torch.rand(count, generator=generator, dtype=torch.float64) - 1).to(dtype).to(torch.float64)


def _segments(parts: tuple[Argument, ...], size: int) -> torch.Tensor:
    """(size, len(parts)) float64: 1 where an element belongs to a part, by offset and count."""
    which = np.zeros((size, len(parts)))
    for k, part in enumerate(parts):
        which[part.offset:part.offset + part.numel, k] = 1.0
    return torch.from_numpy(which)


def projected_gradients(graph: Graph, projection: Projection) -> tuple[torch.Tensor, str, str, str]:
    """Autograd's projections vᵀ·J·u in reverse mode: per output, f's backward with grad_output v (zero on the
    other outputs), then a dot with each input's u, in float64; (outputs, inputs) on the CPU, with the mode,
    the method and a note, as the checker's autograd Jacobian comes."""
    value = graph.value
    method = "torch.autograd.grad (one vector–Jacobian product per output, projected on u)"
    u, v = projection._u, projection._v
    if not value.requires_grad:  # no output depends on the inputs: a zero Jacobian, as autograd defines it
        return torch.zeros(v.shape[1], u.shape[1], dtype=torch.float64), "reverse", method, ""
    rows = [graph.gradient(value, column.to(value.dtype)).to(torch.float64) @ u for column in v.T]
    return torch.stack(rows).cpu(), "reverse", method, ""
