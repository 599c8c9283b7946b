"""Error against step size: sweeps of the estimators, the theory they are held to, and torch's gradcheck.

The chapters on finite differences and precision call these so their code cells stay short; every number
comes from running the estimators at build time.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.autograd.gradcheck import GradcheckError

from .dtypes import dtype_name, to_dtype
from .errors import StepError
from .numerical import Method, default_step, estimate_gradient, machine_epsilon

Function = Callable[[torch.Tensor], torch.Tensor]

# Leading-order error model for f, f'', f''' of order 1: optimal step and the smallest error it reaches.
THEORY = {
    "forward": {"step": "√ε", "step_exponent": 1 / 2, "floor": "√ε", "floor_exponent": 1 / 2},
    "central": {"step": "ε^(1/3)", "step_exponent": 1 / 3, "floor": "ε^(2/3)", "floor_exponent": 2 / 3},
    "complex": {"step": "any h ≤ √ε", "step_exponent": 1 / 2, "floor": "ε", "floor_exponent": 1.0},
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
        """(step, error) where the measured error is smallest."""
        index = min(range(len(self.errors)), key=self.errors.__getitem__)
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
    """The theoretical optimal step and error floor for f of order 1, as formulas and numbers."""
    eps = machine_epsilon(to_dtype(dtype))
    rule = THEORY[method]
    return {
        "step_formula": rule["step"],
        "step": eps ** rule["step_exponent"],
        "floor_formula": rule["floor"],
        "floor": eps ** rule["floor_exponent"],
        "default_step": default_step(method, to_dtype(dtype)).h0,
    }


def model_error(method: Method, dtype: str | torch.dtype, h: float, f0: float, f2: float, f3: float) -> float:
    """Leading-order error at step h: rounding ε|f|/h plus truncation, with f's own derivatives at x."""
    eps = machine_epsilon(to_dtype(dtype))
    if method == "forward":
        return eps * abs(f0) / h + h * abs(f2) / 2
    if method == "central":
        return eps * abs(f0) / h + h * h * abs(f3) / 6
    return eps * abs(f0) + h * h * abs(f3) / 6


def error_plot(sweeps: Sequence[Sweep], derivatives: tuple[float, float, float]):
    """One log-log panel per dtype: measured error per method, the model, optimal step, floor, chosen step.

    derivatives -- (f(x), f''(x), f'''(x)) for the model curves. A measured error of exactly 0 cannot be
    drawn on a log axis; it is drawn at ε/2 and the legend says so.
    """
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(s.dtype for s in sweeps))
    colours = {"forward": "tab:blue", "central": "tab:orange", "complex": "tab:green"}
    fig, axes = plt.subplots(2, (len(dtypes) + 1) // 2, figsize=(10, 7.5), squeeze=False)
    for axis, dtype in zip(axes.flat, dtypes):
        eps = machine_epsilon(to_dtype(dtype))
        for item in (s for s in sweeps if s.dtype == dtype):
            colour = colours[item.method]
            shown = [max(e, eps / 2) for e in item.errors]
            axis.loglog(item.steps, shown, "o", ms=3, color=colour, label=f"{item.method}: measured (0 drawn at ε/2)")
            grid = sorted(item.steps)
            axis.loglog(grid, [model_error(item.method, dtype, h, *derivatives) for h in grid], "-",
                        lw=1, color=colour, alpha=0.6)
            rule = theory(item.method, dtype)
            if item.method != "complex":
                axis.axvline(rule["step"], color=colour, ls=":", lw=1)
            axis.axhline(rule["floor"], color=colour, ls="--", lw=0.8, alpha=0.7)
            step, error = item.chosen
            axis.loglog([step], [max(error, eps / 2)], "*", ms=13, color=colour, mec="black")
        axis.set_title(f"{dtype} (ε = {eps:.2g})")
        axis.set_xlabel("step h")
        axis.set_ylabel("|estimate − f'(x)|")
        axis.grid(True, which="major", alpha=0.3)
    for axis in list(axes.flat)[len(dtypes):]:
        axis.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    extra = [Line2D([], [], color="grey", lw=1), Line2D([], [], color="grey", ls=":"),
             Line2D([], [], color="grey", ls="--"), Line2D([], [], marker="*", ls="", color="grey", mec="black", ms=11)]
    fig.legend(handles + extra, labels + ["model ε|f|/h + truncation", "theoretical optimal step",
                                           "theoretical error floor", "chosen (default) step"],
               loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


@dataclass(frozen=True)
class GradcheckOutcome:
    """What torch.autograd.gradcheck did: passed or not, its message, its warnings, and how long it took."""

    dtype: str
    fast_mode: bool
    passed: bool
    message: str
    warnings: tuple[str, ...]
    seconds: float


def run_gradcheck(f: Function, x: torch.Tensor, *, fast_mode: bool = False, **options: object) -> GradcheckOutcome:
    """torch.autograd.gradcheck(f, (x,)) with its defaults unless given; a mismatch is an outcome, not a crash."""
    point = x.detach().clone().requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            passed = bool(torch.autograd.gradcheck(f, (point,), fast_mode=fast_mode, **options))
            message = "gradcheck returned True"
        except GradcheckError as error:
            passed, message = False, str(error).strip()
        seconds = time.perf_counter() - start
    found = tuple(dict.fromkeys(str(w.message).strip() for w in caught))
    return GradcheckOutcome(dtype_name(x.dtype), fast_mode, passed, message, found, seconds)
