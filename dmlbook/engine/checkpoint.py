"""Checkpoints and run files written atomically: a crash (even ``kill -9``) never leaves half a file.

Every file is first written next to its destination under a temporary name, flushed to disk, and
then moved over the destination with :func:`os.replace`, which is atomic on POSIX and Windows. A
reader therefore sees either the previous complete file or the new complete file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import torch

__all__ = [
    "FORMAT",
    "atomic_write",
    "save_checkpoint",
    "load_checkpoint",
    "write_csv",
    "write_json",
]

#: Stored in every checkpoint, so that a foreign file is recognised.
FORMAT = "dmlbook-checkpoint/1"


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, fsync it, move it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """``torch.save`` a checkpoint dict atomically (adds the ``format`` tag)."""
    data = {"format": FORMAT, **payload}
    return atomic_write(path, lambda f: torch.save(data, f))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a dmlbook checkpoint.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist.")
    data = torch.load(p, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"{p} is not a dmlbook checkpoint (written by dmlbook train); for bare backbone "
            "weights use dmlbook.models.load_pretrained."
        )
    return data


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Path:
    """Write ``rows`` (dicts) as CSV with the given column order, atomically."""

    def write(f: IO[bytes]) -> None:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        f.write(text.getvalue().encode("utf-8"))

    return atomic_write(path, write)


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    return atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, default=str).encode()))
