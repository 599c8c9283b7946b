"""Error against step size: sweeps of the estimators, the theory they are held to, and torch's gradcheck.

The chapters on finite differences and precision call these so their code cells stay short; every number
comes from running the estimators at build time.
"""

from __future__ import annotations

import inspect
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from ..core.dtypes import dtype_name, to_dtype
from ..core.errors import StepError
from ..core.numerical import Method, default_step, estimate_gradient, machine_epsilon

Function = Callable[[torch.Tensor], torch.Tensor]

# Leading-order error model for f and its derivatives of order 1: the optimal step and the model's error
# there. That error is an order of magnitude, not a floor: single roundings can cancel, so a measured error
# may fall below it. The complex step has no optimum, only a largest step: its truncation h²/6 stays below
# its rounding ε while h ≤ √(6ε).
THEORY = {
    "forward": {"step": "√ε", "step_factor": 1.0, "step_exponent": 1 / 2, "error": "√ε", "error_exponent": 1 / 2},
    "central": {"step": "ε^(1/3)", "step_factor": 1.0, "step_exponent": 1 / 3, "error": "ε^(2/3)",
                "error_exponent": 2 / 3},
    "complex": {"step": "any h ≤ √(6ε)", "step_factor": 6 ** 0.5, "step_exponent": 1 / 2, "error": "ε",
                "error_exponent": 1.0},
}


@dataclass(frozen=True)
class Sweep:
    """Absolute error of one method in one dtype at each step; steps below the dtype's resolution are cut."""

    method: Method
    dtype: str
    steps: list[float]  # the representable steps actually used
    errors: list[float]
    too_small: float | None  # the largest relative step refused because x + h == x, if any
    chosen: tuple[float, float]  # (step, error) at the method's default step, default_step

    @property
    def best(self) -> tuple[float, float]:
        """(step, error) where the measured error is smallest; of equal errors, the largest step."""
        index = min(range(len(self.errors)), key=lambda i: (self.errors[i], -self.steps[i]))
        return self.steps[index], self.errors[index]


def sweep(f: Function, exact: float, x: float, dtype: str | torch.dtype, method: Method,
          relative_steps: Sequence[float]) -> Sweep:
    """Estimate f'(x) in dtype at each relative step; the error is against exact (float64)."""
    resolved = to_dtype(dtype)
    point = torch.tensor(x, dtype=resolved)
    steps, errors, too_small = [], [], None
    default = estimate_gradient(f, point, method)
    chosen = (float(default.step), abs(float(default.values) - exact))
    for h0 in relative_steps:
        try:
            estimate = estimate_gradient(f, point, method, float(h0))
        except StepError:
            too_small = float(h0) if too_small is None else max(too_small, float(h0))
            continue
        steps.append(float(estimate.step))
        errors.append(abs(float(estimate.values) - exact))
    return Sweep(method, dtype_name(resolved), steps, errors, too_small, chosen)


def theory(method: Method, dtype: str | torch.dtype) -> dict[str, float | str]:
    """The model's optimal step (for the complex step: its largest useful step) and its error there, for f
    of order 1, as formulas and numbers."""
    eps = machine_epsilon(to_dtype(dtype))
    rule = THEORY[method]
    return {
        "step_formula": rule["step"],
        "step": rule["step_factor"] * eps ** rule["step_exponent"],
        "error_formula": rule["error"],
        "error": eps ** rule["error_exponent"],
        "default_step": default_step(method, to_dtype(dtype)).h0,
    }


def model_error(method: Method, dtype: str | torch.dtype, h: float, f0: float, f1: float, f2: float,
                f3: float) -> float:
    """Leading-order error at step h: rounding plus truncation, with f's own derivatives at x.

    The differences round ε|f| and divide it by h; the complex step subtracts nothing, so it rounds only
    the derivative itself, ε|f'|.
    """
    eps = machine_epsilon(to_dtype(dtype))
    if method == "forward":
        return eps * abs(f0) / h + h * abs(f2) / 2
    if method == "central":
        return eps * abs(f0) / h + h * h * abs(f3) / 6
    return eps * abs(f1) + h * h * abs(f3) / 6


MARKERS = {"forward": ("o", "tab:blue", "full"), "central": ("s", "tab:orange", "none"),
           "complex": ("^", "tab:green", "none")}


def error_plot(sweeps: Sequence[Sweep], derivatives: tuple[float, float, float, float]):
    """One log-log panel per dtype, one above the other: measured error per method, the model, the
    optimal step, the model's error there, and the chosen step.

    derivatives -- (f(x), f'(x), f''(x), f'''(x)) for the model curves. An error of exactly 0 cannot be
    drawn on a log axis: it is drawn as a downward triangle on the panel's bottom edge, below every other
    error, and the legend says so. Every other error is drawn where it is. Marker shapes differ per method
    (filled circles, hollow squares, hollow triangles) so a series under another still shows.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from .figures import STYLE, log_ticks

    dtypes = list(dict.fromkeys(s.dtype for s in sweeps))
    width, height = STYLE["figure.figsize"]
    # The phone style, one panel per row; the legend goes above the panels (constrained layout makes room
    # for it), where no entry covers a point.
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(dtypes), 1, figsize=(width, height * len(dtypes) + 2.4), squeeze=False)
        handles: dict[str, Line2D] = {}
        for axis, dtype in zip(axes[:, 0], dtypes):
            eps = machine_epsilon(to_dtype(dtype))
            panel = [s for s in sweeps if s.dtype == dtype]
            positive = [e for s in panel for e in (*s.errors, s.chosen[1]) if e > 0]
            bottom = min(positive) / 10
            for item in panel:
                marker, colour, fill = MARKERS[item.method]
                drawn = [(h, e) for h, e in zip(item.steps, item.errors) if e > 0]
                zeros = [h for h, e in zip(item.steps, item.errors) if e == 0]
                handles[f"{item.method}: measured"] = axis.loglog(
                    [h for h, _ in drawn], [e for _, e in drawn], marker, ls="", ms=5, color=colour,
                    fillstyle=fill, mew=1.2)[0]
                if zeros:
                    axis.loglog(zeros, [bottom] * len(zeros), "v", ms=6, color=colour, clip_on=False)
                    handles["exactly 0 (drawn at the bottom)"] = Line2D([], [], marker="v", ls="", ms=6,
                                                                        color="grey")
                grid = sorted(item.steps)
                axis.loglog(grid, [model_error(item.method, dtype, h, *derivatives) for h in grid], "-",
                            lw=1, color=colour, alpha=0.6)
                rule = theory(item.method, dtype)
                axis.axvline(rule["step"], color=colour, ls=":", lw=1.2)
                axis.axhline(rule["error"], color=colour, ls="--", lw=1, alpha=0.7)
                step, error = item.chosen
                axis.loglog([step], [error if error > 0 else bottom], "*", ms=14, color=colour, mec="black")
            axis.set_ylim(bottom=bottom)
            log_ticks(axis)
            axis.set_title(f"{dtype} (ε = {eps:.2g})")
            axis.set_xlabel("step h")
            axis.set_ylabel("|estimate − f′(x)|")
            axis.grid(True, which="major", alpha=0.3)
        grey = {"color": "grey"}
        handles.update({
            "model: rounding + truncation": Line2D([], [], lw=1, **grey),
            "optimal step (complex: largest)": Line2D([], [], ls=":", lw=1.2, **grey),
            "model's error at that step": Line2D([], [], ls="--", **grey),
            "default step (chosen)": Line2D([], [], marker="*", ls="", mec="black", ms=12, **grey),
        })
        fig.legend(handles.values(), handles.keys(), loc="outside upper left", frameon=False, handletextpad=0.4)
    return fig


# gradcheck's own defaults, read from its signature so the table states what really ran.
GRADCHECK_DEFAULTS = {name: parameter.default for name, parameter in
                      inspect.signature(torch.autograd.gradcheck).parameters.items() if name in ("eps", "atol", "rtol")}


@dataclass(frozen=True)
class GradcheckRun:
    """What torch.autograd.gradcheck did: passed or not, its message, its warnings, how long it took, and,
    when it failed, the Jacobians it printed (flattened; in fast mode, the slow-mode recomputation it adds).
    """

    dtype: str
    fast_mode: bool
    passed: bool
    message: str
    warnings: tuple[str, ...]
    seconds: float
    atol: float
    rtol: float
    analytical: tuple[float, ...] = ()
    numerical: tuple[float, ...] = ()

    def worst(self) -> dict[str, object] | None:
        """The element furthest outside gradcheck's allowance |a - n| <= atol + rtol·|n| (torch.allclose of
        analytical a and numerical n), with both values; None when gradcheck printed no Jacobians."""
        if not self.analytical or len(self.analytical) != len(self.numerical):
            return None
        rows = [{"element": index, "analytical": a, "numerical": n, "difference": abs(a - n),
                 "allowed": self.atol + self.rtol * abs(n)}
                for index, (a, n) in enumerate(zip(self.analytical, self.numerical))]
        return max(rows, key=lambda row: row["difference"] - row["allowed"])


def run_gradcheck(f: Function, x: torch.Tensor, *, fast_mode: bool = False, **options: float) -> GradcheckRun:
    """torch.autograd.gradcheck(f, (x,)) with its defaults unless given; a mismatch is an outcome, not a crash."""
    point = x.detach().clone().requires_grad_(True)
    used = {**GRADCHECK_DEFAULTS, **options}
    with warnings.catch_warnings(record=True) as caught, _printed_in_full():
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            passed = bool(torch.autograd.gradcheck(f, (point,), fast_mode=fast_mode, **options))
            message = "gradcheck returned True"
        except GradcheckError as error:
            passed, message = False, str(error).strip()
        seconds = time.perf_counter() - start
    found = tuple(dict.fromkeys(str(w.message).strip() for w in caught))
    analytical, numerical = _printed_jacobians(message, fast_mode)
    return GradcheckRun(dtype_name(x.dtype), fast_mode, passed, message, found, seconds,
                            float(used["atol"]), float(used["rtol"]), analytical, numerical)


@contextmanager
def _printed_in_full() -> Iterator[None]:
    # gradcheck prints its Jacobians with torch's print options: 4 decimals by default, too few to show
    # by how much they differ. 17 significant digits round-trip a float64.
    saved = {name: getattr(torch._tensor_str.PRINT_OPTS, name) for name in ("precision", "sci_mode")}
    torch.set_printoptions(precision=17, sci_mode=True)
    try:
        yield
    finally:
        torch.set_printoptions(**saved)


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|[-+]?inf")


def _printed_jacobians(message: str, fast_mode: bool) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The numerical and analytical Jacobians in gradcheck's failure message, flattened.

    Slow mode prints them after "numerical:" and "analytical:"; fast mode prints two projections there and
    the full Jacobians, recomputed in slow mode, after "Numerical:" and "Analytical:".
    """
    labels = ("Numerical:", "Analytical:") if fast_mode else ("numerical:", "analytical:")
    if labels[0] not in message or labels[1] not in message:
        return (), ()
    numerical_text = message.split(labels[0], 1)[1].split(labels[1], 1)[0]
    analytical_text = message.split(labels[1], 1)[1].split("\n\n", 1)[0]

    def numbers(text: str) -> tuple[float, ...]:
        return tuple(float(item) for item in _NUMBER.findall(re.sub(r"dtype=torch\.\w+", "", text)))

    return numbers(analytical_text), numbers(numerical_text)
