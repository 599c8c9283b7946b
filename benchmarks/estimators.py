"""Benchmark (a script, not a test): estimator accuracy against exact derivatives, and time per check.

    PYTHONPATH=$PWD python benchmarks/estimators.py [--repeats 5]

Accuracy near singular points: the adaptive estimate of checks.check_jacobian (steps chosen per element,
smaller where the tableau does not converge or f leaves its domain) against numdifftools.Derivative (its
defaults) and the fixed-step Richardson estimate, in float64, on functions with exact derivatives from
sympy at points near a singularity or a pole. Printed: each estimate's relative error per point, then the
median and 90th percentile per method, and where an estimate was not finite.

Then: the largest |estimate - exact| of each fixed-step method at its default step, per dtype, and the
time of one gradient check with checks' estimators and with torch.autograd.gradcheck, for inputs of growing
size. Timings depend on the machine; read them as ratios.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import sympy
import torch

from checks.core.checker import check_jacobian
from checks.core.numerical import METHODS, estimate_gradient

SYMBOL = sympy.Symbol("x")
# (name, sympy expression, point): smooth at the point, but near where f is singular, steep or oscillating.
NEAR_SINGULAR: list[tuple[str, sympy.Expr, float]] = [
    ("sqrt(x) at 1e-4", sympy.sqrt(SYMBOL), 1e-4),
    ("sqrt(x) at 1e-8", sympy.sqrt(SYMBOL), 1e-8),
    ("1/x at 1e-3", 1 / SYMBOL, 1e-3),
    ("log(x) at 1e-6", sympy.log(SYMBOL), 1e-6),
    ("log(x) at 1e-3", sympy.log(SYMBOL), 1e-3),
    ("tan(x) at π/2 - 1e-3", sympy.tan(SYMBOL), math.pi / 2 - 1e-3),
    ("tan(x) at π/2 - 1e-5", sympy.tan(SYMBOL), math.pi / 2 - 1e-5),
    ("exp(x) at -20", sympy.exp(SYMBOL), -20.0),
    ("sin(100x) at 0.3", sympy.sin(100 * SYMBOL), 0.3),
    ("tanh(1e4·x) at 1e-5", sympy.tanh(10**4 * SYMBOL), 1e-5),
    ("x^(3/2) at 1e-6", SYMBOL ** sympy.Rational(3, 2), 1e-6),
    ("1/(1 + 25x²) at 0.2", 1 / (1 + 25 * SYMBOL**2), 0.2),
    ("atan(x) at 1e3", sympy.atan(SYMBOL), 1e3),
    ("sin(x)·x at 1.3", sympy.sin(SYMBOL) * SYMBOL, 1.3),
]


def _relative(estimate: float, exact: float) -> float:
    return abs(estimate - exact) / abs(exact) if math.isfinite(estimate) else float("inf")


def near_singular() -> None:
    import numdifftools

    print("Accuracy near singular points, float64: relative error |estimate - exact| / |exact|")
    print(f"{'function and point':<24}{'adaptive (checks)':>19}{'numdifftools':>14}{'Richardson h0':>15}")
    errors: dict[str, list[float]] = {"adaptive (checks)": [], "numdifftools": [], "Richardson h0": []}
    for name, expression, point in NEAR_SINGULAR:
        exact = float(sympy.diff(expression, SYMBOL).subs(SYMBOL, sympy.Float(point, 30)).evalf(30))
        torch_f = sympy.lambdify(SYMBOL, expression, modules=[{"sqrt": torch.sqrt, "log": torch.log,
                                 "tan": torch.tan, "exp": torch.exp, "sin": torch.sin, "tanh": torch.tanh,
                                 "atan": torch.atan}, "math"])
        numpy_f = sympy.lambdify(SYMBOL, expression, modules="numpy")
        x = torch.tensor([point], dtype=torch.float64)
        ours = float(check_jacobian(lambda t: torch_f(t), x).numerical[0, 0])
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            theirs = float(np.asarray(numdifftools.Derivative(numpy_f)(point)).reshape(-1)[0])
        fixed = float(estimate_gradient(lambda t: torch_f(t).sum(), x, "richardson").values[0])
        row = [_relative(ours, exact), _relative(theirs, exact), _relative(fixed, exact)]
        for key, value in zip(errors, row):
            errors[key].append(value)
        print(f"{name:<24}" + "".join(f"{value:>{width}.2e}" for value, width in zip(row, (19, 14, 15))))
    print(f"{'median':<24}" + "".join(f"{statistics.median(v):>{w}.2e}" for v, w in zip(errors.values(), (19, 14, 15))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns interpolating between two infinite errors; the answer is nan
        print(f"{'90th percentile':<24}" + "".join(f"{float(np.percentile(v, 90)):>{w}.2e}"
                                                  for v, w in zip(errors.values(), (19, 14, 15))))
    print(f"{'not finite':<24}" + "".join(f"{sum(not math.isfinite(e) for e in v):>{w}}"
                                         for v, w in zip(errors.values(), (19, 14, 15))))


FUNCTIONS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]] = {
    "sum sin(x)·x": (lambda x: (torch.sin(x) * x).sum(), lambda x: torch.cos(x) * x + torch.sin(x)),
    "sum exp(x)": (lambda x: torch.exp(x).sum(), torch.exp),
    "logsumexp(x)": (lambda x: torch.logsumexp(x, 0), lambda x: torch.softmax(x, 0)),
    "sum tanh(x)²": (lambda x: torch.tanh(x).pow(2).sum(), lambda x: 2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2)),
}


def accuracy() -> None:
    x64 = torch.linspace(-1.5, 2.0, 8, dtype=torch.float64)
    print("\nAccuracy: largest |estimate - exact| at the default step (x: 8 points in [-1.5, 2])")
    print(f"{'function':<16}{'dtype':<10}" + "".join(f"{m:>14}" for m in METHODS))
    for name, (f, df) in FUNCTIONS.items():
        exact = df(x64)
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            cells = []
            for method in METHODS:
                if method == "complex" and dtype in (torch.float16, torch.bfloat16):
                    cells.append("n/a")
                    continue
                estimate = estimate_gradient(f, x64.to(dtype), method)
                cells.append(f"{(estimate.values.double() - exact).abs().max().item():.2e}")
            print(f"{name:<16}{str(dtype).removeprefix('torch.'):<10}" + "".join(f"{c:>14}" for c in cells))


def seconds(run: Callable[[], object], repeats: int) -> float:
    run()  # warm up (vmap tracing, allocator)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timing(repeats: int) -> None:
    f, _ = FUNCTIONS["sum sin(x)·x"]
    print(f"\nTime per check, median of {repeats} (ms), float64, f = sum sin(x)·x")
    columns = ["central vmap", "central loop", "check_jacobian", "gradcheck", "gradcheck fast"]
    print(f"{'n':>6}" + "".join(f"{c:>17}" for c in columns))
    for n in (1, 10, 100, 400):
        x = torch.linspace(-1.5, 2.0, n, dtype=torch.float64)

        def ours(method: str, vectorize: bool) -> Callable[[], object]:
            def run() -> bool:
                leaf = x.clone().requires_grad_(True)
                (autograd,) = torch.autograd.grad(f(leaf), leaf)
                estimate = estimate_gradient(f, x, method, vectorize=vectorize)
                return torch.allclose(estimate.values, autograd, rtol=1e-3, atol=1e-5)
            return run

        def theirs(fast: bool) -> Callable[[], object]:
            return lambda: torch.autograd.gradcheck(f, (x.clone().requires_grad_(True),), fast_mode=fast)

        runs = [ours("central", True), ours("central", False), lambda: check_jacobian(f, x), theirs(False), theirs(True)]
        print(f"{n:>6}" + "".join(f"{1e3 * seconds(run, repeats):>17.3f}" for run in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    near_singular()
    accuracy()
    timing(args.repeats)


if __name__ == "__main__":
    main()
