"""The environment a check ran in, kept on every record so a failure can be reproduced."""

from __future__ import annotations

import functools
import platform

import torch


@functools.cache
def cpu_name() -> str:
    """The CPU model name (from /proc/cpuinfo on Linux), else what platform reports."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(seed: int) -> dict[str, str | int | None]:
    """Versions and settings that decide the numbers a check produces; seed is the one the check ran under."""
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_name(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        "seed": seed,
    }


def device_name(device: str) -> str:
    """A human name for the hardware behind a device type (GPU model, or the CPU's)."""
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    if device == "mps":
        return "Apple GPU (MPS)"
    return cpu_name()
