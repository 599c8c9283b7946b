"""Analytical expectations, written before anything runs: a formula, a callable, and where it came from."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ..core.errors import CheckInputError, NaNInputError, ShapeMismatchError

# What an exercise leaves for the reader to fill in (Python's Ellipsis, in code or as text).
BLANK = "..."

Function = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Expectation:
    """What the reader expects before running: f, its derivative df, both as text and as code.

    function -- f as the reader reads it, e.g. "x*x"
    f        -- the same function as code
    gradient -- the analytical derivative as text, e.g. "2*x"
    df       -- the analytical derivative as code; returns a tensor of x's shape
    source   -- where the derivative came from, e.g. "power rule: d/dx x² = 2x"
    related  -- other code the check runs through, e.g. a custom torch.autograd.Function whose backward
                is under test: its source is kept on every record beside f's and df's
    """

    function: str
    f: Function
    gradient: str
    df: Function
    source: str
    related: tuple[object, ...] = ()

    def __post_init__(self) -> None:
        # A blank is an exercise not filled in yet: checks.witness says so instead of running; any other
        # use of the expectation (analytical(), plan()) refuses it, naming the blanks.
        for name in ("function", "gradient", "source"):
            value = getattr(self, name)
            if name not in self.blanks and (not isinstance(value, str) or not value.strip()):
                raise CheckInputError(f"an expectation needs its {name} written out as text; got {value!r}")
        for name in ("f", "df"):
            if name not in self.blanks and not callable(getattr(self, name)):
                raise CheckInputError(f"an expectation needs {name} as a callable (a function of x); got "
                                      f"{getattr(self, name)!r}")
        if not isinstance(self.related, (tuple, list)):
            raise CheckInputError(f"related must be a tuple of the objects the check runs through, e.g. "
                                  f"(MyFunction,); got {self.related!r}")
        object.__setattr__(self, "related", tuple(self.related))

    @property
    def blanks(self) -> tuple[str, ...]:
        """The fields still written as a blank (`...`, in code or as text)."""
        return tuple(name for name in ("function", "f", "gradient", "df", "source")
                     if getattr(self, name) is Ellipsis or (isinstance(getattr(self, name), str)
                                                            and getattr(self, name).strip() == BLANK))

    def blanks_at(self, x: object) -> tuple[str, ...]:
        """The blanks, with df among them where it is a function that returns a blank (`lambda x: ...`)."""
        returns_blank = "df" not in self.blanks and self.df(reference_input(x)) is Ellipsis
        return tuple(name for name in ("function", "f", "gradient", "df", "source")
                     if name in self.blanks or (name == "df" and returns_blank))

    def analytical(self, x: torch.Tensor) -> torch.Tensor:
        """df evaluated at x in float64 on the CPU: the reference every device and dtype is held to."""
        if self.blanks:
            verb = "is" if len(self.blanks) == 1 else "are"
            raise CheckInputError(f"the expectation's {', '.join(self.blanks)} {verb} still a blank ({BLANK}): fill it in first")
        reference = reference_input(x)
        value = self.df(reference.clone())  # a df that works in place must not change x
        if value is Ellipsis:
            raise CheckInputError(f"df returned {BLANK}, a blank: write the derivative you expect as PyTorch code")
        try:
            expected = torch.as_tensor(value, dtype=torch.float64).detach().cpu()
        except (TypeError, ValueError, RuntimeError):
            raise CheckInputError(
                f"df(x) for {self.gradient!r} returned {type(value).__name__} ({value!r:.60}), not numbers; "
                f"build it from x with torch ops"
            ) from None
        if expected.shape != reference.shape:
            raise ShapeMismatchError(
                f"the analytical gradient {self.gradient!r} of {self.function!r} has shape "
                f"{tuple(expected.shape)} but x has shape {tuple(reference.shape)}; a gradient keeps "
                f"the shape of its input (for a sum, use torch.ones_like(x))"
            )
        if not torch.isfinite(expected).all():
            raise NaNInputError(
                f"the analytical gradient {self.gradient!r} is not finite at x={reference.tolist()}: "
                f"{expected.tolist()}"
            )
        return expected


@dataclass(frozen=True)
class Blanks:
    """What checks.witness returns for an exercise's expectation with blanks left: nothing ran, and it says
    what to fill in. A notebook run top to bottom passes it; using it as results refuses, naming the blanks."""

    expectation: Expectation
    names: tuple[str, ...]

    def message(self) -> str:
        return (f"Not checked yet: fill in the blanks ({BLANK}) of the expectation ({', '.join(self.names)}), "
                f"then run this cell again.")

    def __repr__(self) -> str:
        return self.message()

    def _repr_html_(self) -> str:
        return f'<p class="checks-blanks"><strong>{html.escape(self.message())}</strong></p>'

    def __bool__(self) -> bool:
        return False

    def _refuse(self) -> CheckInputError:
        return CheckInputError(f"no check ran: {self.message()}")

    @property
    def passed(self) -> bool:
        raise self._refuse()

    def one(self, **where: object) -> object:
        raise self._refuse()

    def __len__(self) -> int:
        raise self._refuse()

    def __iter__(self) -> Iterator[object]:
        raise self._refuse()


def reference_input(x: object) -> torch.Tensor:
    """The input as a new float64 CPU tensor (never the caller's), refusing NaN, infinity, empty inputs and
    values that are not numbers."""
    try:
        tensor = torch.as_tensor(x).detach().cpu()
        if not isinstance(x, torch.Tensor) and tensor.is_floating_point():
            # Python floats would otherwise pass through the default dtype (float32): 0.7 → 0.699999988.
            tensor = torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as error:
        raise CheckInputError(f"x={x!r} is not a number or a list of numbers: {error}") from None
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise CheckInputError(f"x={x!r} must be real numbers, got dtype {tensor.dtype}")
    tensor = tensor.to(torch.float64, copy=True)
    if tensor.numel() == 0:
        raise CheckInputError(f"x is empty (shape {tuple(tensor.shape)}): there is no gradient to check")
    if not torch.isfinite(tensor).all():
        raise NaNInputError(f"x={tensor.tolist()} contains NaN or infinity; a gradient check needs finite inputs")
    return tensor
