"""Flat positions to multi-indices, in plain Python; a table's non-zero positions, in numpy.

torch.unravel_index gives the same indices, but it validates its arguments through torch.fx's symbolic
shapes, whose first use imports sympy: about a quarter of a second in every kernel that checks anything,
for a few integer divisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """The multi-index of position `flat` in a row-major tensor of `shape` (() for a scalar)."""
    if not 0 <= flat < math.prod(shape):
        raise IndexError(f"flat position {flat} is outside a tensor of shape {tuple(shape)}")
    index = []
    for size in reversed(shape):
        flat, position = divmod(flat, size)
        index.append(position)
    return tuple(reversed(index))


def nonzero(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.nonzero of a 2-D boolean table, in the same order: a flat table's is an order of magnitude faster."""
    return np.divmod(np.flatnonzero(mask), mask.shape[1])
