"""Argument checks shared by the public API: each refuses bad input with an error that names it.

Booleans are refused where numbers are expected (True is an int in Python: rtol=True would be 1.0), and
non-finite numbers where a bound is expected (rtol=inf is a tolerance that cannot fail).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .errors import CheckInputError

# The most memory one numerical estimate may allocate at once; a larger one is refused before allocating.
MEMORY_LIMIT_BYTES = 2 * 1024**3


def number(value: object, name: str, *, minimum: float | None = None, above: float | None = None,
           error: type[CheckInputError] = CheckInputError) -> float:
    """A finite real number (not a bool), at least minimum / greater than above when given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise error(f"{name} must be finite, got {value!r}: a bound of {value!r} cannot fail or cannot pass")
    if minimum is not None and value < minimum:
        raise error(f"{name} must be at least {minimum:g}, got {value!r}")
    if above is not None and value <= above:
        raise error(f"{name} must be greater than {above:g}, got {value!r}")
    return float(value)


def integer(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number (not a bool) within the bounds given."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckInputError(f"{name} must be a whole number, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise CheckInputError(f"{name} must be at least {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise CheckInputError(f"{name} must be at most {maximum}, got {value!r}")
    return value


def flag(value: object, name: str) -> bool:
    """True or False, nothing that merely converts to one ("no" is truthy)."""
    if not isinstance(value, bool):
        raise CheckInputError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def text(value: object, name: str) -> str:
    """Written text that is not blank."""
    if not isinstance(value, str) or not value.strip():
        raise CheckInputError(f"{name} must be written out as text, got {value!r}")
    return value


def function(value: object, name: str) -> Callable[..., Any]:
    if not callable(value):
        raise CheckInputError(f"{name} must be a function of a tensor, got {value!r} ({type(value).__name__})")
    return value


def choices(value: object, name: str, allowed: Sequence[object] | None = None) -> tuple[Any, ...]:
    """One name or a sequence of them: at least one, none twice, each allowed (when allowed is given)."""
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, (bytes, bytearray)):
        raise CheckInputError(f"{name} must be a name or a sequence of names, got {value!r}")
    items = tuple(items)
    if not items:
        raise CheckInputError(f"{name}=() plans no check: a plan with no checks would report nothing as passed")
    repeated = sorted({str(item) for item in items if items.count(item) > 1})
    if repeated:
        raise CheckInputError(f"{name} names {', '.join(repeated)} twice: each would give a second record "
                              f"with the same id")
    if allowed is not None:
        for item in items:
            if item not in allowed:
                raise CheckInputError(f"{name}={item!r} is not one of {tuple(allowed)}")
    return items


def memory(size: int, what: str, remedy: str) -> None:
    """Refuse to allocate size bytes above MEMORY_LIMIT_BYTES, saying how large, why and what to do."""
    if size > MEMORY_LIMIT_BYTES:
        raise CheckInputError(f"{what} would allocate {size / 1e9:.1f} GB (more than the "
                              f"{MEMORY_LIMIT_BYTES / 1e9:.1f} GB allowed at once); {remedy}")


# gradcheck's and gradgradcheck's options that check_jacobian does not take, and what takes their place (the
# API page's "Coming from gradcheck" table, in brief).
FROM_GRADCHECK = {
    "inputs": "pass the inputs positionally, one by one: check_jacobian(f, *inputs)",
    "eps": "there is no single step: each element's steps adapt from ε^(1/7)·max(|x_j|, 1) downward; max_step= "
           "caps the first (to keep the steps from crossing a kink near the inputs)",
    "raise_exception": "check_jacobian returns a report (true for a pass only); assert_gradients raises",
    "check_forward_ad": "pass mode=\"forward\" (or mode=(\"reverse\", \"forward\") to assert_gradients)",
    "check_backward_ad": "pass mode=\"reverse\", the default",
    "check_batched_forward_grad": "pass check_batched_grad=True with mode=\"forward\"",
    "check_grad_dtypes": "nothing to ask: a backward computed in another dtype fails the comparison",
    "fast_mode": "pass fast=True",
    "masked": "a sparse COO input is checked at its specified elements, as masked=True checks it",
    "check_rev_over_rev": "pass order=2 with mode=\"reverse\"",
    "check_fwd_over_rev": "pass order=2 with mode=\"forward\"",
    "gen_non_contig_grad_outputs": "not offered",
}


def no_other_options(options: dict[str, object], function: str) -> None:
    """Refuse keyword arguments a function does not take, naming what replaces gradcheck's."""
    if not options:
        return
    name = next(iter(options))
    replacement = FROM_GRADCHECK.get(name)
    if replacement is None:
        raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")  # as Python says it
    raise CheckInputError(f"{name}= is gradcheck's option, not {function}'s: {replacement} (the API page's "
                          f"'Coming from gradcheck' maps every option)")

