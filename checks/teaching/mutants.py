"""A suite for judging gradient checkers: torch ops with correct gradients, and mutants with wrong ones.

A mutant is a torch.autograd.Function whose forward is right and whose backward is wrong in a known way:
scaled by 1 + δ (a relative error δ), wrong sign, a missing factor or term, a transposed matmul, a sum
over the wrong broadcast axis, an order bug, or wrong only for negative inputs. Every mutant has
setup_context and generate_vmap_rule, so torch.func.jacrev can transform it; none has a jvp, so forward
mode cannot (a checker must say so and fall back).

All inputs stay away from non-differentiable points and domain edges: a checker's verdict on this suite
is then about the gradient alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Function = Callable[[torch.Tensor], torch.Tensor]
Derivative = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, upstream grad) -> grad wrt x

# δ for the scaled mutants: relative errors from 10 % down to 1e-7.
DELTAS: tuple[float, ...] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)

MIXED = (0.3, -0.7, 1.1, 0.5)
POSITIVE = (0.4, 1.3, 2.1, 0.8)
SMALL = (0.3, -0.6, 0.9, 0.2)
# Fixed, non-symmetric matrices: a transposed matmul is then visibly wrong.
A = ((1.0, 2.0, 0.5, -1.0), (0.0, 1.5, -0.7, 0.3), (0.4, -1.2, 2.0, 0.8), (1.1, 0.6, -0.3, 1.0))
B = ((0.5, -1.0, 0.8, 0.2), (1.2, 0.3, -0.4, 0.9), (-0.6, 0.7, 1.5, -0.2), (0.1, 0.4, -0.9, 1.3))


@dataclass(frozen=True)
class Case:
    """One function in the suite; wrong says whether its backward is wrong (a mutant)."""

    name: str
    f: Function
    x: tuple[float, ...]
    wrong: bool
    kind: str  # "correct", "scaled" or the structural bug's name
    delta: float | None = None  # the scaled mutants' relative error

    def input(self, dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
        return torch.tensor(self.x, dtype=dtype, device=device)


def mutant(forward: Function, backward: Derivative, name: str) -> Function:
    """An autograd.Function with the given forward and (possibly wrong) backward, usable by torch.func."""

    def _forward(x: torch.Tensor) -> torch.Tensor:
        return forward(x)

    def _setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0])

    def _backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return backward(x, grad)

    function = type(name, (torch.autograd.Function,), {
        "generate_vmap_rule": True,
        "forward": staticmethod(_forward),
        "setup_context": staticmethod(_setup_context),
        "backward": staticmethod(_backward),
    })
    return function.apply


def _matrix(rows: tuple[tuple[float, ...], ...], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(rows, dtype=like.dtype, device=like.device)


def _square(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(2, 2)


def correct_cases() -> list[Case]:
    """Thirty-two of torch's own ops (and small compositions), each at inputs inside its smooth domain."""
    ops: list[tuple[str, Function, tuple[float, ...]]] = [
        ("sin", torch.sin, MIXED), ("cos", torch.cos, MIXED), ("tan", torch.tan, SMALL),
        ("exp", torch.exp, MIXED), ("log", torch.log, POSITIVE), ("sqrt", torch.sqrt, POSITIVE),
        ("tanh", torch.tanh, MIXED), ("sigmoid", torch.sigmoid, MIXED),
        ("softplus", torch.nn.functional.softplus, MIXED), ("erf", torch.erf, MIXED),
        ("atan", torch.atan, MIXED), ("asinh", torch.asinh, MIXED), ("log1p", torch.log1p, MIXED),
        ("expm1", torch.expm1, MIXED), ("reciprocal", torch.reciprocal, POSITIVE),
        ("x**3", lambda x: x**3, MIXED), ("gelu", torch.nn.functional.gelu, MIXED),
        ("silu", torch.nn.functional.silu, MIXED), ("elu", torch.nn.functional.elu, MIXED),
        ("cumsum", lambda x: torch.cumsum(x, 0), MIXED), ("cumprod", lambda x: torch.cumprod(x, 0), MIXED),
        ("softmax", lambda x: torch.softmax(x, 0), MIXED), ("log_softmax", lambda x: torch.log_softmax(x, 0), MIXED),
        ("logsumexp", lambda x: torch.logsumexp(x, 0), MIXED), ("norm", torch.linalg.vector_norm, MIXED),
        ("A @ x", lambda x: _matrix(A, x) @ x, MIXED), ("det", lambda x: torch.linalg.det(_square(x)), MIXED),
        ("inverse", lambda x: torch.linalg.inv(_square(x)).reshape(-1), MIXED),
        ("var", lambda x: torch.var(x), MIXED), ("prod", torch.prod, MIXED),
        ("layer_norm", lambda x: torch.nn.functional.layer_norm(x, (4,)), MIXED),
        ("sin(x)·x, summed", lambda x: (torch.sin(x) * x).sum(), MIXED),
    ]
    return [Case(name, f, x, wrong=False, kind="correct") for name, f, x in ops]


# Bases of the scaled mutants: forward, true backward (x, grad) -> grad·f'(x), and the input.
SCALED_BASES: dict[str, tuple[Function, Derivative, tuple[float, ...]]] = {
    "sin": (torch.sin, lambda x, g: g * torch.cos(x), MIXED),
    "exp": (torch.exp, lambda x, g: g * torch.exp(x), MIXED),
    "tanh": (torch.tanh, lambda x, g: g * (1 - torch.tanh(x) ** 2), MIXED),
    "x**3": (lambda x: x**3, lambda x, g: g * 3 * x**2, MIXED),
    "logsumexp": (lambda x: torch.logsumexp(x, 0), lambda x, g: g * torch.softmax(x, 0), MIXED),
}


def _scaled(backward: Derivative, delta: float) -> Derivative:
    return lambda x, g: backward(x, g) * (1 + delta)


def scaled_cases(deltas: tuple[float, ...] = DELTAS) -> list[Case]:
    """Each base's backward multiplied by 1 + δ, for every δ: a relative error of δ in every element."""
    return [
        Case(f"{name}, backward × (1 + {delta:g})", mutant(forward, _scaled(backward, delta), f"Scaled_{index}"),
             x, wrong=True, kind="scaled", delta=delta)
        for name, (forward, backward, x) in SCALED_BASES.items()
        for index, delta in enumerate(deltas)
    ]


def _elu_backward_wrong_for_negatives(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    # ELU'(x) = exp(x) for x < 0, i.e. elu(x) + 1; the bug returns elu(x), forgetting the + 1.
    return g * torch.where(x > 0, torch.ones_like(x), torch.expm1(x))


def _broadcast_forward(x: torch.Tensor) -> torch.Tensor:
    # x (4,) is a bias added to every row of the fixed 4×4 matrix B: x[j] shifts column j.
    return torch.tanh(_matrix(B, x) + x)


def _broadcast_backward(x: torch.Tensor, g: torch.Tensor, axis: int) -> torch.Tensor:
    local = g * (1 - torch.tanh(_matrix(B, x) + x) ** 2)
    return local.sum(axis)  # the right reduction is over rows (axis 0); B is square, so axis 1 fits too


def structural_cases() -> list[Case]:
    """Bugs of the kinds found in real backward code, and a tiny derivative reported twice too large."""
    bugs: list[tuple[str, str, Function, Derivative, tuple[float, ...]]] = [
        ("sin, wrong sign", "wrong sign", torch.sin, lambda x, g: -g * torch.cos(x), MIXED),
        ("sin(3x), chain factor 3 missing", "missing factor", lambda x: torch.sin(3 * x),
         lambda x, g: g * torch.cos(3 * x), MIXED),
        ("x·sin(x), product term x·cos(x) missing", "missing term", lambda x: x * torch.sin(x),
         lambda x, g: g * torch.sin(x), MIXED),
        ("A @ x, backward A @ g (not Aᵀ @ g)", "transposed matmul", lambda x: _matrix(A, x) @ x,
         lambda x, g: _matrix(A, x) @ g, MIXED),
        ("tanh(B + x), bias grad summed over the wrong axis", "wrong broadcast", _broadcast_forward,
         lambda x, g: _broadcast_backward(x, g, 1), MIXED),
        ("cumsum, backward cumsum (not reversed)", "order bug", lambda x: torch.cumsum(x, 0),
         lambda x, g: torch.cumsum(g, 0), MIXED),
        ("elu, backward wrong only for x < 0", "wrong for negative inputs", torch.nn.functional.elu,
         _elu_backward_wrong_for_negatives, MIXED),
        # gradcheck's atol=1e-5 swallows any error in a derivative of order 1e-6, however large relatively.
        ("1e-6·sin(x), backward 2e-6·cos(x)", "small derivative doubled", lambda x: 1e-6 * torch.sin(x),
         lambda x, g: g * 2e-6 * torch.cos(x), MIXED),
    ]
    return [Case(name, mutant(forward, backward, f"Bug_{index}"), x, wrong=True, kind=kind)
            for index, (name, kind, forward, backward, x) in enumerate(bugs)]


def suite(deltas: tuple[float, ...] = DELTAS) -> list[Case]:
    """The correct ops, the scaled mutants and the structural mutants."""
    return [*correct_cases(), *scaled_cases(deltas), *structural_cases()]


class LeakingReLU(torch.nn.Module):
    """relu whose backward leaks 0.01 of the gradient below 0 (a leaky relu's backward, by mistake): a bug
    in a network of relus, where kinks lie at many distances from the point."""

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return _LEAKING_RELU(a)


_LEAKING_RELU = mutant(torch.relu, lambda a, g: g * torch.where(a > 0, 1.0, 0.01).to(g.dtype), "ReluLeakingBelowZero")


class BatchReversed(torch.autograd.Function):
    """The identity with a wrong batching rule: torch.func.vmap hands each point of a batch another point's
    value, as vmap of torch.roll without dims does in torch 2.13 (it rolls the batch). Its backward is right."""

    @staticmethod
    def forward(t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        return g

    @staticmethod
    def vmap(info, in_dims, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        return t.flip(in_dims[0]), in_dims[0]


def noisy(f: Callable[..., object], k: float, seed: int) -> Callable[..., object]:
    """f with its rounding amplified k times: each output multiplied by 1 + u·k·ε (ε of its dtype), u uniform
    in [-1, 1] and drawn afresh at every evaluation from a generator seeded with `seed`. A model of what an
    ill-conditioned f does on another machine (its last bits differ, by about cond·ε): a checker that is
    right on every machine gives a correct backward pass or inconclusive under it, never fail.

    The noise is detached (autograd's Jacobian is scaled by the same 1 + u·k·ε, a relative change of k·ε).
    torch.func.vmap refuses the random draw, so f's points are evaluated one at a time."""
    generator = torch.Generator().manual_seed(seed)

    def perturbed(*inputs: torch.Tensor) -> object:
        value = f(*inputs)
        values = value if isinstance(value, (tuple, list)) else (value,)
        noisy_values = []
        for output in values:
            if isinstance(output, torch.Tensor) and output.is_floating_point():
                u = torch.rand(output.shape, generator=generator, dtype=torch.float64) * 2 - 1
                factor = 1 + u * k * torch.finfo(output.dtype).eps
                output = output * factor.to(output.dtype).to(output.device)
            noisy_values.append(output)
        return type(value)(noisy_values) if isinstance(value, (tuple, list)) else noisy_values[0]

    return perturbed


@dataclass(frozen=True)
class HardCase:
    """A function whose derivative is hard to estimate numerically, with a correct and a wrong backward."""

    name: str
    right: Function
    wrong: Function
    x: tuple[float, ...]
    dtype: torch.dtype

    def input(self) -> torch.Tensor:
        return torch.tensor(self.x, dtype=self.dtype)


def _near_singular_inverse_sum(x: torch.Tensor) -> torch.Tensor:
    a = torch.tensor(((1.0, 1.0), (1.0, 1.0 + 1e-6)), dtype=x.dtype, device=x.device)  # condition number ≈ 4e6
    return torch.linalg.inv(a + torch.diag(x)).sum()


def _inverse_backward(first: float | None) -> Derivative:
    def backward(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        leaf = x.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            (gradient,) = torch.autograd.grad(_near_singular_inverse_sum(leaf), leaf)
        if first is not None:
            gradient = torch.cat([torch.tensor([first], dtype=x.dtype, device=x.device), gradient[1:]])
        return g * gradient
    return backward


def hard_cases() -> list[HardCase]:
    """The cases of "How good is a gradient check?" where the estimate is hard: a function that changes on a
    scale far below the default step (float64), fast oscillations in float32, and a near-singular matrix whose
    inverse amplifies f's rounding by its condition number (float64)."""
    def times(forward: Function, derivative: Function, factor: float, name: str) -> Function:
        return mutant(forward, lambda x, g: factor * g * derivative(x), name)

    X4 = MIXED
    smooth = [
        ("tanh(1e4·x) at 1e-5, backward × 2", lambda x: torch.tanh(1e4 * x),
         lambda x: 1e4 * (1 - torch.tanh(1e4 * x) ** 2), 2.0, (1e-5,), torch.float64),
        ("tanh(1e4·x) at 1e-5, backward × 0", lambda x: torch.tanh(1e4 * x),
         lambda x: 1e4 * (1 - torch.tanh(1e4 * x) ** 2), 0.0, (1e-5,), torch.float64),
        ("sin(100·x), sign flipped", lambda x: torch.sin(100 * x), lambda x: 100 * torch.cos(100 * x), -1.0, X4,
         torch.float32),
        ("sin(1000·x), sign flipped", lambda x: torch.sin(1000 * x), lambda x: 1000 * torch.cos(1000 * x), -1.0, X4,
         torch.float32),
        ("tanh(20·x), backward 10 % too large", lambda x: torch.tanh(20 * x),
         lambda x: 20 * (1 - torch.tanh(20 * x) ** 2), 1.1, X4, torch.float32),
        ("sin(50·x), backward 10 % too large", lambda x: torch.sin(50 * x), lambda x: 50 * torch.cos(50 * x), 1.1, X4,
         torch.float32),
    ]
    cases = [HardCase(name, times(forward, derivative, 1.0, "Right"), times(forward, derivative, factor, "Wrong"),
                      x, dtype) for name, forward, derivative, factor, x, dtype in smooth]
    right = mutant(_near_singular_inverse_sum, _inverse_backward(None), "Inverse")
    cases += [HardCase(f"inv(A + diag(x)).sum(), A near-singular, first element {first:g}", right,
                       mutant(_near_singular_inverse_sum, _inverse_backward(first), "Inverse"), (0.0, 0.0),
                       torch.float64) for first in (7.0, 0.0)]
    return cases
