"""Errors raised for bad input: each names the problem instead of producing a wrong table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CheckInputError(ValueError):
    """Base class: the check as written cannot be run meaningfully."""


class NonScalarOutputError(CheckInputError):
    """backward() or autograd.grad was asked for a gradient of a non-scalar output."""


class DtypeError(CheckInputError):
    """The input's dtype cannot carry gradients (integers, bool) or is not known."""


class ShapeMismatchError(CheckInputError):
    """Expected and observed gradients (or gradient and input) disagree in shape."""


class NaNInputError(CheckInputError):
    """An input or an analytical expectation contains NaN or infinity."""


class DeviceUnavailableError(CheckInputError):
    """A device was asked for that this machine does not have."""


class ToleranceChangeError(CheckInputError):
    """A tolerance was set or changed without a written reason."""


class NoForwardModeError(CheckInputError):
    """mode="forward" was asked of an f without a forward-mode derivative (a custom autograd.Function without
    jvp, or an op without a forward-mode formula): the check refuses, as gradcheck's check_forward_ad does,
    instead of checking the backward in its place."""


class StepError(CheckInputError):
    """A finite-difference step rounds to zero in the input's dtype (x + h == x)."""


@contextmanager
def in_place_named() -> Iterator[None]:
    """Name the problem when f changes its input in place: autograd refuses that on a leaf."""
    try:
        yield
    except RuntimeError as error:
        if "in-place operation" not in str(error):
            raise
        raise CheckInputError(
            "f changes x in place (e.g. x.mul_(2)); autograd cannot differentiate an in-place change of the "
            "input it differentiates with respect to: write f out of place (x * 2)"
        ) from error
