"""Benchmark (a script, not a test): this project's checker and gradcheck side by side on the mutant suite.

    PYTHONPATH=$PWD python benchmarks/checker.py

For each dtype and checker (this checker's fast mode, fast=True, beside the book's four): false alarms on the correct ops, detections of the mutants, inconclusive checks
(this checker's third outcome), the smallest δ caught in every scaled base, evaluations of f and wall time
over the suite. checks.teaching.sensitivity.evaluate runs each checker once before timing, so no checker is charged
another's one-time set-up. Timings depend on the machine; read them as ratios.
"""

from __future__ import annotations

import torch

from checks.teaching.mutants import suite
from checks.teaching.sensitivity import CHECKERS, evaluate, summary


def main() -> None:
    cases = suite()
    table = summary(evaluate(cases, dtypes=(torch.float64, torch.float32), checkers=(*CHECKERS, "this checker (fast)")))
    correct = int(table["correct ops"].iloc[0])
    mutants = int(table["mutants"].iloc[0])
    scaled = sum(case.kind == "scaled" for case in cases)
    print(f"Suite: {correct} correct torch ops, {mutants} mutants ({scaled} scaled by 1 + δ, "
          f"{mutants - scaled} structural)")
    print(f"{'dtype':<9}{'checker':<21}{'false alarms':>14}{'detections':>12}{'inconclusive':>14}{'smallest δ':>12}"
          f"{'evaluations':>13}{'seconds':>9}")
    for row in table.to_dict("records"):
        alarms = f"{row['false alarms']}/{row['correct ops']}"
        detections = f"{row['detections']}/{row['mutants']}"
        unsure = f"{row['inconclusive (correct ops)']}+{row['inconclusive (mutants)']}"
        smallest = row["smallest δ always caught"]
        smallest = "—" if smallest != smallest else f"{smallest:g}"  # NaN: flags every correct op
        print(f"{row['dtype']:<9}{row['checker']:<21}{alarms:>14}{detections:>12}{unsure:>14}"
              f"{smallest:>12}{row['evaluations of f']:>13}{row['seconds']:>9.2f}")
    print("inconclusive: correct ops + mutants; smallest δ: — where a checker flags every correct op (meaningless)")


if __name__ == "__main__":
    main()
