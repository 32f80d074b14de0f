"""Where data sets and caches live: the one place that reads ``DMLBOOK_DATA`` and ``DMLBOOK_CACHE``.

``DMLBOOK_DATA`` names the folder that holds the benchmark data sets (``CUB_200_2011/``,
``Stanford_Online_Products/``, ...; docs/research.md); ``DMLBOOK_CACHE`` the folder for
decoded caches (``~/.cache/dmlbook`` when unset). The CLI's ``--data``, ``load_dataset(...,
root=...)``, ``prepare(..., data_dir)`` and ``DMLBOOK_PROFILE=full`` all come here, so the
variables mean the same everywhere (blank counts as unset, ``~`` is expanded).

Tests: ``tests/data/base/test_locations.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_folder", "datasets_folder"]


def datasets_folder() -> Path | None:
    """The folder ``DMLBOOK_DATA`` names, ``~`` expanded; ``None`` when it is unset or blank.

    Callers that need it raise their own error naming their own argument (``--data``,
    ``root=``, ``data_dir=``) beside the variable.
    """
    value = os.environ.get("DMLBOOK_DATA", "").strip()
    return Path(value).expanduser() if value else None


def cache_folder() -> Path:
    """The folder for dmlbook's caches: ``$DMLBOOK_CACHE`` if set (not blank), else
    ``~/.cache/dmlbook``."""
    value = os.environ.get("DMLBOOK_CACHE", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "dmlbook"
