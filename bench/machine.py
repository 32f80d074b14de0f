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


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The vector instruction sets the CPU reports (``"AVX-512F, AVX2"``), from /proc/cpuinfo."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return "instruction set unknown"
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines()
                  if ln.startswith("flags")), [])  # fmt: skip
    have = [name for flag, name in (("avx512f", "AVX-512F"), ("avx2", "AVX2")) if flag in flags]
    return ", ".join(have) or "neither AVX2 nor AVX-512"


def cpu_description() -> str:
    """CPU model, its vector instruction sets and the kernels torch picked, for results headers.

    The same run costs 2-4 times the CPU on an AVX2-only machine that it costs with AVX-512
    (issue 46), so a timing is only comparable with others when this travels with it.
    ``torch.backends.cpu.get_cpu_capability()`` is what torch's own kernels use (lowered by
    ``ATEN_CPU_CAPABILITY``); ``ONEDNN_MAX_CPU_ISA``, when set, caps the convolutions' kernels.
    """
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA")
    capped = f", oneDNN capped at {onednn}" if onednn else ""
    return (
        f"{cpu_model()} (instruction sets {cpu_flags()}; torch CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}{capped})"
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``"0.52, 0.61, 0.70"``."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def device_name(device: torch.device | str) -> str:
    """The GPU's name, or the CPU model with its logical CPUs and torch threads."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_description()}, {os.cpu_count()} logical CPUs, {torch.get_num_threads()} threads"


def sync(device: torch.device | str) -> None:
    """Wait for queued GPU work, so that a timer measures it; nothing on a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
