"""dmlbook: the companion package of the deep metric learning book.

The top-level names load their modules on first use (PEP 562), so that ``import dmlbook`` (and
with it the ``dmlbook`` command's ``--help``) does not import torch.

Importing dmlbook before torch sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the variable is already
set): torch's OpenMP runtime (GNU libgomp) reads it once, when torch is loaded, and otherwise
lets its idle threads spin between parallel regions. On a shared machine (a course's JupyterHub,
a busy laptop) spinning threads burn CPU that nobody uses and slow the thread that does the work:
a chapter run in JupyterLab would cost several times what it costs under ``make book``, which
sets the variable itself. When torch was imported first it is too late, and
:func:`dmlbook.setup` says so and falls back to one thread (which has no idle threads).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# First, before anything can load torch: OMP_WAIT_POLICY (dmlbook.chapters.openmp).
from .chapters.openmp import POLICY_TOO_LATE as OMP_POLICY_TOO_LATE  # noqa: F401 (dmlbook.OMP_POLICY_TOO_LATE)

if TYPE_CHECKING:  # pragma: no cover
    from .chapters.notebook import setup
    from .chapters.profile import Profile, current_profile
    from .core.reproducibility import seed_everything

__version__ = "0.1.0"

__all__ = ["setup", "Profile", "current_profile", "seed_everything", "__version__"]

#: Where each lazily loaded top-level name lives.
_LAZY = {
    "setup": ".chapters.notebook",
    "Profile": ".chapters.profile",
    "current_profile": ".chapters.profile",
    "seed_everything": ".core.reproducibility",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dmlbook' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
