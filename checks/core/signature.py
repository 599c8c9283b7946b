"""What a check differentiates: f's inputs sorted into checked and held fixed, and f as a function of one flat
real vector.

- A real floating-point tensor (float32, float64) is checked, element by element.
- A complex tensor is checked as two real inputs, its real and imaginary parts (`z.real`, `z.imag`), as
  gradcheck does (torch/autograd/gradcheck.py, `_real_and_imag_input`). A complex output is read as its real
  and imaginary parts likewise (`_real_and_imag_output`). The four real partial derivatives of each element
  pair are exactly the information in the Wirtinger derivative ∂f/∂z and the conjugate Wirtinger derivative
  ∂f/∂z̄ (∂f/∂z = ½(∂f/∂a − i·∂f/∂b), ∂f/∂z̄ = ½(∂f/∂a + i·∂f/∂b) for z = a + ib): a backward that returns
  the wrong one (autograd's convention is the conjugate of ∂L/∂z̄ times 2 for a real L) fails these partials.
- Integer and bool tensors, and arguments that are not tensors (a dimension, a flag, a string), have no
  gradient: they are held fixed, passed to f unchanged on every call, and named in the report as skipped.
  gradcheck skips them too.
- Integer and bool outputs in a tuple (the indices of torch.max(x, dim)) are skipped the same way.
- A sparse COO tensor is checked at its specified elements, as gradcheck's masked=True checks it: its
  values are the checked elements (named by their index in the dense tensor), and f receives a sparse tensor
  rebuilt from them at its indices; the elements it does not store never change. Other sparse layouts, and
  COO tensors with dense dimensions, are refused by name.

A sample (sample=k) checks k elements of each input, drawn at random with the check's seed (CS231n's
practice for large inputs); the other elements are held at their values.

Every call of f gets fresh copies of the tensors it receives: a function that changes its input in place
changes a copy, and the report says so (properties.unmutated), instead of corrupting the next evaluation.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from . import sparse
from .dtypes import dtype_name
from .errors import CheckInputError, DtypeError, NaNInputError
from .indices import unravel
from .numerical import machine_epsilon

Function = Callable[..., object]
# The real dtype in which a complex input's parts are checked.
REAL_PART = {torch.complex64: torch.float32, torch.complex128: torch.float64}


@dataclass(frozen=True)
class Argument:
    """One checked input (or one real part of a complex one): its name, shape and where its elements sit
    among the Jacobian's columns (or, for an output, among its rows).

    positions -- the flat positions inside the input that are checked (a sample, or a sparse input's specified
                 elements), in order; None: all
    specified -- a sparse COO input: how many elements it specifies (only those are checked, as gradcheck's
                 masked=True checks them); None: a dense input
    """

    name: str
    shape: tuple[int, ...]
    offset: int
    positions: tuple[int, ...] | None = None
    specified: int | None = None

    @property
    def sampled(self) -> bool:
        """Only a random sample of its elements (of its specified ones, for a sparse input) is checked."""
        if self.positions is None:
            return False
        return self.specified is None or len(self.positions) < self.specified

    @property
    def numel(self) -> int:
        """How many of its elements are checked: its columns in the Jacobian."""
        return self.size if self.positions is None else len(self.positions)

    @property
    def size(self) -> int:
        """How many elements the input has."""
        return math.prod(self.shape)

    def index(self, column: int) -> tuple[int, ...]:
        """The multi-index inside this input of a flattened column."""
        flat = column - self.offset
        if self.positions is not None:
            if not 0 <= flat < len(self.positions):
                raise IndexError(f"column {column} is outside the {len(self.positions)} sampled elements of "
                                 f"`{self.name}`")
            flat = self.positions[flat]
        return unravel(flat, self.shape)


@dataclass(frozen=True)
class Skipped:
    """An argument of f (or an element of its output tuple) that has no gradient, held fixed and named."""

    name: str
    what: str  # e.g. "an int64 tensor", "a str"

    def describe(self) -> str:
        return f"`{self.name}` ({self.what})"


def _autograd_function(f: Function) -> type[torch.autograd.Function] | None:
    """The custom autograd.Function whose apply f is, else None."""
    owner = getattr(f, "__self__", None)
    return owner if isinstance(owner, type) and issubclass(owner, torch.autograd.Function) else None


def function_name(f: Function) -> str:
    """f as a message names it: "`MyFunction`" for MyFunction.apply, else "f"."""
    owner = _autograd_function(f)
    return "f" if owner is None else f"`{owner.__name__}`"


def parameter_names(f: Function, count: int) -> list[str]:
    """f's positional parameter names for `count` arguments; `x` or `input k` where it has none.

    A custom autograd.Function is called through .apply(*args): its names are those of its forward, less the
    context forward receives first (whatever it is called: ctx, self, ...), unless the Function defines
    setup_context, whose forward takes the inputs alone."""
    owner = _autograd_function(f)
    if owner is not None:
        f = owner.forward
    try:
        parameters = [p for p in inspect.signature(f).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # builtins such as torch.sin have no inspectable signature
        parameters = []
    if owner is not None and owner.setup_context is torch.autograd.Function.setup_context:
        parameters = parameters[1:]
    if len(parameters) >= count:
        return [p.name for p in parameters[:count]]
    return ["x"] if count == 1 else [f"input {k}" for k in range(count)]


def _what(value: object) -> str:
    """"an int64 tensor", "a str": what an argument is, for the report."""
    words = f"{dtype_name(value.dtype)} tensor" if isinstance(value, torch.Tensor) else type(value).__name__
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"


def _refuse_dtype(x: torch.Tensor, name: str) -> None:
    """Floating dtypes too coarse (or without arithmetic) for a numerical Jacobian."""
    if x.dtype.is_floating_point and x.element_size() == 1:
        raise DtypeError(f"input `{name}` has dtype {dtype_name(x.dtype)}, a float8 storage format: torch has no "
                         f"arithmetic (and so no autograd) in it; check in float32 or float64")
    if x.dtype in (torch.float16, torch.bfloat16, torch.complex32):
        raise DtypeError(
            f"input `{name}` has dtype {dtype_name(x.dtype)}: its ε = {machine_epsilon(x.dtype):.3g} leaves a "
            f"Richardson estimate only two or three digits, too few to judge a gradient; check in float32 or "
            f"float64"
        )


def _differentiable(x: object) -> bool:
    return isinstance(x, torch.Tensor) and (x.dtype.is_floating_point or x.is_complex())


class Signature:
    """f seen by the checker: a function of one flat real vector (the checked elements of every input, real
    and imaginary parts apart) returning one flat real vector (every differentiable output, complex ones as
    real and imaginary parts). Calling it calls f once; f(x) itself is evaluated at construction.

    arguments -- the checked inputs (a complex `z` as `z.real` and `z.imag`), in f's argument order
    skipped   -- the arguments and outputs held fixed (no gradient), with what they are
    outputs   -- the differentiable outputs, named and placed among the Jacobian's rows
    x         -- the checked elements, flat, in the inputs' real dtype, on their device
    value     -- f(x) as the flat real vector the Jacobian's rows follow
    raw       -- f's own return value at x
    before, after -- copies of every tensor argument before and after that call (f may change its input)
    """

    def __init__(self, f: Function, inputs: Sequence[object], names: Sequence[str] | None = None, *,
                 sample: int | None = None, seed: int = 0) -> None:
        if not callable(f):
            raise CheckInputError(f"f must be a function of tensors, got {type(f).__name__}")
        if not inputs:
            raise CheckInputError("no inputs given: call check_jacobian(f, x) or check_jacobian(f, x, weight, ...)")
        self.f, self.inputs = f, tuple(inputs)
        names = parameter_names(f, len(inputs)) if names is None else [str(name) for name in names]
        if len(names) != len(inputs) or len(set(names)) != len(names):
            raise CheckInputError(f"names={list(names)!r}: give one distinct name per input ({len(inputs)} inputs)")
        self.names = tuple(names)
        # As gradcheck: where some inputs require grad, those are the checked ones, and the others are held
        # fixed (a target, a mask); where none does, every floating-point input is checked.
        self._marked = any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs)
        self._refuse(inputs)
        checked = [(name, x) for name, x in zip(names, inputs) if self._checked(x)]
        reals = {REAL_PART.get(x.dtype, x.dtype) for _, x in checked}
        if len(reals) > 1 or len({x.device for _, x in checked}) > 1:
            raise DtypeError("the inputs differ in dtype or device ("
                             + ", ".join(f"`{name}` {dtype_name(x.dtype)} on {x.device}" for name, x in checked)
                             + "); check them in one dtype on one device")
        self.skipped = tuple(Skipped(name, _what(x) + (", which does not require grad (beside inputs that do)"
                                                       if _differentiable(x) else ""))
                             for name, x in zip(names, inputs) if not self._checked(x))
        generator = torch.Generator().manual_seed(seed)
        arguments: list[Argument] = []
        pieces: list[torch.Tensor] = []
        # Per sampled argument: its full values (the rest held there) and the sampled positions among them.
        self._bases: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # Per sparse COO input (by position among the inputs): the indices its values are rebuilt at.
        self._sparse: dict[int, torch.Tensor] = {}
        offset = 0
        for position, (name, x) in enumerate(zip(names, inputs)):
            if not self._checked(x):
                continue
            # A sparse input's checked elements are its specified values (as gradcheck's masked=True): the others
            # are not stored, so f never sees them change.
            stored, specified, where = x.detach(), None, None
            if x.is_sparse:
                stored = x.detach().coalesce()
                self._sparse[position] = stored.indices()
                where = sparse.flat_positions(stored)
                stored, specified = stored.values(), stored._nnz()
            positions, drawn = where, None
            if sample is not None and sample < stored.numel():
                drawn = sorted(torch.randperm(stored.numel(), generator=generator)[:sample].tolist())
                positions = tuple(drawn if where is None else (where[k] for k in drawn))
            parts = ((f"{name}.real", stored.real), (f"{name}.imag", stored.imag)) if x.is_complex() \
                else ((name, stored),)
            for part, values in parts:
                argument = Argument(part, tuple(x.shape), offset, positions, specified)
                flat = values.reshape(-1)
                if drawn is not None:
                    indices = torch.tensor(drawn, device=flat.device)
                    self._bases[len(arguments)] = (flat.clone(), indices)
                    flat = flat[indices]
                arguments.append(argument)
                pieces.append(flat)
                offset += argument.numel
        self.arguments = tuple(arguments)
        self.x = torch.cat(pieces).contiguous()
        self.before = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        copies = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            self.raw = f(*copies)
        self.after = copies
        self._kept, self.outputs, skipped_outputs = self._read_outputs(self.raw)
        self.skipped += skipped_outputs
        self.value = torch.cat([part.reshape(-1) for part in self._real(self.raw)]).detach()

    def _checked(self, x: object) -> bool:
        """A checked input: floating-point (or complex), and requiring grad where some input does."""
        return _differentiable(x) and (not self._marked or x.requires_grad)

    def _refuse(self, inputs: Sequence[object]) -> None:
        """Bad inputs, named: checked tensors too coarse, empty or not finite; nothing differentiable at all."""
        for name, x in zip(self.names, inputs):
            if not self._checked(x):
                continue
            _refuse_dtype(x, name)
            if x.layout == torch.sparse_coo and x.sparse_dim() != x.dim():
                raise CheckInputError(
                    f"input `{name}` is a hybrid sparse COO tensor ({x.sparse_dim()} sparse and {x.dense_dim()} "
                    f"dense dimensions): the checker checks the specified elements of a sparse COO tensor with "
                    f"sparse dimensions only. Check f(x.to_dense()) for the gradient with respect to every element")
            if x.layout not in (torch.strided, torch.sparse_coo):
                raise CheckInputError(
                    f"input `{name}` is a {str(x.layout).removeprefix('torch.')} tensor: the checker perturbs the "
                    f"elements of dense (strided) tensors, and the specified elements of sparse COO ones. Pass "
                    f"x.to_sparse() (COO) to check its specified elements, or check f(x.to_dense()) for the "
                    f"gradient with respect to every element")
            if x.device.type == "meta":
                raise CheckInputError(f"input `{name}` is on the meta device: it has a shape, {tuple(x.shape)}, but "
                                      f"no values, and a gradient check evaluates f at values; create it on the "
                                      f"CPU or an accelerator")
            if x.is_sparse and x._nnz() == 0:
                raise CheckInputError(f"input `{name}` is sparse and specifies no element: there is nothing to check")
            if x.numel() == 0:
                raise CheckInputError(f"input `{name}` is empty: there is no Jacobian to check")
            values = x.detach().coalesce().values() if x.is_sparse else x
            if not torch.isfinite(values).all():
                raise NaNInputError(f"input `{name}` contains NaN or infinity: {sparse.shown(x)}")
        if not any(_differentiable(x) for x in inputs):
            reasons = [f"`{name}` must be a tensor (torch.tensor(...)), got {type(x).__name__}"
                       + (": pass the inputs one by one, check_jacobian(f, *inputs), where gradcheck takes them as "
                          "one tuple" if isinstance(x, (tuple, list)) and any(map(_differentiable, x)) else "")
                       if not isinstance(x, torch.Tensor) else
                       f"`{name}` has dtype {dtype_name(x.dtype)}, which has no gradient"
                       for name, x in zip(self.names, inputs)]
            error = DtypeError if any(isinstance(x, torch.Tensor) for x in inputs) else CheckInputError
            raise error("no input can be differentiated: " + "; ".join(reasons)
                        + ". A gradient check needs a real floating-point (or complex) tensor, float32 or float64")

    def _read_outputs(self, raw: object) -> tuple[tuple[int, ...], tuple[Argument, ...], tuple[Skipped, ...]]:
        """Which elements of f's output are differentiable (by position in the tuple), their rows, and the
        rest named as skipped. A single output that cannot be differentiated is refused."""
        several = isinstance(raw, (tuple, list))
        values = tuple(raw) if several else (raw,)
        if not values:
            raise CheckInputError("f returned an empty tuple: there is no output to differentiate")
        kept, outputs, skipped, offset = [], [], [], 0
        for position, value in enumerate(values):
            name = f"output {position}" if several else "output"
            if not isinstance(value, torch.Tensor):
                if not several:
                    raise CheckInputError(f"f returned {type(value).__name__}, not a tensor; build it from the "
                                          f"inputs with torch ops")
                skipped.append(Skipped(name, _what(value)))
                continue
            if not _differentiable(value):
                if not several:
                    raise DtypeError(f"f returned dtype {dtype_name(value.dtype)}; only a floating-point (or "
                                     f"complex) output has a Jacobian")
                skipped.append(Skipped(name, _what(value)))
                continue
            parts = (f"{name}.real", f"{name}.imag") if value.is_complex() else (name,)
            for part in parts:
                outputs.append(Argument(part, tuple(value.shape), offset))
                offset += value.numel()
            kept.append(position)
        if not outputs:
            raise DtypeError("f returned no floating-point tensor: "
                                  + ", ".join(s.describe() for s in skipped) + "; there is nothing to differentiate")
        if offset == 0:
            raise CheckInputError("f returned an empty output: there is no Jacobian to check")
        return tuple(kept), tuple(outputs), tuple(skipped)

    def _real(self, raw: object) -> list[torch.Tensor]:
        """The kept outputs as real tensors: a complex one as its real part, then its imaginary part."""
        values = tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
        parts = []
        for position in self._kept:
            value = values[position]
            if not isinstance(value, torch.Tensor) or not _differentiable(value):
                raise CheckInputError(f"f returned {_what(value)} as output {position} at another point, where it "
                                      f"returned a floating-point tensor at x: its outputs must keep their types")
            parts += [value.real, value.imag] if value.is_complex() else [value]
        return parts

    @property
    def sparse_inputs(self) -> tuple[str, ...]:
        """The names of the sparse COO inputs (checked at their specified elements)."""
        return tuple(self.names[position] for position in self._sparse)

    @property
    def vectorize(self) -> bool | None:
        """How the estimate evaluates f at many points: None, by torch.func.vmap where it can (see
        evaluate.Evaluator); False, one point at a time: vmap has no batching rule for building a sparse
        tensor (it falls back to a loop, warning)."""
        return False if self._sparse else None

    def pieces(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """A flat vector of the checked elements cut into one piece per argument."""
        return [flat[a.offset:a.offset + a.numel] for a in self.arguments]

    def arguments_of(self, pieces: Sequence[torch.Tensor], copy: bool = True) -> list[object]:
        """f's arguments rebuilt from one piece per checked argument (fresh copies of the rest). copy=False
        passes the pieces themselves, for points made for one call (the estimate's)."""
        rebuilt, k = [], 0
        for position, x in enumerate(self.inputs):
            if not self._checked(x):
                rebuilt.append(x.detach().clone() if isinstance(x, torch.Tensor) else x)
                continue
            parts = []
            for _ in range(2 if x.is_complex() else 1):
                argument, piece = self.arguments[k], pieces[k]
                if k in self._bases:  # a sample: the other elements held at their values
                    base, positions = self._bases[k]
                    piece = base.index_put((positions,), piece)
                # A copy: f may change its argument in place, which must not reach the flat vector (autograd's
                # leaf, or x itself).
                piece = piece if position in self._sparse else piece.reshape(argument.shape)
                parts.append(piece.clone() if copy else piece)
                k += 1
            value = torch.complex(*parts) if x.is_complex() else parts[0]
            if position in self._sparse:
                value = sparse.rebuilt(self._sparse[position], value, x.shape)
            rebuilt.append(value)
        return rebuilt

    def outputs_of(self, pieces: Sequence[torch.Tensor], copy: bool = True) -> list[torch.Tensor]:
        """f's differentiable outputs for one piece per checked argument, as real tensors."""
        return self._real(self.f(*self.arguments_of(pieces, copy)))

    def outputs_at(self, flat: torch.Tensor, copy: bool = True) -> list[torch.Tensor]:
        """f's differentiable outputs at a flat vector, as real tensors."""
        return self.outputs_of(self.pieces(flat), copy)

    def __call__(self, flat: torch.Tensor) -> torch.Tensor:
        return _flat(self.outputs_at(flat))

    def at_points(self, flat: torch.Tensor) -> torch.Tensor:
        """f at points made for this call alone (the estimate's): no copies of its arguments."""
        return _flat(self.outputs_at(flat, copy=False))

    def shown(self) -> str:
        """The inputs as values, for a message."""
        return ", ".join(f"{name}={sparse.shown(x) if isinstance(x, torch.Tensor) else x!r}"
                         for name, x in zip(self.names, self.inputs))

    @property
    def call(self) -> str:
        """f(x, weight, bias), with f's own argument names."""
        return f"f({', '.join(self.names)})"


def _flat(parts: list[torch.Tensor]) -> torch.Tensor:
    """f's outputs as one flat vector (a single one reshaped, not copied)."""
    return parts[0].reshape(-1) if len(parts) == 1 else torch.cat([part.reshape(-1) for part in parts])


def grad_output_vector(first: Signature, grad_outputs: object) -> torch.Tensor:
    """The caller's output gradients as one flat vector along f's rows, in the inputs' dtype and on their
    device: one tensor per differentiable output of f, in order, each of that output's shape (a complex one
    as its real part, then its imaginary part, as the rows hold that output)."""
    given = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) else (grad_outputs,)
    values = tuple(first.raw) if isinstance(first.raw, (tuple, list)) else (first.raw,)
    if not all(isinstance(gradient, torch.Tensor) for gradient in given):
        kinds = ", ".join(sorted({type(gradient).__name__ for gradient in given}))
        raise CheckInputError(f"grad_outputs must be a tensor, or a tuple of tensors (one per output of f), got "
                              f"{type(grad_outputs).__name__}"
                              + (f" of {kinds}" if isinstance(grad_outputs, (tuple, list)) else ""))
    if len(given) != len(first._kept):
        outputs = ", ".join(f"output {position}" for position in first._kept) if len(values) > 1 else "its output"
        raise CheckInputError(f"grad_outputs holds {len(given)} tensor(s), but f has {len(first._kept)} "
                              f"differentiable output(s) ({outputs}): give one gradient per output, in order")
    parts = []
    for k, (position, gradient) in enumerate(zip(first._kept, given)):
        output = values[position]
        where = f"grad_outputs[{k}]" if len(given) > 1 else "grad_outputs"
        if gradient.shape != output.shape:
            raise CheckInputError(f"{where} has shape {tuple(gradient.shape)}, but the output it weighs has shape "
                                  f"{tuple(output.shape)}")
        if not (gradient.dtype.is_floating_point or gradient.is_complex()) or gradient.is_complex() != output.is_complex():
            kind = "complex" if output.is_complex() else "real floating-point"
            raise DtypeError(f"{where} has dtype {dtype_name(gradient.dtype)}; the output it weighs is "
                             f"{dtype_name(output.dtype)}, so its gradient must be {kind}")
        if not torch.isfinite(gradient).all():
            raise NaNInputError(f"{where} is not finite: a second derivative weighted by it is undefined")
        gradient = gradient.detach()
        parts += [gradient.real, gradient.imag] if gradient.is_complex() else [gradient]
    return torch.cat([part.reshape(-1).to(first.x) for part in parts])


class SecondOrder:
    """The vector–Jacobian product of f as a function of its inputs and of the vector, as gradgradcheck checks
    it: vjp(x, v) = J(x)ᵀ·v, computed by torch.autograd.grad with create_graph=True. Its Jacobian holds the
    second derivatives Σ_i v_i·∂²f_i/∂x² (and Jᵀ itself, with respect to v); autograd differentiates it
    through f's double backward. v (`grad_output`) is the caller's grad_outputs (see grad_output_vector), or
    drawn uniformly from [-1, 1] with the check's seed.
    """

    def __init__(self, first: Signature, seed: int, grad_outputs: object = None) -> None:
        self.first = first
        n = first.x.numel()
        if grad_outputs is None:
            generator = torch.Generator().manual_seed(seed)
            v = (2 * torch.rand(first.value.numel(), generator=generator, dtype=torch.float64) - 1).to(first.x)
        else:
            v = grad_output_vector(first, grad_outputs)
        self.arguments = (*first.arguments, Argument("grad_output", (v.numel(),), n))
        self.skipped = first.skipped
        self.x = torch.cat([first.x, v])
        self.outputs = tuple(Argument(f"gradient of {a.name}", a.shape, a.offset, a.positions)
                             for a in first.arguments)
        self.value = self(self.x).detach()

    def outputs_at(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [self(flat)]

    def at_points(self, flat: torch.Tensor) -> torch.Tensor:
        return self(flat)

    def __call__(self, flat: torch.Tensor) -> torch.Tensor:
        n = self.first.x.numel()
        # v a tensor of its own: a slice of flat sits at storage offset n, and a backward that views its
        # gradient as complex (torch.view_as_real's) refuses an odd offset ("Tensor must have a storage_offset
        # divisible by 2").
        x, v = flat[:n], flat[n:].clone()
        with torch.enable_grad():
            # Under the estimate's no_grad the point is a plain tensor; under autograd (either mode) it is
            # already part of the graph that differentiates this function.
            leaf = x if x.requires_grad else x.detach().requires_grad_(True)
            value = self.first(leaf)
            if not value.requires_grad:  # no output depends on the inputs: a zero gradient
                return torch.zeros_like(x)
            (gradient,) = torch.autograd.grad(value, leaf, v, create_graph=True, allow_unused=True)
        return torch.zeros_like(x) if gradient is None else gradient

    @property
    def vectorize(self) -> bool | None:
        return self.first.vectorize

    def shown(self) -> str:
        return self.first.shown()

    @property
    def call(self) -> str:
        return self.first.call
