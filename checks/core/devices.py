"""Which devices the checks run on: every device torch reports, optionally narrowed by CHECKS_DEVICES."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from .errors import DeviceUnavailableError

DEVICES_VARIABLE = "CHECKS_DEVICES"


def detected_devices() -> list[str]:
    """Device types present on this machine, cpu first (cpu is always present)."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def available_devices() -> list[str]:
    """Devices the checks run on: all detected ones, or those named in CHECKS_DEVICES (comma separated)."""
    requested = os.environ.get(DEVICES_VARIABLE, "").strip()
    if not requested:
        return detected_devices()
    names = [name.strip() for name in requested.split(",") if name.strip()]
    return resolve_devices(names, source=f"{DEVICES_VARIABLE}={requested!r}")


def resolve_devices(names: Sequence[str] | None, *, source: str = "devices") -> list[str]:
    """Validate device names against this machine; None means every available device."""
    if names is None:
        return available_devices()
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Sequence) or not all(isinstance(name, str) for name in names):
        raise DeviceUnavailableError(f"{source} must be a device name or a sequence of them (\"cpu\", \"cuda\"), "
                                     f"got {names!r}")
    present = detected_devices()
    missing = [name for name in names if name not in present]
    if missing:
        raise DeviceUnavailableError(
            f"{source} asks for {', '.join(missing)}, which this machine does not have; "
            f"available: {', '.join(present)}"
        )
    if not names:
        raise DeviceUnavailableError(f"{source} names no device; available: {', '.join(present)}")
    return list(dict.fromkeys(names))
