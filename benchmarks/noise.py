"""Benchmark (a script, not a test): does rounding noise in f ever make the checker fail a correct gradient?

    PYTHONPATH=$PWD python benchmarks/noise.py [--seeds 5] [--ks 0,10,1e3,1e6] [--sets suite,hard,op_db]
        [--limit N] [--dtypes float64,float32]

An ill-conditioned f rounds differently on another machine (other BLAS kernels, vector widths, thread
counts): its last bits, amplified by the conditioning, are noise the checker must allow for. Modelled by
checks.teaching.mutants.noisy: every output of f multiplied by 1 + u·k·ε, u uniform in [-1, 1] afresh at
each evaluation (seeded). k = 0 is f itself.

Sets: suite (checks.teaching.mutants: 32 correct ops, 43 mutants), hard (checks.teaching.mutants.hard_cases:
the chapter's hard cases, each with its correct and its wrong backward) and op_db (torch's operator
database as benchmarks/op_db.py samples it, torch's own backwards taken as correct; --limit spreads a
shorter run over the alphabet).

Printed per set, dtype and k, over all seeds: the correct backwards' outcomes (a fail there is a false
alarm, and the point of this script is that there are none), the wrong backwards' outcomes (detections:
how many the noise costs), and the median seconds per check. Then every false alarm, by name and seed.
op_db's known PyTorch imprecisions (benchmarks/op_db.py KNOWN_IMPRECISE) are real errors, not false alarms:
they are counted apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

from checks import check_jacobian
from checks.teaching.mutants import correct_cases, hard_cases, noisy, scaled_cases, structural_cases


def suite_cases(dtype: torch.dtype):
    """(name, f, inputs, wrong) for the mutant suite in a dtype."""
    for case in [*correct_cases(), *scaled_cases(), *structural_cases()]:
        yield case.name, case.f, [case.input(dtype)], case.wrong


def hard(dtype: torch.dtype):
    for case in hard_cases():
        if case.dtype == dtype:
            yield f"{case.name} (correct)", case.right, [case.input()], False
            yield f"{case.name} (wrong)", case.wrong, [case.input()], True


def op_db_cases(dtype: torch.dtype, limit: int | None):
    sys.path.insert(0, str(Path(__file__).parent))
    from op_db import Settings, _known, repeatable_dense_outputs, samples  # benchmarks/op_db.py: its samples

    for name, f, inputs in samples(limit, None):
        xs = [t.to(dtype) for t in inputs]
        try:
            if repeatable_dense_outputs(f, xs) is None:
                continue
        except Exception:  # noqa: BLE001 - the op refuses this dtype
            continue
        yield ("* " if _known(name, Settings()) else "") + name, f, xs, False


def outcome(f, inputs) -> str:
    try:
        return check_jacobian(f, *inputs, names=[f"input {k}" for k in range(len(inputs))]).outcome
    except Exception as error:  # noqa: BLE001 - a refusal (f not finite at the sample, an empty output)
        return f"error: {type(error).__name__}"


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ks", type=str, default="0,10,1e3,1e6")
    parser.add_argument("--sets", type=str, default="suite,hard,op_db")
    parser.add_argument("--limit", type=int, default=None, help="op_db: about this many ops, spread over op_db")
    parser.add_argument("--dtypes", type=str, default="float64,float32")
    args = parser.parse_args()
    ks = [float(k) for k in args.ks.split(",")]
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    check_jacobian(torch.sin, torch.linspace(0.1, 0.9, 6, dtype=torch.float64))  # one-time costs, before timing
    print(f"noise: f × (1 + u·k·ε), u uniform in [-1, 1] per evaluation; {args.seeds} seeds per k (k = 0: one run)")
    print(f"{'set':<7}{'dtype':<9}{'k':>7}{'checks':>8}  {'correct: pass/inconcl./FAIL':<29}"
          f"{'wrong: fail/inconcl./pass':<27}{'s/check':>9}")
    alarms = []
    for chosen in args.sets.split(","):
        for dtype in dtypes:
            cases = list({"suite": suite_cases, "hard": hard,
                          "op_db": lambda d: op_db_cases(d, args.limit)}[chosen](dtype))
            for k in ks:
                right, wrong, seconds = Counter(), Counter(), []
                for seed in range(args.seeds if k else 1):
                    for name, f, inputs, is_wrong in cases:
                        start = time.perf_counter()
                        verdict = outcome(noisy(f, k, seed) if k else f, inputs)
                        seconds.append(time.perf_counter() - start)
                        known = name.startswith("* ")
                        (wrong if is_wrong else right)["known " + verdict if known else verdict] += 1
                        if verdict == "fail" and not is_wrong and not known:
                            alarms.append(f"{chosen} {dtype} k={k:g} seed {seed}: {name}")
                if not seconds:
                    continue
                correct = f"{right['pass']}/{right['inconclusive']}/{right['fail']}"
                if right["known fail"]:
                    correct += f" (+{right['known fail']} known)"
                detections = f"{wrong['fail']}/{wrong['inconclusive']}/{wrong['pass']}" if wrong else "—"
                print(f"{chosen:<7}{str(dtype).removeprefix('torch.'):<9}{k:>7g}{len(seconds):>8}  {correct:<29}"
                      f"{detections:<27}{statistics.median(seconds):>9.4f}", flush=True)
    print(f"\nFalse alarms (a correct backward failed): {len(alarms)}")
    for alarm in alarms:
        print(f"  {alarm}")


if __name__ == "__main__":
    main()
