"""A sparse COO input seen by the checker: its specified values are the checked elements (as gradcheck's
masked=True checks them), each at its place in the dense tensor, and f receives the sparse tensor rebuilt
from them."""

from __future__ import annotations

import math

import torch


def flat_positions(coalesced: torch.Tensor) -> tuple[int, ...]:
    """The flat (row-major) positions of a coalesced sparse COO tensor's specified elements, in order."""
    strides = torch.tensor([math.prod(coalesced.shape[d + 1:]) for d in range(coalesced.dim())])
    return tuple((strides[:, None] * coalesced.indices().cpu()).sum(0).tolist())


def rebuilt(indices: torch.Tensor, values: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The sparse tensor of these values at a coalesced tensor's indices (differentiable in the values)."""
    # The indices are a coalesced tensor's own: valid and sorted, so torch need not check them again. coalesce()
    # marks the result coalesced, as the coalesced input was; sparse_coo_tensor's is_coalesced= is torch 2.1's.
    return torch.sparse_coo_tensor(indices, values, shape, check_invariants=False).coalesce()


def shown(x: torch.Tensor) -> str:
    """A tensor's values for a message: a sparse one by its specified indices and values."""
    if not x.is_sparse:
        return str(x.tolist())
    coalesced = x.detach().coalesce()
    return f"sparse {tuple(x.shape)}, indices {coalesced.indices().tolist()}, values {coalesced.values().tolist()}"
