"""checks: the gradient checks behind every number in the book.

Data flows one way: an Expectation is written first -> plan() lays out the checks (executed: false)
-> Plan.run(code) runs the reader's own PyTorch on each device and dtype (checks.witness; scripts of
passes on one leaf: checks.run_script) -> Records -> tables on the page, and the ledger.
"""

from .cache import cached
from .checker import (
    CheckReport,
    Element,
    GradientMismatchError,
    InconclusiveGradientError,
    assert_gradients,
    assert_module_gradients,
    check_jacobian,
    check_module,
)
from .devices import available_devices, detected_devices
from .errors import (
    CheckInputError,
    DeviceUnavailableError,
    DtypeError,
    NaNInputError,
    NonScalarOutputError,
    ShapeMismatchError,
    StepError,
    ToleranceChangeError,
)
from .execute import Results, execute
from .expectations import Expectation
from .numerical import Estimate, estimate_gradient, estimate_jacobian
from .plan import Plan, PlannedCheck, plan
from .records import Record, dump_records, load_records
from .tables import Quote, ScriptResults, plain, provenance_frame, provenance_table
from .tolerances import Tolerance, ToleranceChange, default_tolerance, estimate_tolerance, numerical_tolerance
from .witness import See, captured, run_script, witness

__all__ = [
    "CheckInputError",
    "CheckReport",
    "DeviceUnavailableError",
    "DtypeError",
    "Element",
    "Estimate",
    "GradientMismatchError",
    "InconclusiveGradientError",
    "Expectation",
    "NaNInputError",
    "NonScalarOutputError",
    "Plan",
    "Quote",
    "PlannedCheck",
    "Record",
    "Results",
    "ScriptResults",
    "See",
    "ShapeMismatchError",
    "StepError",
    "Tolerance",
    "ToleranceChange",
    "ToleranceChangeError",
    "assert_gradients",
    "assert_module_gradients",
    "available_devices",
    "cached",
    "captured",
    "check_jacobian",
    "check_module",
    "default_tolerance",
    "detected_devices",
    "dump_records",
    "estimate_gradient",
    "estimate_jacobian",
    "estimate_tolerance",
    "execute",
    "load_records",
    "numerical_tolerance",
    "plain",
    "plan",
    "provenance_frame",
    "provenance_table",
    "run_script",
    "witness",
]
