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
    if dtype.is_floating_point and torch.finfo(dtype).bits == 8:
        raise DtypeError(
            f"dtype {dtype_name(dtype)} is a float8 storage format: torch has no arithmetic (and so no autograd) "
            f"in it; compute in bfloat16 or float32 and convert"
        )
    return dtype


def real_dtype(name: str | torch.dtype) -> torch.dtype:
    """A real floating-point dtype to check gradients in; complex ones are refused by name."""
    dtype = to_dtype(name)
    if dtype.is_complex:
        raise DtypeError(
            f"dtype {dtype_name(dtype)} is complex: for complex inputs autograd returns the conjugate Wirtinger "
            f"derivative, which these checks do not compare yet; check the real and imaginary parts as real "
            f"inputs in float32 or float64"
        )
    return dtype
