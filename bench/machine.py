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


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``"0.52, 0.61, 0.70"``."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def device_name(device: torch.device | str) -> str:
    """The GPU's name, or the CPU model with its logical CPUs and torch threads."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()} ({os.cpu_count()} logical CPUs, {torch.get_num_threads()} threads)"


def sync(device: torch.device | str) -> None:
    """Wait for queued GPU work, so that a timer measures it; nothing on a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
