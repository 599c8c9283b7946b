"""Benchmark (a script, not a test): this project's checker and gradcheck side by side on the mutant suite.

    PYTHONPATH=$PWD python benchmarks/checker.py

First gradcheck tuned with hindsight: per dtype, the setting (eps, atol, rtol) of its grid
(checks.teaching.sensitivity.GRID_EPS, GRID_ATOL, GRID_RTOL) with the fewest false alarms and then the most
detections on this very suite, how far its nearest verdict is from flipping, and what the search cost. Then,
for each dtype and checker (gradcheck at its defaults and at the tuned setting, slow and fast mode, the naive
central difference, this checker, and its fast mode, fast=True): false alarms on the correct ops, detections of the mutants, inconclusive
checks (this checker's third outcome), the smallest δ caught in every scaled base, evaluations of f and wall
time over the suite. checks.teaching.sensitivity.evaluate runs each checker once before timing, so no checker
is charged another's one-time set-up. Timings depend on the machine; read them as ratios.
"""

from __future__ import annotations

import torch

from checks.teaching.mutants import suite
from checks.teaching.sensitivity import CHECKERS, GRID_ATOL, GRID_EPS, GRID_RTOL, evaluate, summary, tune_gradcheck


def main() -> None:
    cases = suite()
    dtypes = (torch.float64, torch.float32)
    print(f"gradcheck tuned with hindsight: {len(GRID_EPS)} eps × {len(GRID_ATOL)} atol × {len(GRID_RTOL)} rtol "
          f"= {len(GRID_EPS) * len(GRID_ATOL) * len(GRID_RTOL)} settings per dtype")
    print(f"{'dtype':<9}{'setting':<34}{'false alarms':>14}{'detections':>12}{'margin':>9}{'evaluations':>13}"
          f"{'seconds':>9}")
    tunings = [tune_gradcheck(cases, dtype) for dtype in dtypes]
    for tuning in tunings:
        print(f"{tuning.dtype:<9}{tuning.setting.words():<34}{tuning.false_alarms:>9}/{tuning.correct:<4}"
              f"{tuning.detections:>7}/{tuning.mutants:<4}{tuning.margin:>9.3g}{tuning.evaluations:>13}"
              f"{tuning.seconds:>9.2f}")
    print("margin: the factor by which the verdict nearest to flipping is inside (or outside) its allowance\n")
    table = summary(evaluate(cases, dtypes=dtypes, checkers=(*CHECKERS, "this checker (fast)"),
                             tuned={t.dtype: t.setting for t in tunings}))
    correct = int(table["correct ops"].iloc[0])
    mutants = int(table["mutants"].iloc[0])
    scaled = sum(case.kind == "scaled" for case in cases)
    print(f"Suite: {correct} correct torch ops, {mutants} mutants ({scaled} scaled by 1 + δ, "
          f"{mutants - scaled} structural)")
    print(f"{'dtype':<9}{'checker':<25}{'false alarms':>14}{'detections':>12}{'inconclusive':>14}{'smallest δ':>12}"
          f"{'evaluations':>13}{'seconds':>9}")
    for row in table.to_dict("records"):
        alarms = f"{row['false alarms']}/{row['correct ops']}"
        detections = f"{row['detections']}/{row['mutants']}"
        unsure = f"{row['inconclusive (correct ops)']}+{row['inconclusive (mutants)']}"
        smallest = row["smallest δ always caught"]
        smallest = "—" if smallest != smallest else f"{smallest:g}"  # NaN: flags every correct op
        print(f"{row['dtype']:<9}{row['checker']:<25}{alarms:>14}{detections:>12}{unsure:>14}"
              f"{smallest:>12}{row['evaluations of f']:>13}{row['seconds']:>9.2f}")
    print("inconclusive: correct ops + mutants; smallest δ: — where a checker flags every correct op (meaningless)")


if __name__ == "__main__":
    main()
