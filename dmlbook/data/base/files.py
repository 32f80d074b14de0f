"""Reading the files of a data set copy: image names, list files, and macOS junk to skip.

Shared by the benchmark loaders (:mod:`dmlbook.data.benchmarks.benchmark`) and the archive extraction of
:mod:`dmlbook.data.fetch.download`; tested in ``tests/data/base/test_files.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["IMAGE_EXTENSIONS", "is_junk", "read_table", "scan_images"]

#: File name endings (lower case) treated as images when a folder is scanned.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")


def is_junk(name: str) -> bool:
    """True for files that archives made on macOS carry and that are not images.

    ``._name`` AppleDouble resource forks, ``.DS_Store`` and anything under ``__MACOSX/``.
    """
    parts = name.replace("\\", "/").split("/")
    base = parts[-1]
    return base.startswith("._") or base == ".DS_Store" or "__MACOSX" in parts


def scan_images(folder: Path, *, recursive: bool = True) -> list[str]:
    """Image files under ``folder`` as sorted POSIX paths relative to it, junk files skipped.

    Files whose name ends with one of :data:`IMAGE_EXTENSIONS` (any case) count as images;
    :func:`is_junk` files (macOS ``._*``) and hidden files are left out.
    """
    out: list[str] = []
    folder = Path(folder)
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__MACOSX" and not d.startswith("."))
        if not recursive:
            dirnames[:] = []
        rel_dir = Path(dirpath).relative_to(folder).as_posix()
        for name in filenames:
            if name.startswith(".") or not name.lower().endswith(IMAGE_EXTENSIONS):
                continue
            out.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return sorted(out)


def read_table(path: Path, *, columns: int, what: str, skip: int = 0) -> Iterable[list[str]]:
    """Yield the whitespace-separated fields of each non-empty line of ``path`` after ``skip`` lines.

    Raises
    ------
    ValueError
        For a line with fewer than ``columns`` fields (the message names file and line).
    """
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if number <= skip or not line.strip():
                continue
            fields = line.split()
            if len(fields) < columns:
                raise ValueError(
                    f"{path}, line {number}: expected {what}, got {line.strip()!r}. Is the file "
                    "truncated or from another data set?"
                )
            yield fields
