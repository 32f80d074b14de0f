"""Checkpoints and run files written atomically: a crash (even ``kill -9``) never leaves half a file.

Every file is first written next to its destination under a temporary name, flushed to disk, and
then moved over the destination with :func:`os.replace`, which is atomic on POSIX and Windows. A
reader therefore sees either the previous complete file or the new complete file.

Tests: ``tests/training/test_checkpoint.py``.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import torch

from ..models.weight_files import read_torch_file

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


#: The errors of a write that hit a limit (not a bug): no space, a quota, a file-size limit.
_LIMITS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _limit_hit(err: BaseException) -> int | None:
    """The errno (:data:`_LIMITS`) of ``err`` or of an exception in its chain, else None.

    ``torch.save`` reports a failed write as a ``RuntimeError`` of its zip writer caused by the
    ``OSError``; without a cause, its "file write failed" is taken for a full disk.
    """
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    for e in chain:
        if isinstance(e, OSError) and e.errno in _LIMITS:
            return e.errno
    if any("No space left on device" in str(e) or "file write failed" in str(e) for e in chain):
        return errno.ENOSPC
    return None


def _limit_error(code: int, path: Path) -> OSError:
    """One line naming ``path``, the limit hit and the fix."""
    kept = f"{path.name} keeps its previous version (nothing is lost before it)"
    if code == errno.EFBIG:
        text = (
            f"{path.name} is larger than the file system of {path.parent} or this process's "
            f"file-size limit allows (File too large); {kept}. Raise the limit (ulimit -f "
            "unlimited) or move the run folder (train.out_dir) to a file system that takes "
            "large files (FAT32 stops at 4 GiB)."
        )
    else:
        text = (
            f"no space left on the device of {path.parent} while writing {path.name}; {kept}. "
            "Free some space or move the run folder (train.out_dir)."
        )
    limit = OSError(text)
    limit.errno = code
    return limit


def _open_temp(path: Path) -> tuple[IO[bytes], str]:
    """A new temporary file ``.<name>.<random>.tmp`` beside ``path``, open for writing."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    return os.fdopen(fd, "wb"), tmp


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, fsync it, move it onto ``path``.

    Raises
    ------
    OSError
        One line naming ``path`` when the disk is full, a quota is reached or the file would
        pass a file-size limit (``ENOSPC``, ``EDQUOT``, ``EFBIG``; whatever layer noticed it:
        ``torch.save`` reports it as a ``RuntimeError`` of its zip writer); ``path`` keeps its
        previous content and the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    f, tmp = _open_temp(path)
    try:
        with f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        code = _limit_hit(err) if isinstance(err, Exception) else None
        if code is not None:
            raise _limit_error(code, path) from err
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
        One line naming the file and the fix, if it cannot be read (truncated, empty, random
        bytes, a text file) or is not a dmlbook checkpoint.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist.")
    fix = (
        "Use another checkpoint of the run (best.pt or last.pt), or start the run again "
        "without resuming."
    )
    data = read_torch_file(p, fix)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"{p} is not a dmlbook checkpoint (written by dmlbook train); for bare backbone "
            "weights use dmlbook.models.load_pretrained."
        )
    if not isinstance(data.get("model"), dict):
        raise ValueError(f"{p} is a damaged dmlbook checkpoint (it holds no model). {fix}")
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
