"""Benchmark (a script, not a test): the cost of one check as the input grows, beside gradcheck's.

    PYTHONPATH=$PWD python benchmarks/scale.py [--sizes 16,64,256,1024,4096] [--dtypes float64,float32]
        [--threads 1,0] [--repeat 3]

Cases: SiLU elementwise on n = 16 ... 4096 elements (a diagonal Jacobian, n × n), and a Linear(64, 64)
module on a batch of 8 inputs by check_module (its weight, bias and input: 4,672 columns, 512 rows; gradcheck
gets the same function of the same three tensors). Per case, dtype and thread count (0: torch's default),
each timed as the fastest of --repeat runs (one for the slowest cases), the checkers alternated: this
checker's check_jacobian, gradcheck's slow mode (fast_mode=False, its default), gradcheck's fast mode
(fast_mode=True) and this checker's fast mode (fast=True); the ratios of each checker to gradcheck's mode of
the same kind, and the outcomes (gradcheck's "fail" in float32 is its tolerance meeting float32 rounding, the
comparison the book draws). Timings depend on the machine; read them as ratios.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from checks import check_jacobian, check_module

# Above this many seconds a run is not repeated: its time is not noise-dominated.
SLOW = 5.0


@dataclass(frozen=True)
class Case:
    name: str
    n: int  # columns of the Jacobian
    ours: Callable[[bool], str]  # fast mode or not
    gradcheck: Callable[[bool], str]


def elementwise(n: int, dtype: torch.dtype) -> Case:
    x = torch.linspace(-3.0, 3.0, n, dtype=torch.float64).to(dtype)
    f = torch.nn.functional.silu
    return Case(f"silu, n = {n}", n, lambda fast: check_jacobian(f, x, fast=fast).outcome,
                lambda fast: _gradcheck(f, (x,), fast))


def linear(dtype: torch.dtype) -> Case:
    torch.manual_seed(0)
    module = torch.nn.Linear(64, 64).to(dtype)
    x = torch.randn(8, 64, dtype=dtype)
    n = module.weight.numel() + module.bias.numel() + x.numel()

    def f(weight: torch.Tensor, bias: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(inputs, weight, bias)

    leaves = (module.weight.detach(), module.bias.detach(), x)
    return Case("Linear(64, 64), batch 8", n, lambda fast: check_module(module, lambda y: y, x, fast=fast).outcome,
                lambda fast: _gradcheck(f, leaves, fast))


def _gradcheck(f: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], fast: bool) -> str:
    leaves = tuple(t.detach().clone().requires_grad_(True) for t in inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gradcheck warns for float32 inputs; that is the comparison
        passed = torch.autograd.gradcheck(f, leaves, fast_mode=fast, raise_exception=False)
    return "pass" if passed else "fail"


def timed(run: Callable[[], str], repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        outcome = run()
        best = min(best, time.perf_counter() - start)
        if best > SLOW:
            break
    return best, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,256,1024,4096")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--threads", default="1,0", help="torch threads per run; 0: torch's default")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-module", action="store_true", help="leave out the Linear(64, 64) case")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    # Each checker's one-time costs (lazy imports, vmap's set-up) are paid before timing.
    warm = torch.linspace(0.1, 0.9, 6, dtype=torch.float64)
    check_jacobian(torch.sin, warm)
    check_jacobian(torch.sin, warm, fast=True)
    _gradcheck(torch.sin, (warm,), False)
    _gradcheck(torch.sin, (warm,), True)
    header = (f"{'case':<26}{'dtype':<9}{'threads':>8}{'ours s':>10}{'gc slow s':>11}{'gc fast s':>11}"
              f"{'ours fast s':>13}{'ours/slow':>11}{'fast/fast':>11}   outcomes (ours, gc slow, gc fast, ours fast)")
    print(header)
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads or default_threads)
        for dtype in (getattr(torch, name) for name in args.dtypes.split(",")):
            cases = [elementwise(int(n), dtype) for n in args.sizes.split(",")]
            if not args.no_module:
                cases.append(linear(dtype))
            for case in cases:
                ours, ours_outcome = timed(lambda: case.ours(False), args.repeat)
                slow, slow_outcome = timed(lambda: case.gradcheck(False), args.repeat)
                fast, fast_outcome = timed(lambda: case.gradcheck(True), args.repeat)
                ours_fast, ours_fast_outcome = timed(lambda: case.ours(True), args.repeat)
                outcomes = ", ".join((ours_outcome, slow_outcome, fast_outcome, ours_fast_outcome))
                print(f"{case.name:<26}{str(dtype).removeprefix('torch.'):<9}{torch.get_num_threads():>8}"
                      f"{ours:>10.4f}{slow:>11.4f}{fast:>11.4f}{ours_fast:>13.4f}{ours / slow:>11.2f}"
                      f"{ours_fast / fast:>11.2f}   {outcomes}", flush=True)


if __name__ == "__main__":
    main()
