"""Benchmark (a script, not a test): functions with kinks near random points, where gradcheck's fixed step of
1e-6 seldom crosses one and this checker's first steps (ε^(1/7): 0.006 in float64, 0.1 in float32) often do.

    PYTHONPATH=$PWD python benchmarks/kinks.py [--seeds 20] [--dtypes float64,float32]

Cases, each with torch's own backward (correct) and a planted bug: sorted values (a backward gathering where
it should scatter), topk's values (the bug: the first two gradients swapped), median along a row (the bug:
the gradient to the next element), max-pooling (the bug: the gradient to the window's left column), a clamp
(the bug: its mask wider than its bounds), and a small relu network checked by check_module against a
squared loss (the bug: a backward leaking 0.01 of the gradient below 0). Inputs: randn, one batch per seed.

Printed per case and dtype, over the seeds: this checker's outcomes for the correct backward (a fail is a
false alarm) and for the bug (a pass is a missed bug), and gradcheck's (float64, its defaults) for both,
on the elementwise cases.
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter
from collections.abc import Callable

import torch

from checks import check_jacobian, check_module
from checks.teaching.mutants import LeakingReLU, mutant


def _rows(seed: int, shape: tuple[int, ...] = (8, 32)) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _sorted(t: torch.Tensor) -> torch.Tensor:
    return t.sort(-1).values


def _topk(t: torch.Tensor) -> torch.Tensor:
    return t.topk(3, -1).values


def _median(t: torch.Tensor) -> torch.Tensor:
    return t.median(-1).values


def _pool(t: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.max_pool2d(t, 2)


def _clamp(t: torch.Tensor) -> torch.Tensor:
    return t.clamp(-0.3, 0.7)


def _one_hot(t: torch.Tensor, index: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(t).scatter(-1, index, g)


ELEMENTWISE = {
    "sorted values": (_sorted, mutant(_sorted, lambda t, g: g.gather(-1, t.sort(-1).indices), "SortGathers"),
                      _rows),
    "topk values": (_topk, mutant(_topk, lambda t, g: _one_hot(t, t.topk(3, -1).indices[..., [1, 0, 2]], g),
                                  "TopkSwapped"), _rows),
    "median": (_median, mutant(_median, lambda t, g: _one_hot(t, ((t.median(-1).indices + 1) % t.shape[-1])[..., None],
                                                                g[..., None]), "MedianNext"), _rows),
    "max_pool2d": (_pool, mutant(_pool, lambda t, g: torch.nn.functional.interpolate(g, scale_factor=2)
                                 * (torch.arange(t.shape[-1]) % 2 == 0).to(t.dtype), "PoolFirst"),
                   lambda seed: _rows(seed, (2, 3, 8, 8))),
    "clamp(-0.3, 0.7)": (_clamp, mutant(_clamp, lambda t, g: g * ((t > -0.35) & (t < 0.75)).to(g.dtype), "ClampWide"),
                         _rows),
}


def _network(seed: int, activation: type[torch.nn.Module], dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), activation(), torch.nn.Linear(16, 3)).to(dtype)


def _loss(y: torch.Tensor) -> torch.Tensor:
    return (y ** 2).mean()


def _gradcheck(f: Callable, x: torch.Tensor) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return "pass" if torch.autograd.gradcheck(f, (x.clone().requires_grad_(),), raise_exception=False) else "fail"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--dtypes", type=str, default="float64,float32")
    args = parser.parse_args()
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    torch.set_num_threads(1)
    print(f"{'case':<18} {'dtype':<8} {'correct: pass/inconcl./FAIL':<28} {'bug: fail/inconcl./PASS':<24} "
          f"gradcheck float64: correct, bug")
    for name in [*ELEMENTWISE, "relu network"]:
        theirs = Counter()
        for dtype in dtypes:
            right_outcomes, wrong_outcomes = Counter(), Counter()
            for seed in range(args.seeds):
                if name == "relu network":
                    x = _rows(2000 + seed, (16, 6)).to(dtype)
                    right_outcomes[check_module(_network(seed, torch.nn.ReLU, dtype), _loss, x).outcome] += 1
                    wrong_outcomes[check_module(_network(seed, LeakingReLU, dtype), _loss, x).outcome] += 1
                    continue
                right, wrong, make = ELEMENTWISE[name]
                x = make(seed)
                right_outcomes[check_jacobian(right, x.to(dtype)).outcome] += 1
                wrong_outcomes[check_jacobian(wrong, x.to(dtype)).outcome] += 1
                if dtype == torch.float64:
                    theirs[("correct", _gradcheck(right, x))] += 1
                    theirs[("bug", _gradcheck(wrong, x))] += 1
            correct = "/".join(str(right_outcomes[o]) for o in ("pass", "inconclusive", "fail"))
            bug = "/".join(str(wrong_outcomes[o]) for o in ("fail", "inconclusive", "pass"))
            gradcheck = f"{theirs[('correct', 'pass')]} pass, {theirs[('bug', 'fail')]} fail" if theirs else "-"
            print(f"{name:<18} {str(dtype)[6:]:<8} {correct:<28} {bug:<24} {gradcheck}", flush=True)


if __name__ == "__main__":
    main()
