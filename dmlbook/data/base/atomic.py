"""Writing cache files safely where several processes (and several users) share a folder.

Both disk caches of :mod:`dmlbook.data` use these pieces. None of them follows a symbolic link at
the file it writes: in a folder others can write to, a link planted under a predictable name
(``<cache>.lock``, ``<cache>.partial.npy``) would otherwise make this process overwrite or create
the link's target with its own permissions.

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
    builders never hold "the" lock at once. The lock file is opened with ``O_NOFOLLOW``: a link in
    its place is refused with an error naming it.
:func:`new_memmap`, :func:`open_memmap`
    A ``.npy`` memory map created under a random name (:func:`tempfile.mkstemp`, ``O_EXCL``) and
    renamed onto its name (a rename replaces a link, never its target), or an existing one opened
    with ``O_NOFOLLOW``; both map the open file, never a path opened again.

Used by :mod:`dmlbook.data.cache.image_cache` (the decoded-image cache) and
:mod:`dmlbook.data.generated.synthetic` (its cache of rendered images); tested in ``tests/data/base/test_atomic.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, builds are not shared
    fcntl = None  # type: ignore[assignment]

__all__ = ["atomic_write", "exclusive_lock", "file_mode", "new_memmap", "open_memmap"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


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
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, file_mode())
        except OSError as err:
            if not path.is_symlink():
                raise
            raise OSError(
                f"{path} is a symbolic link, not a lock file: someone sharing {path.parent} put it "
                "there. Delete it (only the link) and try again."
            ) from err
        f = os.fdopen(fd, "a")
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


def _check_space(size: int, path: Path) -> None:
    """Refuse to map ``size`` bytes that the disk does not have: a memory map of a sparse file
    that meets a full disk dies of SIGBUS, without a message; here it is one ``OSError`` naming
    the fix. (The free space is read, not allocated: glibc emulates ``posix_fallocate`` on file
    systems without it by writing every block, minutes for a 20 GB cache on NFS.)"""
    free = shutil.disk_usage(path.parent).free
    if size > free:
        full = OSError(
            f"not enough space in {path.parent} for {path.name} ({size / 2**30:.2f} GiB needed, "
            f"{free / 2**30:.2f} GiB free): free some space, or put the cache elsewhere "
            "(cache_dir, or the DMLBOOK_CACHE variable)."
        )
        full.errno = errno.ENOSPC
        raise full


def new_memmap(
    path: str | os.PathLike[str], dtype: np.dtype | str, shape: tuple[int, ...]
) -> np.memmap:
    """A new zero-filled ``.npy`` memory map at ``path``, never written through a link there.

    The file is made under a random name beside ``path`` (``O_EXCL``), sized, mapped, then renamed
    onto ``path``; the map stays valid (same file) and a link at ``path`` is replaced, not followed.
    """
    path, maps = Path(path), []

    def write(f: IO) -> None:
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                  "fortran_order": False, "shape": tuple(shape)}  # fmt: skip
        np.lib.format.write_array_header_1_0(f, header)
        f.flush()
        offset = f.tell()
        size = offset + int(np.prod(shape)) * np.dtype(dtype).itemsize
        _check_space(size, path)
        f.truncate(size)
        maps.append(np.memmap(f, dtype=dtype, mode="r+", offset=offset, shape=tuple(shape)))

    atomic_write(path, write)  # the map stays valid: it maps the file, whatever its name
    return maps[0]


def open_memmap(path: str | os.PathLike[str]) -> np.memmap:
    """An existing ``.npy`` file mapped read-write, opened with ``O_NOFOLLOW``.

    Raises
    ------
    OSError
        If ``path`` is missing, a link or not a regular file.
    ValueError
        If it is not a ``.npy`` file numpy can map.
    """
    fd = os.open(path, os.O_RDWR | _NOFOLLOW)
    with os.fdopen(fd, "r+b") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file.")
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0}.get(
            version, np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read(f)
        if fortran:
            raise ValueError(f"{path} holds a Fortran-ordered array.")
        return np.memmap(f, dtype=dtype, mode="r+", offset=f.tell(), shape=shape)
