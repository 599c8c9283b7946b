"""Errors raised for bad input: each names the problem instead of producing a wrong table."""


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


class StepError(CheckInputError):
    """A finite-difference step rounds to zero in the input's dtype (x + h == x)."""
