"""Benchmark (a script, not a test): this checker and gradcheck over torch's own operator database.

    PYTHONPATH=$PWD python benchmarks/op_db.py [--limit N] [--ops name,name] [--dtypes float64,float32]
        [--repeat 3] [--fast] [--samples N] [--mode forward] [--order 2] [--tuned]

torch.testing._internal.common_methods_invocations.op_db lists torch's operators with sample inputs (it
needs the expecttest package). For each differentiable op with a real float64 sample: the first sample
whose differentiable tensors hold at most MAX_ELEMENTS elements (--samples N: the first N, from op_db's
sample_inputs and then its reference_inputs, where some ops add edge cases: zeros, singular matrices,
ties), checked with respect to all of them, in float64 and (the same values rounded) in float32, by
checks.check_jacobian and by torch.autograd.gradcheck with its defaults (slow mode). torch's own
derivatives are taken as correct, so every check that is not a pass is a false alarm or an inconclusive,
unless it is a real imprecision in PyTorch (listed by name).

--mode forward checks forward-mode derivatives (against gradcheck's check_forward_ad), --order 2 second
derivatives (against gradgradcheck), each over the ops op_db says support them; --fast compares the fast
modes instead: check_jacobian(..., fast=True) (random projections) against gradcheck's fast_mode=True.

Printed per dtype: checks made, passes / fails / inconclusive for this checker, gradcheck's passes and
fails, median and total seconds per check for both (each check timed as the fastest of --repeat runs,
the two checkers alternated); then every sample either flagged, with its largest relative difference (and,
for a fail, its worst element), and the ops whose batched evaluation (torch.func.vmap) disagreed with a
plain call of f. Timings depend on the machine; read them as ratios. --limit takes every k-th op so that
a short run still spans the alphabet (it says so). --tuned also runs gradcheck at the setting tuned with
hindsight on the mutant suite (checks.teaching.sensitivity.tune_gradcheck), per dtype, and lists the ops it
flags: whether a setting tuned on one suite carries over to torch's own operators.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from dataclasses import dataclass

import torch

from checks.core.checker import check_jacobian

MAX_ELEMENTS = 40
# Real imprecisions (and a bug) in PyTorch found by this benchmark (see book/how-good-is-a-check.md): not false alarms.
KNOWN_IMPRECISE: dict[str, str] = {
    "nn.functional.hardsigmoid": "float64 backward multiplies by 1.0f / 6.0f, 1/6 rounded to float32 "
                                 "(relative error 3e-8); gradcheck's rtol 1e-3 cannot see it",
    "digamma": "its backward, trigamma (polygamma(1, x)), is off by up to ~4e-10 relative in float64",
    "polygamma": "polygamma(n + 1, x), the backward of polygamma(n, x), is off by up to ~7e-10 relative",
    "special.polygamma": "as polygamma",
    "special.ndtr": "the forward is rounded to absolute 2^-54 (5.6e-17) in the far left tail (relative error "
                    "22 % at x = -8.3): its finite differences are flat where its exact backward is not",
    "nn.functional.celu": "the float64 derivative takes its input scale 1/alpha from alpha rounded to float32 "
                          "(relative error 3.6e-7 at x = -20, alpha = 0.8); the forward is exact",
    "native_group_norm": "a bug, not an imprecision: with rstd's gradient undefined its backward drops mean's "
                         "gradient too, and the other way round (the undefined-output-gradients check)",
}
# Found by the forward-mode and second-order sweeps (--mode forward, --order 2): wrong there only.
KNOWN_BY_MODE: dict[tuple[str, int], dict[str, str]] = {
    ("forward", 1): {"cholesky_inverse": "its jvp is wrong (pytorch/pytorch#196682): off by 1e-5 near the "
                                         "identity, by O(1) for larger off-diagonal entries"},
    ("forward", 2): {"cholesky_inverse": "forward-over-reverse goes through the same wrong jvp"},
    ("reverse", 2): {
        "nn.functional.binary_cross_entropy": "the double backward divides by (p(1 - p) + 1e-12)^2: relative "
                                              "error 2e-12 / (p(1 - p)); the first derivative is exact",
        "lgamma": "its second derivative is trigamma, off by up to ~5e-10 relative (as digamma's backward)",
        "mvlgamma": "a sum of lgammas: its second derivative is a sum of trigammas (as lgamma)",
    },
}
# Ops whose samples are outside what a Jacobian check can judge, with the reason; listed, not counted.
NOT_DIFFERENTIABLE = {
    "float": "a cast to a coarser dtype: f is a staircase on the scale of float32's spacing",
    "cfloat": "a cast to a coarser dtype (complex64)",
    "half": "a cast to float16", "chalf": "a cast to complex32", "bfloat16": "a cast to bfloat16",
    "normal": "random (torch.normal)",
    "nn.functional.max_unpool1d": "samples with colliding indices (op_db tests gradients on the .grad variant)",
    "nn.functional.max_unpool2d": "as max_unpool1d", "nn.functional.max_unpool3d": "as max_unpool1d",
    "as_strided_scatter": "overlapping memory: the Jacobian depends on the write order",
    "torch.ops.aten._safe_softmax.default": "its sample holds -inf",
    "sparse.mm": "sparse inputs",
}


@dataclass
class Row:
    op: str
    dtype: str
    elements: int
    ours: str
    ours_seconds: float
    gradcheck: str
    gradcheck_seconds: float
    worst_relative: float
    summary: str
    note: str
    sample: str = "sample 0"
    worst: str = ""  # the worst failing element, as the report's message names it
    tuned: str = ""  # gradcheck at the setting tuned on the mutant suite (--tuned), else ""


def samples(limit: int | None, names: set[str] | None):
    """(name, f, differentiable float64 inputs) per op, its first small sample, f returning only its floating
    outputs."""
    for name, f, inputs, _ in labelled_samples(limit, names):
        yield name, f, inputs


def labelled_samples(limit: int | None, names: set[str] | None, count: int = 1, mode: str = "reverse",
                     order: int = 1):
    """(name, f, differentiable float64 inputs, which sample) per op and sample, f returning only its floating
    outputs: the first `count` small samples of each op that supports the mode and order asked for."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if op.supports_autograd and torch.float64 in op.supported_dtypes("cpu")]
    if mode == "forward":
        ops = [op for op in ops if (op.supports_fwgrad_bwgrad if order == 2 else op.supports_forward_ad)]
    elif order == 2:
        ops = [op for op in ops if op.supports_gradgrad]
    if names:
        ops = [op for op in ops if op.name in names or f"{op.name}.{op.variant_test_name}" in names]
    if limit:
        ops = ops[:: max(1, len(ops) // limit)][:limit]
    for op in ops:
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if op.name in NOT_DIFFERENTIABLE or full in NOT_DIFFERENTIABLE:
            continue
        for function, leaves, which in _small_samples(op, count):
            yield full, function, leaves, which


def _small_samples(op, count: int):
    """Up to `count` samples whose differentiable tensors hold at most MAX_ELEMENTS elements: op_db's
    sample_inputs, then its reference_inputs (the edge cases some ops add: zeros, singular matrices, ties,
    extremal values), each sample once."""
    torch.manual_seed(0)
    found, seen = 0, set()
    for kind in ("sample_inputs", "reference_inputs"):
        try:
            for k, sample in enumerate(getattr(op, kind)("cpu", torch.float64, requires_grad=True)):
                leaves = [t for t in (sample.input, *sample.args) if isinstance(t, torch.Tensor) and t.requires_grad]
                if not isinstance(sample.input, torch.Tensor) or not leaves or \
                        any(t.layout != torch.strided for t in leaves):
                    continue
                if sum(t.numel() for t in leaves) > MAX_ELEMENTS or any(t.numel() == 0 for t in leaves):
                    continue
                key = _identity(sample)
                if key in seen:
                    continue
                seen.add(key)
                yield _function(op, sample), [t.detach() for t in leaves], f"{kind.split('_')[0]} {k}"
                found += 1
                if found >= count:
                    return
        except Exception:  # an op whose sample generator needs what this machine lacks: not a check
            continue


def _identity(sample) -> tuple:
    """A sample's values and arguments, to skip a reference input that repeats a sample input."""
    def key(value):
        if isinstance(value, torch.Tensor):
            return (tuple(value.shape), str(value.dtype), tuple(value.detach().reshape(-1).tolist()))
        if isinstance(value, (tuple, list)):
            return tuple(key(v) for v in value)
        return repr(value)

    return key(sample.input), key(list(sample.args)), tuple(sorted((k, key(v)) for k, v in sample.kwargs.items()))


def _function(op, sample):
    positions = [k for k, t in enumerate((sample.input, *sample.args))
                 if isinstance(t, torch.Tensor) and t.requires_grad]

    def outputs(*tensors):
        values = [sample.input, *sample.args]
        for position, tensor in zip(positions, tensors):
            values[position] = tensor
        dtype = tensors[0].dtype
        kwargs = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                  for k, v in sample.kwargs.items()}
        values = [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]
        # op_db's own conventions, as its gradcheck tests use them: a wrapper that makes the input valid
        # (symmetric for eigh, positive definite for cholesky) and a post-processing of the output (fixing
        # the sign or phase of eigenvectors, which a Jacobian cannot be taken of otherwise).
        out = sample.output_process_fn_grad(op.gradcheck_wrapper(op, *values, **kwargs))
        return list(out) if isinstance(out, (tuple, list)) else [out]

    # The outputs autograd differentiates, decided once with leaves that require grad: integer outputs
    # (indices) and outputs autograd leaves alone (native_layer_norm's saved mean and rstd) are left out,
    # as gradcheck leaves them out.
    leaves = [t.detach().clone().requires_grad_(True) for t in (sample.input, *sample.args)
              if isinstance(t, torch.Tensor) and t.requires_grad]
    keep = [k for k, o in enumerate(outputs(*leaves))
            if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()) and o.requires_grad]

    def f(*tensors):
        found = outputs(*tensors)
        # A complex output is checked as its real and imaginary parts (gradcheck does the same for real inputs).
        kept = tuple(torch.view_as_real(found[k]) if found[k].is_complex() else found[k] for k in keep)
        return kept[0] if len(kept) == 1 else kept

    return f


@dataclass(frozen=True)
class Settings:
    """What each check asks for: fast mode, the autograd mode, the order."""

    fast: bool = False
    mode: str = "reverse"
    order: int = 1

    def gradcheck(self, f, leaves: tuple[torch.Tensor, ...], **options: float) -> bool:
        """gradcheck (order 1) or gradgradcheck (order 2) asked the same question, at its defaults or at the
        eps, atol and rtol given; raises GradcheckError."""
        if self.order == 2:
            return torch.autograd.gradgradcheck(f, leaves, check_fwd_over_rev=self.mode == "forward",
                                                check_rev_over_rev=self.mode == "reverse", fast_mode=self.fast,
                                                check_undefined_grad=self.mode == "reverse", **options)
        return torch.autograd.gradcheck(f, leaves, fast_mode=self.fast, check_forward_ad=self.mode == "forward",
                                        check_backward_ad=self.mode == "reverse",
                                        check_undefined_grad=self.mode == "reverse", **options)


def repeatable_dense_outputs(f, xs: list[torch.Tensor]) -> tuple[torch.Tensor, ...] | None:
    """f's outputs at xs, or None where there is no dense Jacobian to check: no floating output, a sparse one, or
    a random op (two calls differ). Raises where the op refuses the inputs."""
    with torch.no_grad():
        first, second = f(*xs), f(*xs)
    first = first if isinstance(first, tuple) else (first,)
    second = second if isinstance(second, tuple) else (second,)
    if not first or any(a.layout != torch.strided for a in first):
        return None
    if not all(torch.equal(a, b) for a, b in zip(first, second)):
        return None  # random ops (dropout and the like) have no Jacobian to estimate
    return first


def run(name: str, f, inputs: list[torch.Tensor], dtype: torch.dtype, repeat: int,
        settings: Settings = Settings(), sample: str = "sample 0", tuned: dict[str, float] | None = None) -> Row | None:
    xs = [t.to(dtype) for t in inputs]
    try:
        first = repeatable_dense_outputs(f, xs)
        if first is None or not sum(a.numel() for a in first) or not all(torch.isfinite(x).all() for x in xs):
            return None  # an empty output, or inputs that are not finite (reference inputs of sign): no Jacobian
    except Exception:  # noqa: BLE001 - the op refuses this dtype (float32 only via float64 sample, etc.)
        return None
    def ours() -> tuple[str, str, float, str]:
        try:
            report = check_jacobian(f, *xs, names=[f"input {k}" for k in range(len(xs))], fast=settings.fast,
                                    mode=settings.mode, order=settings.order)
            wrong = report.mismatch
            relative = (report.difference / torch.maximum(report.numerical.abs(), report.autograd.abs()))[wrong]
            worst = next((line.strip() for line in report.message().splitlines() if line.startswith("  ")), "") \
                if report.outcome == "fail" else ""
            return (report.outcome, report.summary(), float(relative.max()) if wrong.any() else 0.0, report.note,
                    worst)
        except Exception as error:  # noqa: BLE001 - a refusal (e.g. f not finite at the sample) is a result too
            return "error", f"{type(error).__name__}: {str(error).splitlines()[0][:120]}", 0.0, "", ""

    def theirs(**options: float) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck warns for every float32 input; that is the comparison
            try:
                return "pass" if settings.gradcheck(f, tuple(x.clone().requires_grad_(True) for x in xs),
                                                    **options) else "fail"
            except Exception:  # noqa: BLE001 - GradcheckError, or gradcheck refusing the op
                return "fail"

    # Alternated, and the fastest of `repeat` runs each: a busy moment of the machine hits one run, not
    # one checker. Both checkers are deterministic, so every run gives the same verdict.
    ours_times, theirs_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        verdict, summary, relative, note, worst = ours()
        ours_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        gradcheck = theirs()
        theirs_times.append(time.perf_counter() - start)
    return Row(name, str(dtype).removeprefix("torch."), sum(x.numel() for x in xs), verdict, min(ours_times),
               gradcheck, min(theirs_times), relative, summary, note, sample, worst, theirs(**tuned) if tuned else "")


def main() -> None:
    warnings.simplefilter("ignore")  # torch's batching-rule and beta-API warnings, printed once per op
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="check about this many ops, spread over op_db")
    parser.add_argument("--ops", type=str, default="", help="comma-separated op names")
    parser.add_argument("--dtypes", type=str, default="float64,float32")
    parser.add_argument("--repeat", type=int, default=3, help="time each check as the fastest of this many runs")
    parser.add_argument("--fast", action="store_true", help="both checkers' fast modes (random projections)")
    parser.add_argument("--samples", type=int, default=1, help="check up to this many samples of each op")
    parser.add_argument("--mode", choices=("reverse", "forward"), default="reverse")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1,
                        help="2: second derivatives (check_jacobian's order=2 against gradgradcheck)")
    parser.add_argument("--tuned", action="store_true", help="also gradcheck at the setting tuned on the mutant suite")
    args = parser.parse_args()
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    settings = Settings(args.fast, args.mode, args.order)
    tuned: dict[str, dict[str, float]] = {}
    if args.tuned:
        from checks.teaching.mutants import suite
        from checks.teaching.sensitivity import tune_gradcheck

        for dtype in dtypes:
            tuning = tune_gradcheck(suite(), dtype)
            tuned[tuning.dtype] = vars(tuning.setting)
            print(f"gradcheck tuned on the mutant suite, {tuning.dtype}: {tuning.setting.words()} "
                  f"({tuning.false_alarms} false alarms, {tuning.detections} of {tuning.mutants} detected there)")
    cases = list(labelled_samples(args.limit, set(filter(None, args.ops.split(","))), args.samples, args.mode,
                                  args.order))
    ops = len({name for name, *_ in cases})
    scope = f"every k-th op, {ops} ops" if args.limit else f"all {ops} ops with a small real sample"
    print(f"op_db: {scope}; up to {args.samples} sample(s) each ({len(cases)} samples), at most {MAX_ELEMENTS} "
          f"differentiable elements; {args.mode} mode, order {args.order}"
          + ("; fast modes: check_jacobian(fast=True) and gradcheck(fast_mode=True)" if args.fast else ""))
    # Each checker's one-time costs (lazy imports, vmap's set-up) are paid before timing.
    warm = torch.linspace(0.1, 0.9, 6, dtype=torch.float64)
    check_jacobian(torch.sin, warm, fast=args.fast, mode=args.mode, order=args.order)
    settings.gradcheck(torch.sin, (warm.clone().requires_grad_(True),))
    rows = [row for dtype in dtypes for name, f, inputs, which in cases
            if (row := run(name, f, inputs, dtype, args.repeat, settings, which,
                           tuned.get(str(dtype).removeprefix("torch.")))) is not None]
    print(f"skipped (random, sparse, no floating output, or refusing the dtype): "
          f"{len(cases) * len(dtypes) - len(rows)} sample-dtype pairs")
    print(f"\n{'dtype':<9}{'checks':>7}{'ours pass':>11}{'fail':>6}{'inconcl.':>10}{'error':>7}"
          f"{'gradcheck pass':>16}{'fail':>6}{'ours s/check (median, total)':>31}{'gradcheck s/check':>22}"
          f"{'ours/gradcheck per op (median)':>32}")
    for dtype in dict.fromkeys(row.dtype for row in rows):
        mine = [row for row in rows if row.dtype == dtype]
        count = lambda key, value: sum(getattr(row, key) == value for row in mine)  # noqa: E731
        ours_t, theirs_t = [r.ours_seconds for r in mine], [r.gradcheck_seconds for r in mine]
        print(f"{dtype:<9}{len(mine):>7}{count('ours', 'pass'):>11}{count('ours', 'fail'):>6}"
              f"{count('ours', 'inconclusive'):>10}{count('ours', 'error'):>7}{count('gradcheck', 'pass'):>16}"
              f"{count('gradcheck', 'fail'):>6}{statistics.median(ours_t):>15.4f}{sum(ours_t):>16.1f}"
              f"{statistics.median(theirs_t):>11.4f}{sum(theirs_t):>11.1f}"
              f"{statistics.median(a / b for a, b in zip(ours_t, theirs_t)):>32.2f}")
    print("\nNot passed by this checker (known PyTorch imprecisions marked *):")
    for row in rows:
        if row.ours != "pass":
            mark = "*" if _known(row.op, settings) and row.ours == "fail" else " "
            print(f" {mark}{row.dtype:<8}{row.op:<40}{row.sample:<14}{row.ours:<13}gradcheck {row.gradcheck:<5}"
                  f"worst rel {row.worst_relative:<10.3g}{row.summary}")
            if row.worst:
                print(f"{'':<50}{row.worst}")
    for name, why in {**KNOWN_IMPRECISE, **_by_mode(settings)}.items():
        print(f" * {name}: {why}")
    batched_wrongly = sorted({row.op for row in rows if "vmap" in row.note})
    print(f"torch.func.vmap batched f wrongly (caught; its points evaluated one at a time): "
          f"{', '.join(batched_wrongly) or 'none'}")
    print("Left out (a Jacobian check cannot judge them):")
    for name, why in NOT_DIFFERENTIABLE.items():
        print(f"   {name}: {why}")
    for dtype in dict.fromkeys(row.dtype for row in rows):
        alarms = [row for row in rows if row.dtype == dtype and row.ours == "fail" and not _known(row.op, settings)]
        both = [f"{row.op} ({row.sample})" for row in alarms if row.gradcheck == "fail"]
        print(f"False alarms in {dtype} (fails outside the known imprecisions): {len(alarms)} "
              f"{[f'{row.op} ({row.sample})' for row in alarms]}; of them failed by gradcheck too: {len(both)} {both}")
        if tuned:
            flagged = [f"{row.op} ({row.sample})" for row in rows
                       if row.dtype == dtype and row.tuned == "fail" and not _known(row.op, settings)]
            print(f"  gradcheck tuned on the mutant suite ({dtype}), the same: {len(flagged)} {flagged}")


def _by_mode(settings: Settings) -> dict[str, str]:
    """The known imprecisions of this mode and order (second order in forward mode goes through reverse mode's
    double backward too)."""
    found = dict(KNOWN_BY_MODE.get((settings.mode, settings.order), {}))
    if settings.order == 2:
        found = {**KNOWN_BY_MODE[("reverse", 2)], **found}
    return found


def _known(op: str, settings: Settings) -> bool:
    known = {**KNOWN_IMPRECISE, **_by_mode(settings)}
    return op in known or op.split(".")[0] in known or any(op.startswith(f"{name}.") for name in known)


if __name__ == "__main__":
    main()
