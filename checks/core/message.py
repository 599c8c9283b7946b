"""Message: a check's report in words, as torch.testing.assert_close words a mismatch: what differed,
where, by how much, what was allowed; which gradient is wrong; why an element could not be judged."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from .dtypes import to_dtype
from .numerical import default_step, machine_epsilon

if TYPE_CHECKING:
    from .report import CheckReport, Element

# f's measured noise up to this many times ε·(|f| + Σ|J||x|) is the few roundings of an accurately computed f
# (each up to ε/2, and ECnoise's estimate of them is itself rough): only above it does the message diagnose
# amplification. The allowances include the measured noise either way.
AMPLIFIED = 10.0
# Differences up to this many units of rounding are "of rounding's size": a few operations' worth, each up to ε/2.
ROUNDINGS = 64

REASONS = {
    "non-finite": "autograd gave nan or inf where f is finite at x ± h and the estimate is finite: the "
                  "derivative there is a finite number (NaN in a backward is usually 0/0 at a removable "
                  "singularity, 0·log 0, or an overflowing untaken branch of torch.where)",
    "infinite": "autograd gave inf and the estimate does not settle on a finite value (or is the same "
                "infinity): f may have a vertical tangent at x, and an infinite slope is not one a difference "
                "quotient can confirm; check at another point",
    "kink": "one-sided differences disagree at every step: f is not differentiable at x, or a kink lies "
            "within h of it; check at another point",
    "kink nearby": "f changed at the coarser steps and not at the finest: a kink or breakpoint lies between "
                   "them, near x but not at it (relu just left of 0, a clamp's bound), or f's change at the fine "
                   "steps is below its rounding; {kink_remedy}",
    "domain": "f is not finite at x ± h for every step tried: x is on the edge of f's domain; check at an "
              "interior point",
    "unconfirmed": "autograd is outside the chosen estimate's allowance, but no independent estimate (a window "
                   "sharing none of its steps) resolves the mismatch and sides with it, or the finest steps that "
                   "can resolve it do not: one window of several can agree with its neighbours by chance (f's "
                   "rounding noise, an oscillation aliased at coarse steps, kinks the coarse steps cross); "
                   "{remedy}",
    "unstable": "estimates at coarse and fine steps disagree, or f is flat between jumps at a fine scale: f "
                "varies on a scale near the step (a staircase such as round, or a fast oscillation); check at "
                "another point",
    "unresolved": "f did not change at any step tried, where autograd's value says it changes by less than f's "
                  "rounding: the estimate 0 resolves nothing (f's change is below its resolution, as in a "
                  "float32 tail); {remedy}",
    "imprecise": "the estimate's uncertainty (its error and f's rounding noise divided by the step) stays "
                 "above {resolution:g} of the entry's scale at every step tried; {remedy}",
    "tolerance": "the estimate's uncertainty is too large to tell whether autograd is within the atol and rtol "
                 "given; loosen them (an rtol alone allows nothing where the entry is near 0: add an atol), or "
                 "{remedy}",
}


def explain(report: CheckReport, reason: str) -> str:
    """Why an element could not be judged (a key of REASONS: "kink", "domain", ...), and what would settle
    it."""
    remedy = "make f deterministic (two calls at x differ: model.eval(), or a seed inside f)" \
        if report.nondeterminism else "check in float64" if report.dtype == "float32" else \
        "check at another point, or rescale f so that it does not vary on a scale near ε"
    kink_remedy = near_kink_remedy(report) if reason == "kink nearby" else ""
    return REASONS[reason].format(resolution=report.resolution, remedy=remedy, kink_remedy=kink_remedy)


def near_kink_remedy(report: CheckReport) -> str:
    """What settles a kink near x: float64's finer steps (they need not cross a kink float32's cross), or in
    float64 a point farther from it or a smaller max_step."""
    if report.dtype == "float32":
        finer = default_step("richardson", torch.float32, 3).h0 / default_step("richardson", torch.float64, 3).h0
        return f"check in float64 (its steps start {finer:.0f} times finer)"
    below = f"max_step={_round_down(report.nearby_max_step)}" if math.isfinite(report.nearby_max_step) else \
        "a max_step= below its distance"
    return (f"check at a point farther from the kink than the first step, {report.first_step:.2g}·"
            f"max(|x|, 1), or pass {below} (f did not change on either side of x below it)")


def _round_down(step: float) -> str:
    """step to one significant digit, rounded down (a max_step above it would cross the kink again)."""
    exponent = math.floor(math.log10(step))
    return f"{math.floor(step / 10 ** exponent) * 10 ** exponent:.0e}".replace("e-0", "e-")


def summary(report: CheckReport) -> str:
    """One line: the outcome, how many elements failed or could not be judged, mode, dtype, device."""
    total = report.autograd.numel()
    failed, unsure = int(report.mismatch.sum()), int(report.inconclusive.sum())
    unit = "elements" if report.projections is None else "projections"
    nonfinite = int(report.nonfinite.sum())
    elements = f"{failed} of {total} {unit} outside their allowance"
    if nonfinite:
        kinds = {"nan" if math.isnan(value) else "inf" for value in report.autograd[report.nonfinite].tolist()}
        elements += f" ({nonfinite} of them {' or '.join(sorted(kinds))} in autograd where the estimate is finite)"
    wrong = [elements] if failed else []
    wrong += [f"{check.name} failed" for check in report.properties if check.outcome == "fail"]
    state = {"pass": "passed",
             "fail": "failed: " + ", ".join(wrong),
             "inconclusive": f"inconclusive: {unsure} of {total} {unit} could not be judged"}[report.outcome]
    if report.outcome == "fail" and unsure:
        state += f", {unsure} could not be judged"
    kinks = f", {report.kinks} at a kink" if report.kinks else ""
    order = "second order, " if report.order == 2 else ""
    order += "fast: projections, " if report.projections is not None else ""
    return (f"{state}{kinks} ({order}{report.mode} mode, {report.dtype}, {report.device}, "
            f"{report.evaluations} evaluations of f)")


def where(report: CheckReport, element: Element) -> str:
    """An element named by input and index, and by output and index (fast mode: the projection of an
    input and an output)."""
    if report.projections is not None:
        output = next(o for o in reversed(report.outputs) if o.offset <= element.output)
        return f"the projection of input `{element.argument}` and {output.name}"
    return f"input `{element.argument}`, element {element.index}, {report.output_label(element.output)}"


def wrong_gradients(report: CheckReport, how: str = "wrong") -> str:
    """The backward that is wrong, by input: "the gradient with respect to input `b` is wrong" ("" if
    none); how: what it is ("wrong", or "imprecise" where every difference is of rounding's size)."""
    wrong = list(dict.fromkeys(report.argument_of(int(j)).name for j in report.mismatch.any(0).nonzero()[:, 0]))
    if not wrong:
        return ""
    names = " and ".join(", ".join(f"`{name}`" for name in wrong).rsplit(", ", 1))
    several = len(wrong) > 1
    if report.order == 2:
        return (f"the derivative{'s' * several} of the vector–Jacobian product with respect to "
                f"input{'s' * several} {names} {'are' if several else 'is'} {how} (f's double backward)")
    return (f"the gradient{'s' * several} with respect to input{'s' * several} {names} "
            f"{'are' if several else 'is'} {how}")


def message(report: CheckReport, limit: int = 3) -> str:
    """A torch.testing.assert_close-style account: what differed, where, by how much, what was allowed;
    which gradient is wrong; the worst `limit` elements."""
    total = report.autograd.numel()
    unit = "elements" if report.projections is None else "projections"
    signature = report.call or f"f({', '.join(a.name for a in report.arguments)})"
    how = f"{report.method} ({report.mode} mode)"
    elements = report.elements("fail", "inconclusive")
    wrong = [e for e in elements if e.verdict == "fail"]
    unsure = [e for e in elements if e.verdict == "inconclusive"]
    head = {"fail": "are not close!", "inconclusive": "could not be judged!", "pass": "are close."}
    if any(check.outcome == "fail" for check in report.properties) and not wrong:
        head["fail"] = "are close, but a property check failed!"
    what = "Gradients" if report.order == 1 else "Second derivatives"
    mode = ", forward mode" if report.mode == "forward" else ""  # reverse mode is the one assumed
    lines = [f"{what} of {signature} {head[report.outcome]} ({report.dtype}, {report.device}{mode})"]
    nonfinite = [e for e in wrong if e.reason == "non-finite"]
    finite = [e for e in wrong if e.reason != "non-finite"]
    hint = rounding_sized(report, finite) if finite and not nonfinite else ""
    conjugate = conjugated(finite) if finite and not nonfinite else ""
    if wrong:
        called = "imprecise: every difference is of rounding's size (below)" if hint else "wrong"
        lines.append(f"Mismatched {unit}: {len(wrong)} / {total} ({100 * len(wrong) / total:.1f}%): "
                     f"{wrong_gradients(report, called)}")
    if wrong and report.detached:
        names = " and ".join(f"`{name}`" for name in report.detached)
        lines.append(f"{names} {'does' if len(report.detached) == 1 else 'do'} not require grad: detached from the "
                     f"inputs inside f (.detach(), torch.no_grad, .item() or a numpy round trip), so autograd's "
                     f"gradient through it is 0 while f's value still changes with the inputs")
    # A NaN or inf has no difference to rank: such elements are listed first, on their own.
    if nonfinite:
        lines.append(f"Not finite: {len(nonfinite)} element{'s' * (len(nonfinite) > 1)} where autograd gave nan "
                     f"or inf and the estimate is finite:")
        for e in nonfinite[:limit]:
            lines.append(f"  {where(report, e)}: autograd gave {e.autograd:g} where the estimate is finite "
                         f"({e.numerical:.10g} ± {e.allowed:.2g})")
        if len(nonfinite) > limit:
            lines.append(f"  and {len(nonfinite) - limit} more")
    if finite:
        def relative(e: Element) -> float:
            return e.difference / abs(e.numerical) if e.numerical else float("inf")

        absolute, worst_relative = max(finite, key=lambda e: e.difference), max(finite, key=relative)
        lines += [
            f"Greatest absolute difference: {absolute.difference:.3g} at {where(report, absolute)} "
            f"(up to {absolute.allowed:.3g} allowed)",
            f"Greatest relative difference: {relative(worst_relative):.3g} at {where(report, worst_relative)} "
            f"(up to {worst_relative.allowed / abs(worst_relative.numerical or 1):.3g} allowed)",
        ]
        lines += filter(None, [hint, conjugate])
        # The worst first; the count of the rest is in the "Mismatched elements" line.
        for e in sorted(finite, key=lambda e: -e.difference / e.allowed if e.allowed else -math.inf)[:limit]:
            lines.append(f"  {where(report, e)}: autograd {e.autograd:.10g} vs numerical {e.numerical:.10g}, "
                         f"difference {e.difference:.3g} (up to {e.allowed:.3g} allowed)")
    if unsure:
        lines.append(f"{unit.capitalize()} not judged: {len(unsure)} / {total}")
        for reason in dict.fromkeys(e.reason for e in unsure):
            mine = [e for e in unsure if e.reason == reason]
            lines.append(f"  {reason}: {explain(report, reason)}")
            for e in mine[:limit]:
                lines.append(f"    {where(report, e)}: autograd {e.autograd:.6g}, numerical {e.numerical:.6g} "
                             f"± {e.supported:.2g}")
            if len(mine) > limit:
                lines.append(f"    and {len(mine) - limit} more")
    for check in report.properties:
        lines += check.message()
    detectable = report.detectable_relative_error
    # A failure says what was allowed where it failed; a pass or an inconclusive says what it could catch.
    if detectable is not None and not wrong:
        lines.append(f"Detectable: autograd off by a relative error above {detectable:.3g} fails in every judged "
                     f"element (the largest allowed / |numerical| among them)")
    if report.nondeterminism:
        lines.append(f"f is not deterministic: two calls at x differ by up to {report.nondeterminism:.3g} (a random "
                     f"op such as dropout draws anew, or a module in train mode changes its own state): the "
                     f"estimate compares f at nearby points, so that difference is its noise, which another dtype "
                     f"does not remove; check model.eval(), or fix the randomness inside f")
    # Beside a clear failure (no mismatch of rounding's size) it explains nothing.
    elif report.amplification > AMPLIFIED and (report.outcome != "fail" or hint):
        lines.append(f"f amplifies its own rounding: its noise, measured at x, is up to {report.amplification:.3g} × "
                     f"ε·(|f| + Σ|J||x|) (an ill-conditioned solve, or cancellation); the allowances include it")
    allowed = f"{report.safety:g} × (its error estimate + f's rounding noise / step)" if report.tolerance is None else \
        (f"atol + rtol·|numerical| (atol={report.tolerance.atol:g}, rtol={report.tolerance.rtol:g}, given) however "
         f"the estimate errs: a pass needs the difference plus the estimate's own allowance within it, a fail the "
         f"difference less that allowance beyond it")
    if report.order == 2:
        how += (" of f's vector–Jacobian product J(x)ᵀ·v, v (`grad_output`) uniform in [-1, 1] with seed "
                f"{report.seed}")
    if report.projections is not None:
        lines.append(f"Fast mode: {report.projections.describe()}. A fail says that some element of the block "
                     f"is wrong, not which: rerun without fast=True to find it.")
    lines.append(f"Autograd by {how}; numerical by Richardson-extrapolated central differences at steps "
                 f"chosen per element ({int(report.levels.max())} steps tried at most), each element allowed "
                 f"{allowed}; {report.evaluations} evaluations of f.{held(report)}")
    if report.note:  # a fallback, or points where f raised
        lines.append(f"Note: {report.note}.")
    return "\n".join(lines)


def rounding_sized(report: CheckReport, wrong: list[Element]) -> str:
    """Where every mismatch is as small as rounding leaves it, what would give it ("" otherwise): rounding at
    the scale of the Jacobian's largest judged entry (a backward that loses its small entries' precision to a
    cancellation), or of 1 where every entry is smaller (intermediates near 1); in a float64 check, float32's
    rounding (a backward that computes in float32). The verdict stands: the values differ by more than the
    estimate allows."""
    relative = [e.difference / abs(e.numerical) for e in wrong if e.numerical]
    float32 = machine_epsilon(torch.float32)
    eps = machine_epsilon(to_dtype(report.dtype))
    in_float32 = report.dtype == "float64" and len(relative) == len(wrong) and max(relative) <= ROUNDINGS * float32
    largest = max(e.difference for e in wrong)
    # The scale of the judged entries: a row the check could not judge (f amplifies its rounding there, a
    # normalisation of inputs near its eps) holds entries whose size says nothing of the others' rounding.
    judged = report.numerical[report.numerical.isfinite() & ~report.inconclusive]
    scale = float(judged.abs().max()) if judged.numel() else 0.0
    if 0 < largest <= ROUNDINGS * eps * scale and max(relative, default=0.0) > ROUNDINGS * eps:
        return (f"Every difference is at most {largest / (eps * scale):.2g} ε of the Jacobian's largest judged entry "
                f"({scale:.3g}): right to rounding at that scale, the backward loses the precision of its small "
                f"entries (a cancellation, such as 1 − 1/(1 + eˣ) where eˣ is small); compute them accurately, or "
                f"accept the loss with atol={ROUNDINGS * eps * scale:.2g} and an rtol for the other entries (atol "
                f"alone leaves rtol 0, tighter than the estimate resolves)")
    if largest <= ROUNDINGS * eps:  # and the Jacobian's entries are all smaller than 1
        also = (f", and so does a backward that computes in float32 (relative differences {min(relative):.2g} to "
                f"{max(relative):.2g}; float32's ε is {float32:.3g})") if in_float32 else ""
        return (f"Every difference is at most {largest / eps:.2g} ε, the rounding of a quantity of size 1: a backward "
                f"that computes the entry from intermediates near 1 (1 − sigmoid(−x), 1 − cos x) keeps only that "
                f"absolute precision{also}; compute the entry directly (sigmoid(x)), or accept the loss with "
                f"atol={ROUNDINGS * eps:.2g} and an rtol for the other entries (atol alone leaves rtol 0)")
    if in_float32:
        return (f"Every difference is of float32's rounding (relative {min(relative):.2g} to {max(relative):.2g}; "
                f"float32's ε is {float32:.3g}): a backward that computes in float32 (a .float(), a float32 "
                f"constant or buffer) gives such differences; if it does not, the error is that small")
    return ""


def conjugated(wrong: list[Element]) -> str:
    """Where every mismatch is in a complex input's part and is the estimate with its sign flipped, the
    conjugate's signature ("" otherwise)."""
    parts = all(e.argument.endswith((".real", ".imag")) for e in wrong)
    if not parts or not all(abs(e.autograd + e.numerical) <= e.allowed and e.numerical for e in wrong):
        return ""
    return ("Every mismatch is the estimate with its sign flipped, in a complex input's parts: the backward "
            "returns the conjugate of the gradient PyTorch expects (a .conj() missing or extra; for a holomorphic "
            "f, grad_input = grad_output · conj(f'(z)))")


def held(report: CheckReport) -> str:
    """What the check left out: arguments held fixed, elements not sampled ("" when nothing)."""
    words = ""
    if report.skipped:
        words += f" Held fixed (no gradient): {', '.join(s.describe() for s in report.skipped)}."
    sparse = [a for a in report.arguments if a.specified is not None]
    if sparse:
        words += (" Sparse inputs, checked at their specified elements only (as gradcheck's masked=True): "
                  + ", ".join(f"{a.specified} of {a.size} elements of `{a.name}`" for a in sparse) + ".")
    sampled = [a for a in report.arguments if a.sampled]
    if sampled:
        words += (f" Checked a random sample (seed {report.seed}): "
                  + ", ".join(f"{a.numel} of {a.size if a.specified is None else a.specified} "
                              f"{'' if a.specified is None else 'specified '}elements of `{a.name}`"
                              for a in sampled) + ".")
    return words
