"""Observing autograd: a gradient stored by backward() into .grad, or returned by torch.autograd.grad."""

from __future__ import annotations

from typing import Literal

import torch

from ..core.dtypes import dtype_name
from ..core.errors import CheckInputError, DtypeError, NaNInputError, NonScalarOutputError, in_place_named
from .expectations import Function

How = Literal["stored", "returned"]
HOWS: tuple[How, ...] = ("stored", "returned")


def leaf(x: torch.Tensor) -> torch.Tensor:
    """A fresh leaf that requires grad: every pass starts from its own leaf and its own forward."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise DtypeError(
            f"x has dtype {dtype_name(x.dtype)}; only floating-point and complex tensors can require "
            f"gradients (convert with x.double() or x.float())"
        )
    if not torch.isfinite(x).all():
        raise NaNInputError(f"x contains NaN or infinity: {x.tolist()}")
    return x.detach().clone().requires_grad_(True)


def forward(f: Function, x: torch.Tensor) -> torch.Tensor:
    """y = f(x), refusing outputs backward() cannot start from without a gradient argument."""
    with in_place_named():
        y = f(x)
    if not isinstance(y, torch.Tensor):
        raise CheckInputError(f"f(x) returned {type(y).__name__}, not a tensor; build it from x with torch ops")
    if y.numel() != 1:
        raise NonScalarOutputError(
            f"f(x) has shape {tuple(y.shape)}; backward() and autograd.grad need a scalar output "
            f"(reduce it, e.g. with .sum(), or check the Jacobian instead)"
        )
    if not y.requires_grad:
        raise CheckInputError("f(x) does not depend on x through autograd (was x detached or converted?)")
    return y


def observe_stored(f: Function, x: torch.Tensor) -> torch.Tensor:
    """The gradient that loss.backward() stores into x.grad, from a fresh leaf and a fresh forward."""
    x = leaf(x)
    forward(f, x).backward()
    return _present(x.grad, "backward() left x.grad as None")


def observe_returned(f: Function, x: torch.Tensor) -> torch.Tensor:
    """The gradient torch.autograd.grad returns; x.grad is left untouched (None)."""
    x = leaf(x)
    (gradient,) = torch.autograd.grad(forward(f, x), x, allow_unused=True)
    return _present(gradient, "torch.autograd.grad returned None: f(x) does not use x")


def observe(f: Function, x: torch.Tensor, how: How) -> torch.Tensor:
    if how == "stored":
        return observe_stored(f, x)
    if how == "returned":
        return observe_returned(f, x)
    raise CheckInputError(f"how={how!r} is not a way of observing autograd; use one of {HOWS}")


def _present(gradient: torch.Tensor | None, problem: str) -> torch.Tensor:
    if gradient is None:
        raise CheckInputError(problem)
    return gradient.detach().clone()
