"""checks: a gradient checker for PyTorch code, and the teaching API of the book built on it.

Three subpackages, one per audience:

- checks.core: the checker library a test suite imports (torch and numpy only). check_jacobian compares
  autograd's Jacobian with an adaptive finite-difference estimate element by element, with three outcomes
  (pass / fail / inconclusive); assert_gradients raises for pytest.
- checks.teaching: what the book's chapters import. An Expectation is written first -> plan() lays out the
  checks (executed: false) -> Plan.run(code) runs the reader's own PyTorch on each device and dtype
  (witness; scripts of passes on one leaf: run_script) -> Records -> tables on the page, and the ledger.
- checks.build: the Jupyter Book build's Sphinx extensions, the ledger page and `python -m checks`.

`import checks` loads the checker library alone; the teaching names below are imported on first use, so a
test suite never pays for (or needs) pandas, matplotlib or IPython.
"""

from __future__ import annotations

import importlib
from typing import Any

from .core.checker import (
    CheckReport,
    Element,
    GradientMismatchError,
    InconclusiveGradientError,
    assert_gradients,
    assert_module_gradients,
    check_jacobian,
    check_module,
)
from .core.devices import available_devices, detected_devices
from .core.errors import (
    CheckInputError,
    DeviceUnavailableError,
    DtypeError,
    NaNInputError,
    NonScalarOutputError,
    ShapeMismatchError,
    StepError,
    ToleranceChangeError,
)
from .core.numerical import Estimate, estimate_gradient, estimate_jacobian
from .core.tolerances import Tolerance, ToleranceChange, default_tolerance, estimate_tolerance, numerical_tolerance

# The teaching API, by the module that defines each name (imported when the name is first used).
_TEACHING = {
    "Expectation": "expectations",
    "execute": "execute",
    "Plan": "plan",
    "plan": "plan",
    "witness": "plan",
    "PlannedCheck": "planning",
    "Record": "records",
    "dump_records": "records",
    "load_records": "records",
    "Results": "results",
    "Quote": "tables",
    "ScriptResults": "tables",
    "plain": "tables",
    "provenance_frame": "tables",
    "provenance_table": "tables",
    "See": "witness",
    "captured": "witness",
    "run_script": "witness",
}


def __getattr__(name: str) -> Any:
    module = _TEACHING.get(name)
    if module is None:
        raise AttributeError(f"module 'checks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".teaching.{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CheckInputError",
    "CheckReport",
    "DeviceUnavailableError",
    "DtypeError",
    "Element",
    "Estimate",
    "GradientMismatchError",
    "InconclusiveGradientError",
    "NaNInputError",
    "NonScalarOutputError",
    "ShapeMismatchError",
    "StepError",
    "Tolerance",
    "ToleranceChange",
    "ToleranceChangeError",
    "assert_gradients",
    "assert_module_gradients",
    "available_devices",
    "check_jacobian",
    "check_module",
    "default_tolerance",
    "detected_devices",
    "estimate_gradient",
    "estimate_jacobian",
    "estimate_tolerance",
    "numerical_tolerance",
    *_TEACHING,
]
