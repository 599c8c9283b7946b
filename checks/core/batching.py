"""The checker's own shortcuts to autograd's derivatives (torch.func.vmap, is_grads_batched, the backward
differentiated), kept honest: quiet about torch 2.0's fallback warning, and held to a plain call."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator

import torch

# torch 2.0 warns wherever vmap runs an op it has no batching rule for one slice at a time (later releases say
# nothing): torch's cost inside the checker's batching, which the caller did not ask for and cannot act on.
_FALLBACK = "There is a performance drop because we have not yet implemented the batching rule"
# table·d from a table and by one plain call round differently, each by about √len(d)·ε·Σ|tableᵢⱼ·dⱼ|
# (a random walk of roundings); beyond AGREE times that, the table is not what the plain call computes.
AGREE = 16


@contextlib.contextmanager
def quiet_fallback() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_FALLBACK, category=UserWarning)
        yield


def direction(size: int, dtype: torch.dtype) -> torch.Tensor:
    """A random direction (the same in every check), in dtype: a plain call's output gradient or tangent."""
    return torch.randn(size, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)


def reproduces(table: torch.Tensor, d: torch.Tensor, plain: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether table·d (float64) is what one plain call along d gave (`plain`), up to both roundings in dtype:
    a table made by a shortcut (vmap's batching, the backward differentiated) is the derivative the plain
    backward or jvp computes, not another one."""
    d = d.to(torch.float64)
    predicted, scale = table @ d, table.abs() @ d.abs()
    allowed = AGREE * math.sqrt(d.numel()) * torch.finfo(dtype).eps * (scale + plain.abs())
    both_not_finite = ~torch.isfinite(predicted) & ~torch.isfinite(plain)
    return bool(((plain - predicted).abs() <= allowed).logical_or(both_not_finite).all())
