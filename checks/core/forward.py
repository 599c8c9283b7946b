"""Forward-mode Jacobians, as gradcheck's check_forward_ad computes them: Jacobian-vector products of the
forward-mode derivatives (an op's jvp, a custom autograd.Function's jvp), one column per input element.

torch.func.jacfwd batches the columns with vmap; it cannot transform every f (an autograd.Function without
setup_context or a vmap rule, an f that calls torch.autograd.grad, as a vector–Jacobian product does). Plain
dual numbers (torch.autograd.forward_ad) need only the jvp itself, one column at a time, as gradcheck does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from .batching import direction, quiet_fallback, reproduces
from .dtypes import dtype_name
from .errors import NoForwardModeError

fwAD = torch.autograd.forward_ad

JACFWD = "torch.func.jacfwd"
DUAL_NUMBERS = "torch.autograd.forward_ad (dual numbers, one per input element)"


def first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def flat_jacobian(jacobian: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(outputs, inputs) float64 on the CPU, from torch.func's shape (*f(x).shape, *x.shape) or rows."""
    return jacobian.detach().reshape(-1, x.numel()).to(torch.float64).cpu()


def forward_jacobian(g: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, outputs: int, *, name: str = "f",
                     transforms: bool = True, differentiable: bool = False) -> tuple[torch.Tensor, str, str]:
    """g's Jacobian at the flat x by forward mode: (outputs, inputs) float64, the method, and why jacfwd was
    not used ("" when it was). NoForwardModeError when neither jacfwd nor dual numbers can (no jvp): never
    a fallback to reverse mode, which would check the backward in place of the jvp asked for.

    name           -- f as the message names it ("`MyFunction`", or "f")
    transforms     -- try torch.func.jacfwd first
    differentiable -- the dual inputs require grad too, for a g that differentiates them in reverse mode
                      inside (forward-over-reverse: g a vector–Jacobian product)
    """
    note = ""
    if transforms:
        try:
            with warnings.catch_warnings(), quiet_fallback():
                # torch's own forward-mode decompositions script themselves on first use and warn that
                # torch.jit.script is deprecated: torch's doing, not the caller's, so not shown in their tests.
                warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated",
                                        category=DeprecationWarning)
                table = flat_jacobian(torch.func.jacfwd(g)(x.clone()), x)
        # torch.func refuses autograd.Functions it cannot transform (no setup_context, no vmap rule) and f
        # that call autograd inside; the dual numbers below need only the jvp.
        except (RuntimeError, NotImplementedError) as error:
            note = f"torch.func.jacfwd could not transform f ({first_line(error)}); dual numbers instead"
        else:
            if _the_jvp_s(table, g, x, outputs, differentiable):
                return table, JACFWD, ""
            note = (f"torch.func.jacfwd's columns differ from a plain jvp by more than {dtype_name(x.dtype)}'s "
                    f"rounding (a batching rule that does not hold for f's jvp); dual numbers instead")
    columns = []
    try:
        with fwAD.dual_level():
            for j in range(x.numel()):
                tangent = torch.zeros_like(x)
                tangent[j] = 1
                primal = x.detach().clone().requires_grad_(differentiable)
                value = g(fwAD.make_dual(primal, tangent))
                column = fwAD.unpack_dual(value).tangent
                # No tangent: no output depends on this element (zeros, as autograd defines them).
                columns.append(torch.zeros(outputs, dtype=x.dtype, device=x.device) if column is None
                               else column.reshape(-1))
    except (RuntimeError, NotImplementedError) as error:  # an op or a Function without a jvp
        cause = first_line(error)
        what = "does not implement jvp" if "jvp" in cause else "has no forward-mode derivative"
        raise NoForwardModeError(
            f"mode='forward' checks forward-mode derivatives, and {name} {what} (torch.autograd.forward_ad: "
            f"{cause}). Define a jvp staticmethod on the autograd.Function (the tangent of forward's output from "
            f"the inputs' tangents), or check the backward with mode='reverse'") from error
    return flat_jacobian(torch.stack(columns, 1), x), DUAL_NUMBERS, note


def _the_jvp_s(table: torch.Tensor, g: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, outputs: int,
               differentiable: bool) -> bool:
    """Whether jacfwd's table is the jvp's own: J·u against one plain dual-number product along a random u.
    Where the plain product cannot be formed (jacfwd transformed what dual numbers cannot), the table stands."""
    u = direction(x.numel(), x.dtype)
    try:
        with fwAD.dual_level():
            primal = x.detach().clone().requires_grad_(differentiable)
            tangent = fwAD.unpack_dual(g(fwAD.make_dual(primal, u.to(x.device)))).tangent
    except (RuntimeError, NotImplementedError):
        return True
    plain = torch.zeros(outputs, dtype=torch.float64) if tangent is None else \
        tangent.detach().reshape(-1).to(torch.float64).cpu()
    return reproduces(table, u, plain, x.dtype)
