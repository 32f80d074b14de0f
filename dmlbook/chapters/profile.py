"""The chapter profile: the embedded default data on a CPU, or benchmark scale on a GPU.

A chapter reads two environment variables through :func:`current_profile`:

``DMLBOOK_PROFILE``
    ``quick`` (default): embedded data, small models, at most 60 s on 2 CPU cores.
    ``full``: the benchmark-scale configuration, meant for a GPU.
``DMLBOOK_DATA``
    Folder holding the real data sets (needed by ``full``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.base.locations import datasets_folder

__all__ = ["Profile", "current_profile", "PROFILES"]

PROFILES = ("quick", "full")


@dataclass(frozen=True)
class Profile:
    """What a chapter should run at: name, data folder and device."""

    name: str
    data_dir: Path | None
    device: str

    @property
    def full(self) -> bool:
        """True for benchmark scale."""
        return self.name == "full"


def current_profile() -> Profile:
    """Read ``DMLBOOK_PROFILE`` and ``DMLBOOK_DATA`` and return the matching :class:`Profile`.

    Raises
    ------
    ValueError
        For an unknown profile name, or ``full`` without an existing ``DMLBOOK_DATA`` folder.
    """
    name = os.environ.get("DMLBOOK_PROFILE", "quick").strip().lower() or "quick"
    if name not in PROFILES:
        raise ValueError(
            f"DMLBOOK_PROFILE={name!r} is not a known profile; use one of {', '.join(PROFILES)}."
        )
    data_dir = datasets_folder()
    if name == "full":
        if data_dir is None or not data_dir.is_dir():
            raise ValueError(
                "DMLBOOK_PROFILE=full needs DMLBOOK_DATA set to the folder that holds the data sets "
                f"({'it is unset' if data_dir is None else f'{data_dir} is not a folder'}). Unset DMLBOOK_PROFILE to run on the embedded data instead."
            )
    device = "cuda" if (name == "full" and torch.cuda.is_available()) else "cpu"
    return Profile(name=name, data_dir=data_dir, device=device)
