"""The pytest plugin of gradient-checks: a gradient check in every dtype and on every device, from one test.

Installed with the package (entry point `pytest11`), it gives three fixtures and a marker::

    def test_swish(check_gradients):
        x = torch.linspace(-2, 2, 5)
        check_gradients(Swish.apply, x, torch.tensor([1.5]))

runs the test once per dtype and device, `test_swish[float64-cpu]`, `test_swish[float32-cpu]` (and
`-cuda`, `-mps` where the machine has them; CHECKS_DEVICES=cpu narrows a run). check_gradients moves every
floating-point (and complex) tensor argument to the test's dtype and device, integer ones to its device,
and raises as checks.assert_gradients does (options such as atol=, mode=, order= pass through), except
that a float32 run whose unjudged elements float32 alone is too coarse to settle is skipped with the
message (checks.core.gradient_check);
check_gradients.module(module, loss, *args) does the same for a module's parameters and inputs (on a
copy of the module). grad_dtype and grad_device are the test's torch.dtype and device name, for a test
that builds its inputs itself. A marker narrows one test::

    @pytest.mark.gradient_checks(dtypes=["float64"], devices=["cpu"])

The plugin imports nothing but pytest until a test asks for its fixtures: a session that uses none never
imports torch through it (pytest loads every installed plugin at start-up).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .errors import CheckInputError

if TYPE_CHECKING:
    import torch

    from .gradient_check import GradientCheck

MARKER = "gradient_checks"
DTYPES = ("float64", "float32")
FIXTURES = ("grad_dtype", "grad_device")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(dtypes=('float64', 'float32'), devices=None): the dtypes and devices that "
                   f"check_gradients, grad_dtype and grad_device run a test in (devices=None: every available one)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, None, None]:
    """A float32 run that check_gradients skips is listed (-rs) at its test, as a skipif mark's skip is,
    not at the line of this package that raised it: several skipped tests stay told apart."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) \
            and Path(report.longrepr[0]).parts[-2:] == ("core", "gradient_check.py"):
        filename, line = item.reportinfo()[:2]
        report.longrepr = (str(filename), (line or 0) + 1, report.longrepr[2])


def _requested(metafunc: pytest.Metafunc) -> tuple[tuple[str, ...], list[str]]:
    """The dtypes and devices a test runs in: the marker's, else float64 and float32 on every device."""
    from .devices import available_devices, resolve_devices
    from .dtypes import to_dtype
    from .gradient_check import COMPLEX

    marker = metafunc.definition.get_closest_marker(MARKER)
    options = dict(marker.kwargs) if marker else {}
    unknown = set(options) - {"dtypes", "devices"}
    if unknown or (marker and marker.args):
        raise CheckInputError(f"@pytest.mark.{MARKER} takes dtypes= and devices= only, got "
                              f"{sorted(unknown) or list(marker.args)}")
    dtypes = options.get("dtypes", DTYPES)
    dtypes = (dtypes,) if isinstance(dtypes, str) else tuple(dtypes)
    for name in dtypes:
        try:
            usable = to_dtype(name) in COMPLEX
        except CheckInputError as error:
            raise CheckInputError(f"@pytest.mark.{MARKER}: {error}") from error
        if not usable:
            raise CheckInputError(f"@pytest.mark.{MARKER}: dtype {name!r} cannot be checked; use float32 or float64 "
                                  f"(complex inputs are checked in the complex dtype of the real one)")
    devices = options.get("devices")
    if devices is None:
        return dtypes, available_devices()
    return dtypes, resolve_devices(devices, source=f"@pytest.mark.{MARKER}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wants_dtype, wants_device = (name in metafunc.fixturenames for name in FIXTURES)
    if not (wants_dtype or wants_device):
        return
    dtypes, devices = _requested(metafunc)
    if wants_dtype and wants_device:
        pairs = [(dtype, device) for device in devices for dtype in dtypes]
        metafunc.parametrize(FIXTURES, pairs, ids=[f"{dtype}-{device}" for dtype, device in pairs], indirect=True)
    elif wants_dtype:
        metafunc.parametrize("grad_dtype", dtypes, ids=list(dtypes), indirect=True)
    else:
        metafunc.parametrize("grad_device", devices, ids=devices, indirect=True)


@pytest.fixture
def grad_dtype(request: pytest.FixtureRequest) -> torch.dtype:
    """The dtype this run of the test checks in (float64, then float32)."""
    from .dtypes import to_dtype

    return to_dtype(request.param)


@pytest.fixture
def grad_device(request: pytest.FixtureRequest) -> str:
    """The device this run of the test checks on ("cpu", "cuda", "mps")."""
    return request.param


@pytest.fixture
def check_gradients(grad_dtype: torch.dtype, grad_device: str) -> GradientCheck:
    """check_gradients(f, *inputs, **options): checks.assert_gradients with every floating-point tensor
    argument in this run's dtype and on its device; check_gradients.module(module, loss, *args) for a
    module. The test runs once per dtype (float64, float32) and device."""
    from .gradient_check import GradientCheck

    return GradientCheck(grad_dtype, grad_device)
