"""Writing cache files safely where several processes (and several users) share a folder.

Both disk caches of :mod:`dmlbook.data` use these two pieces:

:func:`atomic_write`
    Write a file under a temporary name in the same folder and ``os.replace`` it into place, so
    that a reader sees the old file or the complete new one, never half of it. The file gets the
    permissions a plain ``open`` would give it (``0o666`` less the umask), not the ``0o600`` of
    :func:`tempfile.mkstemp`: with ``umask 002`` in a group-shared cache folder the group can read
    and replace it.
:func:`exclusive_lock`
    Hold an exclusive advisory lock (POSIX ``flock``) on a lock file while building, and delete the
    lock file when done, so that no ``*.lock`` files stay behind. A waiting process that wakes up
    on a lock file already deleted by its holder takes a fresh one (it checks the inode), so two
    builders never hold "the" lock at once.

Used by :mod:`dmlbook.data.image_cache` (the decoded-image cache) and
:mod:`dmlbook.data.synthetic_cache`; tested in ``tests/data/test_atomic.py``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, builds are not shared
    fcntl = None  # type: ignore[assignment]

__all__ = ["atomic_write", "exclusive_lock", "file_mode"]


def file_mode() -> int:
    """``0o666`` less the process umask: the mode ``open()`` gives a new file."""
    mask = os.umask(0o022)  # reading the umask means setting it; restored at once
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[IO], None], *, text: bool = False
) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file that then replaces ``path``.

    Parameters
    ----------
    path : path
        The destination; its folder must exist.
    write : callable
        Called with the open temporary file (binary, or text in UTF-8 with ``text=True``).
    text : bool
        Open the temporary file in text mode.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OSError
        If the folder is not writable or the disk is full; the temporary file is removed and
        ``path`` is unchanged. Whatever ``write`` raises propagates the same way.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as f:
            write(f)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` for the ``with`` block, then delete the file.

    Blocks while another process holds it. Without ``fcntl`` (Windows) it only runs the block.
    """
    path = Path(path)
    if fcntl is None:  # pragma: no cover
        yield
        return
    while True:
        f = open(path, "a")  # noqa: SIM115 - closed below or on the next turn
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            same = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()  # the holder deleted it meanwhile: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()
