"""The pytest plugin of gradient-checks: a gradient check in every dtype and on every device, from one test.

Installed with the package (entry point `pytest11`), it gives three fixtures and a marker:

    def test_swish(check_gradients):
        x = torch.linspace(-2, 2, 5)
        check_gradients(Swish.apply, x, torch.tensor([1.5]))

runs the test once per dtype and device, `test_swish[float64-cpu]`, `test_swish[float32-cpu]` (and
`-cuda`, `-mps` where the machine has them; CHECKS_DEVICES=cpu narrows a run). check_gradients moves every
floating-point (and complex) tensor argument to the test's dtype and device, integer ones to its device,
and raises as checks.assert_gradients does (options such as atol=, mode=, order= pass through);
check_gradients.module(module, loss, *args) does the same for a module's parameters and inputs (on a
copy of the module). grad_dtype and grad_device are the test's torch.dtype and device name, for a test
that builds its inputs itself. A marker narrows one test:

    @pytest.mark.gradient_checks(dtypes=["float64"], devices=["cpu"])

The plugin imports nothing but pytest and the checker library (torch and numpy).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch

from .checker import CheckReport, assert_gradients, assert_module_gradients
from .devices import available_devices, resolve_devices
from .dtypes import to_dtype
from .errors import CheckInputError

MARKER = "gradient_checks"
DTYPES = ("float64", "float32")
FIXTURES = ("grad_dtype", "grad_device")
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(dtypes=('float64', 'float32'), devices=None): the dtypes and devices that "
                   f"check_gradients, grad_dtype and grad_device run a test in (devices=None: every available one)")


def _requested(metafunc: pytest.Metafunc) -> tuple[tuple[str, ...], list[str]]:
    """The dtypes and devices a test runs in: the marker's, else float64 and float32 on every device."""
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
    return to_dtype(request.param)


@pytest.fixture
def grad_device(request: pytest.FixtureRequest) -> str:
    """The device this run of the test checks on ("cpu", "cuda", "mps")."""
    return request.param


class GradientCheck:
    """check_gradients: assert_gradients in the test's dtype and on its device."""

    def __init__(self, dtype: torch.dtype, device: str) -> None:
        self.dtype, self.device = dtype, device

    def to(self, value: object) -> object:
        """A tensor argument in this run's dtype (complex: the matching complex dtype) and on its device."""
        if not isinstance(value, torch.Tensor):
            return value
        if value.is_complex():
            return value.detach().to(device=self.device, dtype=COMPLEX[self.dtype])
        if value.dtype.is_floating_point:
            return value.detach().to(device=self.device, dtype=self.dtype)
        return value.to(self.device)

    def __call__(self, f: Callable[..., object], *inputs: object, **options: object) -> CheckReport:
        __tracebackhide__ = True  # pytest shows the message, not this frame
        return assert_gradients(f, *[self.to(value) for value in inputs], **options)

    def module(self, module: torch.nn.Module, loss: Callable[[torch.Tensor], torch.Tensor], *args: object,
               **options: object) -> CheckReport:
        """assert_module_gradients of a copy of the module in this run's dtype and on its device."""
        __tracebackhide__ = True
        if not isinstance(module, torch.nn.Module):
            raise CheckInputError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        moved = copy.deepcopy(module).to(device=self.device, dtype=self.dtype)
        return assert_module_gradients(moved, loss, *[self.to(value) for value in args], **options)

    def __repr__(self) -> str:
        return f"check_gradients({self.dtype}, {self.device})"


@pytest.fixture
def check_gradients(grad_dtype: torch.dtype, grad_device: str) -> GradientCheck:
    """check_gradients(f, *inputs, **options): checks.assert_gradients with every floating-point tensor
    argument in this run's dtype and on its device; check_gradients.module(module, loss, *args) for a
    module. The test runs once per dtype (float64, float32) and device."""
    return GradientCheck(grad_dtype, grad_device)
