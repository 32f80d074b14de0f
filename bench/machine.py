"""What the benchmark scripts record about the machine they ran on (imported by them, not a test).

The scripts run as ``python bench/<script>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or the platform string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def instruction_set(flags: set[str] | None = None) -> str:
    """The widest vector instruction set the CPU reports: ``avx512``, ``avx2`` or ``other``."""
    flags = cpu_flags() if flags is None else flags
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"


def torch_capability() -> str:
    """``torch.backends.cpu.get_cpu_capability()``: the kernels torch dispatches to (e.g.
    ``AVX512``, or ``AVX2`` under ``ATEN_CPU_CAPABILITY=avx2``)."""
    return torch.backends.cpu.get_cpu_capability()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``"0.52, 0.61, 0.70"``."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def device_name(device: torch.device | str) -> str:
    """The GPU's name, or the CPU model with its logical CPUs and torch threads."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return (
        f"{cpu_model()} ({os.cpu_count()} logical CPUs, {torch.get_num_threads()} threads; "
        f"instruction set {instruction_set()}, torch CPU capability {torch_capability()})"
    )


def sync(device: torch.device | str) -> None:
    """Wait for queued GPU work, so that a timer measures it; nothing on a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
