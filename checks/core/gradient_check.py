"""check_gradients, the pytest plugin's fixture: assert_gradients in a test's dtype and on its device.

One difference from assert_gradients: a float32 run whose only unjudged elements are ones float32 is too
coarse to settle is skipped with the message, not failed: reasons "imprecise" and "unresolved" (the
estimate's uncertainty, or f's resolution, in float32), "tolerance" (the same uncertainty against an atol
and rtol given) and "kink nearby" (a kink that float32's coarser steps cross, a step's width from x). f's
own rounding, not the point or the gradient, stopped it, and a float64 run settles it. A "kink" among them
is float32's too where the same check in float64 passes (its steps start 18 times finer, and cross no kink
there): the float32 run is skipped then, and raises otherwise. Every other inconclusive element (f's
domain, an unstable or unconfirmed mismatch) raises as assert_gradients does: another point settles it,
not another dtype."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch

import pytest

from .checker import CheckReport, check_jacobian, check_module, each_mode, raise_unless_passed
from .errors import CheckInputError

# A complex argument is checked in the complex dtype of the run's real one.
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}
# The reasons of an unjudged element that a float64 run settles (see checks.core.message.REASONS).
PRECISION = frozenset({"imprecise", "unresolved", "kink nearby", "tolerance"})


class GradientCheck:
    """check_gradients: assert_gradients in the test's dtype and on its device."""

    def __init__(self, dtype: torch.dtype, device: str) -> None:
        self.dtype, self.device = dtype, device

    def to(self, value: object) -> object:
        """A tensor argument in this run's dtype (complex: the matching complex dtype) and on its device."""
        if not isinstance(value, torch.Tensor):
            return value
        # requires_grad kept: where some inputs require grad, they alone are checked (as in gradcheck).
        if value.is_complex():
            return value.detach().to(device=self.device, dtype=COMPLEX[self.dtype]).requires_grad_(value.requires_grad)
        if value.dtype.is_floating_point:
            return value.detach().to(device=self.device, dtype=self.dtype).requires_grad_(value.requires_grad)
        return value.to(self.device)

    def __call__(self, f: Callable[..., object], *inputs: object, **options: object
                 ) -> CheckReport | tuple[CheckReport, ...]:
        __tracebackhide__ = True  # pytest shows the message, not this frame
        return self._each_mode(lambda run, **given: run._run(check_jacobian, f, *map(run.to, inputs), **given),
                               options)

    def module(self, module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: object,
               **options: object) -> CheckReport | tuple[CheckReport, ...]:
        """assert_module_gradients of a copy of the module in this run's dtype and on its device."""
        __tracebackhide__ = True
        if not isinstance(module, torch.nn.Module):
            raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")

        def check(run: GradientCheck, **given: object) -> CheckReport:
            moved = copy.deepcopy(module).to(device=run.device, dtype=run.dtype)
            return run._run(check_module, moved, loss, *map(run.to, args), **given)

        return self._each_mode(check, options)

    def _each_mode(self, check: Callable[..., CheckReport], options: dict[str, object]
                   ) -> CheckReport | tuple[CheckReport, ...]:
        """check(run, **options) in this run's dtype, settled, once per mode; check(float64 run) where a float32
        run found a kink that float64's finer steps may not cross."""
        __tracebackhide__ = True
        wider = GradientCheck(torch.float64, self.device)
        return each_mode(functools.partial(check, self),
                         lambda report: self._settled(report, lambda: check(wider, **{**options, "mode": report.mode})),
                         options)

    def _run(self, check: Callable[..., CheckReport], *arguments: object, **options: object) -> CheckReport:
        """check(*arguments, **options); a dtype clash inside f, named: the run moved the arguments alone."""
        __tracebackhide__ = True
        try:
            return check(*arguments, **options)
        except RuntimeError as error:
            said = str(error)
            if "dtype" not in said and "scalar type" not in said:
                raise
            raise CheckInputError(
                f"f raised in the {self.dtype} run: {said.strip().splitlines()[0]}. check_gradients moves the "
                f"arguments to the run's dtype; a tensor f holds of its own (a closure's constant, a global) stays "
                f"as it was made: build it with the grad_dtype fixture, or pass it to f as an argument") from error

    def _settled(self, report: CheckReport, in_float64: Callable[[], CheckReport]) -> CheckReport:
        """The report of a pass; a skip where float32 alone left elements unjudged (by their reasons, or a kink
        at the inputs where float64 passes); else raise as assert_gradients does."""
        __tracebackhide__ = True
        if report.outcome != "inconclusive" or self.dtype != torch.float32:
            return raise_unless_passed(report)
        reasons = {e.reason for e in report.elements("inconclusive")}
        if reasons <= PRECISION:
            pytest.skip("float32 is too coarse to judge some elements; float64 settles them.\n" + report.message())
        # float32's steps start 18 times wider than float64's: a kink they cross can lie beyond float64's.
        if reasons <= PRECISION | {"kink"} and in_float64().outcome == "pass":
            pytest.skip("float32's steps cross a kink near the inputs; float64's finer steps pass the same inputs.\n"
                        + report.message())
        return raise_unless_passed(report)

    def __repr__(self) -> str:
        return f"check_gradients({self.dtype}, {self.device})"
