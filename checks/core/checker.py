"""A gradient checker: autograd's Jacobian against an adaptive Richardson estimate, element by element.

check_jacobian runs the stages in order, each in a module named for it:

1. signature: f as a function of one flat real vector (inputs checked, held fixed, sampled; order 2's
   vector–Jacobian product; fast mode's projections, checks.core.fast);
2. autograd: autograd's Jacobian (reverse or forward mode) and the property checks of its derivatives;
3. evaluate and estimate: f at batches of points (checks.core.evaluate); the adaptive Richardson search
   (its noise probe beside);
4. allowance: how far autograd may be from the estimate, per element;
5. confirm: smaller steps and independent windows for a mismatch; the kink test;
6. verdict: pass / fail / inconclusive per element and for the check (the one place it is decided);
7. report and message: the CheckReport and its words.

Several inputs: f(x, weight, bias) is checked as one function of all inputs' elements concatenated; each
element is named by its input and index ("input `weight`, element (2, 1)"). check_module does this for an
nn.Module's parameters and inputs, and assert_gradients raises for a test suite. Complex inputs and outputs
are checked by their real and imaginary parts; integer, bool and non-tensor arguments are held fixed and named
(checks.core.signature). Beside the Jacobian, every check runs the property checks of checks.core.properties
(f does not change its inputs; a reentrant backward that leaves its output gradient unchanged; undefined
output gradients; a derivative linear in its vector; batched gradients on request). order=2 checks the
Jacobian of the vector–Jacobian product, as gradgradcheck does. atol/rtol replace the estimate's own allowance
by the caller's, judged against the estimate's uncertainty: pass only where autograd is within the tolerance
of every value the estimate allows, fail only where it is outside it for every one (and confirmed, as above;
NaN and inf are judged as above, before any tolerance). The detectable relative error then uses that fail
threshold: (atol + rtol·|estimate| + the estimate's allowance) / |estimate|.

"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .allowance import RESOLUTION, SAFETY, given_tolerance
from .autograd import MODES, Mode, autograd_jacobian, derivative_properties, detached_outputs
from .confirm import ConfirmingSearch, confirm
from .estimate import FIRST_LEVELS
from .evaluate import Evaluator
from .dtypes import dtype_name
from .errors import CheckInputError, NaNInputError
from .fast import Projection, projected_gradients
from .numerical import default_step, machine_epsilon, require_memory, step_floor
from .properties import Graph, unmutated
from .report import CheckReport
from .signature import SecondOrder, Signature, function_name, parameter_names
from .observers import notify
from .validate import flag, integer, memory, no_other_options, number

Function = Callable[..., torch.Tensor]


def check_jacobian(
    f: Function,
    *inputs: object,
    mode: Mode = "reverse",
    order: int = 1,
    atol: float | None = None,
    rtol: float | None = None,
    sample: int | None = None,
    seed: int = 0,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_batched_grad: bool = False,
    names: Sequence[str] | None = None,
    fast: bool = False,
    grad_outputs: torch.Tensor | Sequence[torch.Tensor] | None = None,
    max_step: float | None = None,
    **others: object,
) -> CheckReport:
    """Compare autograd's Jacobian of f at the inputs with an adaptive Richardson estimate.

    A mismatch is a report, not a raise (assert_gradients raises). f takes the inputs and returns a tensor
    or a tuple of tensors. Real floating-point tensors (float32, float64; all checked ones of one dtype and
    device) are checked element by element (where some inputs require grad, those alone, the others held fixed,
    as gradcheck checks them); a complex tensor by its real and imaginary parts (the
    Wirtinger derivatives, as gradcheck checks them); integer and bool tensors and non-tensor arguments are
    held fixed and named in the report (skipped), as are integer outputs in a tuple. A sparse COO input is
    checked at its specified elements (as gradcheck's masked=True), in reverse mode and first order.

    mode       -- "reverse" (plain autograd: torch.autograd.grad) or "forward" (forward-mode derivatives,
                  as gradcheck's check_forward_ad: torch.func.jacfwd, or dual numbers of
                  torch.autograd.forward_ad where torch.func cannot transform f); where f has no forward-mode
                  derivative (a custom Function without jvp) NoForwardModeError says so, as gradcheck does:
                  the backward is never checked in place of the jvp asked for
    order      -- 1 (the Jacobian), or 2: the Jacobian of the vector–Jacobian product J(x)ᵀ·v with respect to
                  the inputs and v (random, from seed), as gradgradcheck: autograd differentiates the
                  backward again (reverse mode: reverse-over-reverse; forward: forward-over-reverse)
    atol, rtol -- a tolerance of your own: each element allowed atol + rtol·|numerical| (a missing one is 0).
                  Judged against the estimate's own uncertainty, recorded beside it: a pass needs autograd
                  within the tolerance however the estimate errs, a fail outside it; NaN never passes
    sample     -- check this many elements of each input, drawn at random with seed (the rest held fixed). Its
                  cost: the estimate evaluates f (at its full size) a few times per sampled element; reverse
                  mode, where f has more outputs than sampled elements, differentiates the backward once per
                  sampled element instead of running one backward per output: the cost grows with k and
                  with the cost of one evaluation of f, not with the number of outputs. Where that table is
                  not what one plain backward gives (a backward outside autograd, or a wrong one), one
                  backward per output makes it after all
    seed       -- seeds every random draw (sample, order 2's v, the property checks' vectors); in the report
    nondet_tol -- how far two backward passes over one graph may differ (the reentrancy check, as
                  gradcheck's nondet_tol; 0: exactly equal); autograd's values are then known to no better,
                  and every element's allowance grows by it
    check_undefined_grad -- check the backward with undefined (None) output gradients, as gradcheck does
    check_batched_grad   -- check that vmap over the backward (is_grads_batched) agrees with a loop
    names      -- the inputs' names (default: f's parameter names)
    fast       -- compare random projections vᵀ·J·u, one per input and output, instead of every element, as
                  gradcheck's fast_mode (checks.core.fast): a few evaluations of f per input, whatever its
                  size; the report's elements are then projections, and a fail says which input's gradient
                  is wrong but not where (rerun without fast to find it)
    grad_outputs -- order 2 only: the output gradient v, as gradgradcheck's grad_outputs: one tensor per
                  differentiable output of f, of its shape (cast to the inputs' dtype); None: drawn at
                  random from seed
    max_step   -- the largest step the estimate takes, relative to max(|x_j|, 1) (default, and at most,
                  ε^(1/7): 0.0058 in float64, 0.1 in float32); smaller keeps its steps from crossing a kink
                  near the inputs (relu of random inputs: "kink nearby"), as gradcheck's small eps does; finer
                  steps still follow where an element needs them, down to ε^(3/4)
    others     -- none: an option of gradcheck's (eps=, raise_exception=, ...) is refused with what replaces it
    """
    no_other_options(others, "check_jacobian")
    if isinstance(mode, (tuple, list)):
        raise CheckInputError(f"mode={mode!r}: a check compares one autograd mode; assert_gradients (and the "
                              f"check_gradients fixture) take a tuple of modes and check each")
    if mode not in MODES:
        raise CheckInputError(f"mode={mode!r} is not an autograd mode; use one of {MODES}")
    integer(order, "order (1: the Jacobian; 2: second derivatives)", minimum=1, maximum=2)
    tolerance = given_tolerance(atol, rtol)
    if sample is not None:
        integer(sample, "sample (elements checked per input)", minimum=1)
    integer(seed, "seed", minimum=0)
    number(nondet_tol, "nondet_tol", minimum=0)
    flag(check_undefined_grad, "check_undefined_grad")
    flag(check_batched_grad, "check_batched_grad")
    flag(fast, "fast (random projections instead of every element)")
    if max_step is not None:
        number(max_step, "max_step (the largest step, relative to max(|x|, 1))", above=0)
    start = time.perf_counter()
    first = Signature(f, inputs, names, sample=sample, seed=seed)
    if grad_outputs is not None and order != 2:
        raise CheckInputError("grad_outputs= weighs the outputs of a second-order check: pass order=2 with it (a "
                              "first-order check compares the whole Jacobian, every output at once)")
    if first.sparse_inputs and (mode == "forward" or order == 2):
        # torch builds a sparse tensor from its values without a forward-mode derivative or a double backward.
        missing = "forward-mode derivative" if mode == "forward" else "second derivative"
        raise CheckInputError(
            f"input `{first.sparse_inputs[0]}` is sparse: its specified elements are checked in reverse mode, "
            f"first order (as gradcheck's masked=True); torch has no {missing} of building a sparse tensor from "
            f"its values. Check f(x.to_dense()) for that")
    g = first if order == 1 else SecondOrder(first, seed, grad_outputs)
    if not torch.isfinite(g.value).all():
        raise NaNInputError(f"{g.call} is not finite at {g.shown()}: the Jacobian there is undefined")
    # f once more at x: a random op or a module's own state makes f differ from call to call, which the message
    # must name as the cause of the noise (not rounding, which float64 would reduce).
    with torch.no_grad():
        nondeterminism = float((g(g.x).detach().to(torch.float64) - g.value.to(torch.float64)).abs().nan_to_num(
            float("inf")).max())
    # Fast mode checks the projections' Jacobian instead; the property checks below still run on g itself.
    checked = Projection(g, seed) if fast else g
    arguments, x, value = checked.arguments, checked.x, checked.value
    memory(value.numel() * x.numel() * 8, f"autograd's Jacobian of {value.numel()} outputs by {x.numel()} inputs",
           "it is held whole in float64 beside a numerical one of the same size; check a smaller x, or "
           "sample=k elements of each input")
    require_memory(x, "richardson")
    # Fast mode in reverse mode projects f's own vector–Jacobian products, on the graph the property checks
    # use too (one forward for both).
    graph = Graph.of(g) if mode == "reverse" else None
    jacobian, used, method, note = projected_gradients(graph, checked) if fast and graph is not None else \
        autograd_jacobian(checked, x, mode, value.numel(), order, function_name(f))
    eps, tiny = machine_epsilon(x.dtype), float(torch.finfo(x.dtype).tiny)
    # ε^(1/7), the optimum of a window of three steps (T22, truncation of order h⁶); smaller steps follow
    # where an element needs them.
    h0 = default_step("richardson", x.dtype, 3).h0
    if max_step is not None:
        # The first batch's steps, max_step down to max_step / 2^(FIRST_LEVELS - 1), stay above the floor.
        least = 2 ** (FIRST_LEVELS - 1) * step_floor(eps)
        if max_step < least:
            raise CheckInputError(f"max_step={max_step:g} leaves no room for the estimate's steps in "
                                  f"{dtype_name(x.dtype)}: they halve from it down to ε^(3/4) = "
                                  f"{step_floor(eps):.2g}; use at least {least:.2g}")
        h0 = min(h0, max_step)
    evaluate = Evaluator(checked.at_points, x, checked.vectorize, scalar=False, reference=value,
                         reference_size=checked.reference_size if fast else None)
    # f's first call showed whether it changes its input in place (then the estimate's points are not reused).
    untouched = unmutated(first.names, first.before, first.after)
    # Fast mode settles for √ε: one batch of steps where the projection is smooth.
    search = ConfirmingSearch(evaluate, x, value, h0, eps, tiny, SAFETY, RESOLUTION,
                              checked.rounding_scale if fast else None, math.sqrt(eps) if fast else None,
                              reuse_points=untouched.outcome == "pass")
    search.run()
    # f's relative noise, per output: ε for an accurately computed f_i, more where f amplifies its rounding
    # (and so does its backward, through the same operations; and f's noise at x ± h grows with |f(x ± h)|, an
    # error of the same relative size in the estimate). Per output: one ill-conditioned row must not widen
    # the allowance of every other.
    amplification = search.amplification()
    relative_noise = eps * np.maximum(1.0, amplification)
    evidence = confirm(search, jacobian, relative_noise, nondet_tol)
    # Plus f(x) twice above, autograd's own forward and the property checks' (reverse mode: one graph).
    evaluations = evaluate.count + 3 + (graph is not None)
    note = "; ".join(filter(None, [note, evaluate.note]))
    # A wrong gradient that is 0 because an output is cut off from the inputs is named as such.
    detached = detached_outputs(g, graph) if bool(evidence.suspect.any()) else ()
    properties = (untouched,
                  *derivative_properties(g, used, seed, nondet_tol, check_undefined_grad, check_batched_grad, graph))
    report = CheckReport(
        autograd=jacobian, numerical=evidence.numerical, allowed=evidence.allowed, details=search.details,
        levels=torch.from_numpy(search.tried.copy()), kink=evidence.kink, domain=evidence.domain,
        unstable=evidence.unstable, unconfirmed=evidence.unconfirmed, unresolved=evidence.unresolved,
        converged=evidence.converged, noise=torch.from_numpy(search.noise()),
        amplification=float(amplification.max(initial=0.0)), safety=SAFETY, mode=used, method=method,
        note=note, dtype=dtype_name(x.dtype), device=x.device.type,
        arguments=arguments, output_shape=tuple(value.shape) if len(g.outputs) > 1 or fast else g.outputs[0].shape,
        evaluations=evaluations, seconds=time.perf_counter() - start, resolution=RESOLUTION,
        first_step=h0, nearby_max_step=evidence.max_step,
        outputs=checked.outputs, skipped=g.skipped, call=g.call, order=order, seed=seed, tolerance=tolerance,
        properties=properties, detached=detached, projections=checked.projections if fast else None,
        nondeterminism=nondeterminism,
    )
    notify(report)  # checks.core.observers: whoever keeps a log of checks (a book's ledger) sees it
    return report


class GradientMismatchError(AssertionError):
    """assert_gradients found elements of autograd's Jacobian outside their allowance."""


class InconclusiveGradientError(AssertionError):
    """assert_gradients could not judge some elements (a kink, f not finite near the inputs, or an estimate
    too uncertain), and none failed: the gradient is neither vouched for nor refuted. The message says why,
    per element, and what would settle it."""


def assert_gradients(f: Function, *inputs: object, **options) -> CheckReport | tuple[CheckReport, ...]:
    """Raise unless autograd's Jacobian of f at the inputs agrees with the numerical one: for test suites.

    GradientMismatchError (an AssertionError) names the gradient that is wrong ("the gradient with respect
    to input `b`") and each mismatched element by input and index, with both values, the difference and the
    allowance; InconclusiveGradientError (also an AssertionError) says which elements could not be judged
    and why. Options as for check_jacobian (atol=, rtol=, mode=, order=, sample=, ...). Returns the report
    on a pass. mode=("reverse", "forward") checks both modes in one call (gradcheck's check_forward_ad=True
    beside its backward check): one check per mode, in that order, each with its own estimate, raising for
    the first that does not pass; returns their reports.
    """
    __tracebackhide__ = True  # pytest shows the message, not this frame
    return each_mode(functools.partial(check_jacobian, f, *inputs), raise_unless_passed, options)


def each_mode(check: Callable[..., CheckReport], settle: Callable[[CheckReport], CheckReport],
              options: dict[str, object]) -> CheckReport | tuple[CheckReport, ...]:
    """settle(check(**options)), once per mode where mode= is a tuple of modes (their reports, in order)."""
    __tracebackhide__ = True
    modes = options.get("mode", "reverse")
    if not isinstance(modes, (tuple, list)):
        return settle(check(**options))
    if not modes or len(set(modes)) != len(modes) or not set(modes) <= set(MODES):
        raise CheckInputError(f"mode={modes!r}: give each autograd mode at most once, from {MODES}")
    return tuple(settle(check(**{**options, "mode": mode})) for mode in modes)


def check_module(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: object,
                 inputs: bool = True, **options) -> CheckReport:
    """check_jacobian of loss(module(*args)) with respect to the module's trainable parameters, each named
    as in module.named_parameters() ("0.weight"), and to its floating-point inputs, each named as in the
    module's forward ("x"); integer inputs (token indices) and non-tensors are held fixed and named.

    inputs  -- False: check the parameters alone, every arg held fixed
    options -- as for check_jacobian
    """
    if not isinstance(module, torch.nn.Module):
        raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not callable(loss):
        raise CheckInputError(f"loss must be a function of the module's output, got {type(loss).__name__}")
    flag(inputs, "inputs (check the gradient with respect to the module's inputs too)")
    named = [(name, parameter) for name, parameter in module.named_parameters() if parameter.requires_grad]
    checked_args = args if inputs else ()
    if not named and not any(isinstance(a, torch.Tensor) and a.dtype.is_floating_point for a in checked_args):
        raise CheckInputError(f"{type(module).__name__} has no parameters that require grad"
                              + (" and no floating-point input" if inputs else " (and inputs=False)")
                              + ": nothing to check")
    names = [name for name, _ in named]
    arg_names = parameter_names(module.forward, len(checked_args)) if checked_args else []
    if set(arg_names) & set(names) or len(set(arg_names)) != len(arg_names):
        arg_names = [f"input {k}" for k in range(len(checked_args))]

    # functional_call unties shared weights on every call (a sixth of a small module's check); without
    # parameters or buffers shared under two names there is nothing to untie.
    shared = len(list(module.named_parameters(remove_duplicate=False))) != len(list(module.named_parameters())) or \
        len(list(module.named_buffers(remove_duplicate=False))) != len(list(module.named_buffers()))

    def f(*values: object) -> torch.Tensor:
        parameters, given = values[:len(names)], values[len(names):]
        return loss(torch.func.functional_call(module, dict(zip(names, parameters)), tuple(given) or args,
                                               tie_weights=shared))

    # Detached: an input that requires grad would otherwise mark the checked inputs (check_jacobian holds the
    # others fixed, as gradcheck does) and hold the parameters; here inputs= says what is checked.
    return check_jacobian(f, *[parameter.detach() for _, parameter in named],
                          *[a.detach() if isinstance(a, torch.Tensor) else a for a in checked_args],
                          names=[*names, *arg_names], **options)


def assert_module_gradients(module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                            *args: object, **options) -> CheckReport | tuple[CheckReport, ...]:
    """assert_gradients for a module's parameters and inputs: check_module, raising as assert_gradients does
    (a tuple of modes too)."""
    __tracebackhide__ = True
    return each_mode(functools.partial(check_module, module, loss, *args), raise_unless_passed, options)


def raise_unless_passed(report: CheckReport) -> CheckReport:
    """The report of a pass; else GradientMismatchError (a fail) or InconclusiveGradientError."""
    __tracebackhide__ = True
    if report.outcome == "fail":
        raise GradientMismatchError(report.message())
    if report.outcome == "inconclusive":
        raise InconclusiveGradientError(report.message())
    return report

