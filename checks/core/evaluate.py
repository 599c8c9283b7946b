"""Evaluate f: at a batch of points at once, by torch.func.vmap where it batches f correctly, else one point
at a time (where f raises at a point for its values, f is not finite there), counting every evaluation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .batching import quiet_fallback
from .errors import CheckInputError, NonScalarOutputError

Function = Callable[[torch.Tensor], torch.Tensor]


class Evaluator:
    """Evaluates f at a batch of points (rows), counting evaluations; vmap first unless told otherwise."""

    def __init__(self, f: Function, x: torch.Tensor, vectorize: bool | None, *, scalar: bool,
                 reference: torch.Tensor | None = None, reference_size: float | None = None) -> None:
        """reference: f(x) from a plain call, where the caller has it. With vectorize=None the first batched
        call then evaluates x too and compares: a batching rule that does not hold for f (torch.roll without
        dims rolls the batch) gives another point's value, and every point goes one at a time instead.
        reference_size: the size of what f(x)'s values are summed from, for the rounding by which a batched
        call may differ (default their largest |value|; a projection's sum can cancel far below its terms)."""
        if not callable(f):
            raise CheckInputError(f"f must be a function of a tensor, got {type(f).__name__}")
        self.f = f
        self.x = x
        self.shape = x.shape
        self.vectorize = vectorize
        self.scalar = scalar
        self.count = 0
        self.batched = vectorize is not False
        self.reference = reference if vectorize is None else None
        self.reference_size = reference_size
        self.vmap_note = ""  # why the points went one at a time, where vmap evaluated f wrongly
        # Points evaluated one at a time, how many of them f raised at, and the first error.
        self.looped, self.raised, self.raised_first = 0, 0, ""
        # f(x) as the batched call computed it, float64 rows (set by the first batch when it compared; a batched
        # f can round otherwise than a plain call: a batched matrix product sums in another order).
        self.at_x: np.ndarray | None = None

    @property
    def wants_x(self) -> bool:
        """The next batched call compares its f(x) with the plain one: a caller that builds the points can
        end them with x itself (includes_x), which saves copying them to append it."""
        return self.reference is not None and self.batched

    def __call__(self, points: torch.Tensor, *, complex_step: bool = False, includes_x: bool = False,
                 native: bool = False) -> torch.Tensor:
        """f at each row of points (flattened inputs) as float64 rows (points, outputs). includes_x: the last
        row is x itself, for the comparison with the plain f(x) (see wants_x); its value is not returned.
        native: in f's own (real) dtype instead, for a caller that converts only what it reads (float32 rows
        of many points would cost a float64 copy of them all)."""
        points = points.reshape(-1, *self.shape)
        with torch.no_grad():
            outputs = self._batched(points, includes_x) if self.batched else None
            if outputs is None:
                self.batched = False
                outputs = self._looped(points)
                self.count += includes_x  # x itself, evaluated in the loop
                outputs = outputs[:-1] if includes_x else outputs
        rows = points.shape[0] - includes_x
        self.count += rows
        outputs = outputs.reshape(rows, -1)
        if self.scalar and outputs.shape[1] != 1:
            raise NonScalarOutputError(
                f"f(x) has {outputs.shape[1]} elements; a gradient needs a scalar output "
                f"(reduce it, e.g. with .sum(), or use estimate_jacobian)"
            )
        if complex_step:
            if not outputs.is_complex():
                raise CheckInputError(
                    "f(x + ih) returned real values: the complex step needs f to keep the imaginary part "
                    "(no abs(), .real, or casts to a real dtype; f must be analytic)"
                )
            return outputs.imag.to(torch.float64)
        if outputs.is_complex():
            raise CheckInputError("f(x) returned complex values for a real x; check a real-valued function")
        return outputs if native else outputs.to(torch.float64)

    def _batched(self, points: torch.Tensor, includes_x: bool = False) -> torch.Tensor | None:
        reference, self.reference = self.reference, None  # compared once, on the first batch
        if reference is not None and not includes_x:
            points = torch.cat([points, self.x.reshape(1, *self.shape)])
        try:
            with quiet_fallback():
                outputs = self._tensor(torch.func.vmap(self.f)(points))
        # vmap cannot batch every f (.item(), data-dependent branches, in-place ops on views, randomness);
        # the loop below evaluates such an f point by point, and re-raises if f itself is broken.
        except Exception:
            if self.vectorize:
                raise
            self.count += 1  # the call that failed ran f (a module's state may have moved)
            return None
        if reference is None:
            return outputs[:-1] if includes_x else outputs
        self.count += 1  # x itself
        if _same_up_to_rounding(outputs[-1], reference, self.x.dtype, self.reference_size):
            self.at_x = outputs[-1].reshape(-1).to(torch.float64).cpu().numpy()
            return outputs[:-1]
        self.vmap_note = ("torch.func.vmap evaluated f(x) differently from a plain call (a batching rule that "
                          "does not hold for f); its points were evaluated one at a time")
        return None

    @property
    def note(self) -> str:
        """What the report should say of the evaluation: vmap set aside, points where f raised ("" if nothing)."""
        raised = (f"f raised at {self.raised} of {self.looped} points evaluated one at a time ({self.raised_first}): "
                  f"they count as points where f is not finite") if self.raised else ""
        return "; ".join(filter(None, [self.vmap_note, raised]))

    def _one(self, point: torch.Tensor) -> torch.Tensor:
        return self._tensor(self.f(point))

    def _looped(self, points: torch.Tensor) -> torch.Tensor:
        """f at each point, one at a time. Where f raises at a point for its values (a Cholesky factor of a
        matrix the step made indefinite, a domain check), f is not defined there: its outputs are NaN, as
        where f returns NaN, and the note says so. Where it raises at every point, the error is f's own."""
        values: list[torch.Tensor | None] = []
        failed: list[Exception] = []
        for point in points:
            try:
                values.append(self._one(point))
            except CheckInputError:
                raise
            except (RuntimeError, ValueError, ArithmeticError) as error:
                values.append(None)
                failed.append(error)
        like = next((value for value in values if value is not None), None)
        if like is None:
            raise failed[0]
        if failed:
            lines = str(failed[0]).strip().splitlines()
            self.raised_first = self.raised_first or f"{type(failed[0]).__name__}: {lines[0] if lines else ''}"
        self.raised += len(failed)
        self.looped += len(values)
        nan = torch.full_like(like, float("nan"))
        return torch.stack([nan if value is None else value for value in values])

    @staticmethod
    def _tensor(value: object) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            raise CheckInputError(f"f(x) returned {type(value).__name__}, not a tensor; build it from x with torch ops")
        return value


def _same_up_to_rounding(batched: torch.Tensor, plain: torch.Tensor, dtype: torch.dtype,
                         size: float | None) -> bool:
    """A batched f(x) equals the plain one up to rounding in x's dtype, of values of the given size (a batched
    reduction may round otherwise)."""
    batched, plain = batched.reshape(-1).to(torch.float64), plain.reshape(-1).to(torch.float64)
    if batched.shape != plain.shape:
        return False
    info = torch.finfo(dtype)
    allowed = 16 * info.eps * (float(plain.abs().max()) if size is None else size) + info.tiny
    return bool(((batched - plain).abs() <= allowed).all())
