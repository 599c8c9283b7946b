"""Benchmark (a script, not a test): estimator accuracy against exact derivatives, and time per check.

    PYTHONPATH=$PWD python benchmarks/estimators.py [--repeats 5]

Accuracy: the largest |estimate - exact| of each method at its default step, per dtype, on functions whose
derivatives are known in closed form. Time: one gradient check (estimate + compare with autograd) with
checks' estimators, batched with vmap and looped, against torch.autograd.gradcheck (float64, defaults), for
inputs of growing size. Timings depend on the machine; read them as ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from checks.numerical import METHODS, estimate_gradient

FUNCTIONS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]] = {
    "sum sin(x)·x": (lambda x: (torch.sin(x) * x).sum(), lambda x: torch.cos(x) * x + torch.sin(x)),
    "sum exp(x)": (lambda x: torch.exp(x).sum(), torch.exp),
    "logsumexp(x)": (lambda x: torch.logsumexp(x, 0), lambda x: torch.softmax(x, 0)),
    "sum tanh(x)²": (lambda x: torch.tanh(x).pow(2).sum(), lambda x: 2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2)),
}


def accuracy() -> None:
    x64 = torch.linspace(-1.5, 2.0, 8, dtype=torch.float64)
    print("Accuracy: largest |estimate - exact| at the default step (x: 8 points in [-1.5, 2])")
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
    columns = ["central vmap", "central loop", "richardson vmap", "gradcheck", "gradcheck fast"]
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

        runs = [ours("central", True), ours("central", False), ours("richardson", True), theirs(False), theirs(True)]
        print(f"{n:>6}" + "".join(f"{1e3 * seconds(run, repeats):>17.3f}" for run in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    accuracy()
    timing(args.repeats)


if __name__ == "__main__":
    main()
