"""checks: a gradient checker for PyTorch code, and the teaching API of the book built on it.

Three subpackages, one per audience:

- checks.core: the checker library a test suite imports (torch and numpy only). check_jacobian compares
  autograd's Jacobian with an adaptive finite-difference estimate element by element, with three outcomes
  (pass / fail / inconclusive); assert_gradients raises for pytest, and the pytest plugin's fixture
  check_gradients runs a check in float64 and float32 on every device.
- checks.teaching: what the book's chapters import. An Expectation is written first -> plan() lays out the
  checks (executed: false) -> Plan.run(code) runs the reader's own PyTorch on each device and dtype
  (witness; scripts of passes on one leaf: run_script) -> Records -> tables on the page, and the ledger.
- checks.sphinx: the Jupyter Book build's Sphinx extensions, the ledger page and `python -m checks`.

Every name is imported on first use: `import checks` itself loads nothing.

The package raises its own errors rather than asserting, so pytest, which loads its plugin, need not rewrite
its asserts (PYTEST_DONT_REWRITE): pytest.main in a session that has imported checks gives no warning.
"""

from __future__ import annotations

import importlib
from typing import Any

# Every public name, by the module that defines it, imported when the name is first used: `import checks`
# costs nothing (the pytest plugin is loaded by every pytest session of an environment that has the package),
# and a test suite using the checker never imports the teaching API's pandas, matplotlib or IPython.
_LIBRARY = {
    **dict.fromkeys(["CheckReport", "Element"], "core.report"),
    **dict.fromkeys(["GradientMismatchError", "InconclusiveGradientError", "assert_gradients",
                     "assert_module_gradients", "check_jacobian", "check_module"], "core.checker"),
    "Outcome": "core.outcome",
    **dict.fromkeys(["available_devices", "detected_devices"], "core.devices"),
    **dict.fromkeys(["CheckInputError", "DeviceUnavailableError", "DtypeError", "NaNInputError",
                     "NoForwardModeError", "NonScalarOutputError", "ShapeMismatchError", "StepError",
                     "ToleranceChangeError"], "core.errors"),
    **dict.fromkeys(["Estimate", "estimate_gradient", "estimate_jacobian"], "core.numerical"),
    **dict.fromkeys(["Tolerance", "ToleranceChange", "default_tolerance", "estimate_tolerance",
                     "numerical_tolerance"], "core.tolerances"),
}
_TEACHING = {
    "AnalyticalMatrix": "teaching.higher",
    "Expectation": "teaching.expectations",
    "each_cell": "teaching.cells",
    "execute": "teaching.execute",
    "expect": "teaching.expect",
    "raises": "teaching.expect",
    "recorded": "teaching.expect",
    "records_of": "teaching.expect",
    "Plan": "teaching.plan",
    "plan": "teaching.plan",
    "witness": "teaching.plan",
    "PlannedCheck": "teaching.planning",
    "Record": "teaching.records",
    "dump_records": "teaching.records",
    "load_records": "teaching.records",
    "matrix_record": "teaching.higher",
    "second_derivative_checks": "teaching.higher",
    "Results": "teaching.results",
    "Quote": "teaching.tables",
    "ScriptResults": "teaching.tables",
    "plain": "teaching.tables",
    "provenance_frame": "teaching.tables",
    "provenance_table": "teaching.tables",
    "See": "teaching.witness",
    "captured": "teaching.witness",
    "run_script": "teaching.witness",
    "tuned_gradcheck": "teaching.sensitivity",
}
# The book's build: a chapter's heavy result computed once per fingerprint and chapter text.
_BUILD = {"cached": "sphinx.cache"}
_MODULES = {**_LIBRARY, **_TEACHING, **_BUILD}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'checks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = sorted(_MODULES)
