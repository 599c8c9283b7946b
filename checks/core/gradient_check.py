"""check_gradients, the pytest plugin's fixture: assert_gradients in a test's dtype and on its device."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from .checker import CheckReport, assert_gradients, assert_module_gradients
from .errors import CheckInputError

# A complex argument is checked in the complex dtype of the run's real one.
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


class GradientCheck:
    """check_gradients: assert_gradients in the test's dtype and on its device."""

    def __init__(self, dtype: torch.dtype, device: str) -> None:
        self.dtype, self.device = dtype, device

    def to(self, value: object) -> object:
        """A tensor argument in this run's dtype (complex: the matching complex dtype) and on its device."""
        if not isinstance(value, torch.Tensor):
            return value
        if value.is_complex():
            return value.detach().to(device=self.device, dtype=COMPLEX[self.dtype])
        if value.dtype.is_floating_point:
            return value.detach().to(device=self.device, dtype=self.dtype)
        return value.to(self.device)

    def __call__(self, f: Callable[..., object], *inputs: object, **options: object) -> CheckReport:
        __tracebackhide__ = True  # pytest shows the message, not this frame
        return assert_gradients(f, *[self.to(value) for value in inputs], **options)

    def module(self, module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: object,
               **options: object) -> CheckReport:
        """assert_module_gradients of a copy of the module in this run's dtype and on its device."""
        __tracebackhide__ = True
        if not isinstance(module, torch.nn.Module):
            raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        moved = copy.deepcopy(module).to(device=self.device, dtype=self.dtype)
        return assert_module_gradients(moved, loss, *[self.to(value) for value in args], **options)

    def __repr__(self) -> str:
        return f"check_gradients({self.dtype}, {self.device})"
