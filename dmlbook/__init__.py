"""dmlbook: the companion package of the deep metric learning book.

The top-level names load their modules on first use (PEP 562), so that ``import dmlbook`` (and
with it the ``dmlbook`` command's ``--help``) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .notebook import setup
    from .profile import Profile, current_profile
    from .reproducibility import seed_everything

__version__ = "0.1.0"

__all__ = ["setup", "Profile", "current_profile", "seed_everything", "__version__"]

#: Where each lazily loaded top-level name lives.
_LAZY = {
    "setup": ".notebook",
    "Profile": ".profile",
    "current_profile": ".profile",
    "seed_everything": ".reproducibility",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dmlbook' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
