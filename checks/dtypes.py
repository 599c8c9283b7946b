"""Dtype names as the reader sees them ("float32"), and the checks every input dtype must pass."""

from __future__ import annotations

import torch

from .errors import DtypeError

FLOATING = ("float16", "bfloat16", "float32", "float64")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def to_dtype(name: str | torch.dtype) -> torch.dtype:
    """Turn "float32" (or a torch.dtype) into a torch.dtype that can carry gradients."""
    dtype = name if isinstance(name, torch.dtype) else getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise DtypeError(f"unknown dtype {name!r}; use one of {', '.join(FLOATING)}")
    if not (dtype.is_floating_point or dtype.is_complex):
        raise DtypeError(
            f"dtype {dtype_name(dtype)} cannot carry gradients: autograd needs a floating-point "
            f"or complex dtype (use float32 or float64)"
        )
    return dtype
