"""The run folder of a training run: writable, locked, and cleaned only of its own temporary files.

Before anything is built, :func:`run_folder` checks what would otherwise fail late:

* the folder can be written (a read-only folder used to be found at the first checkpoint, after
  the training since the resume was lost);
* no other ``dmlbook train`` uses it: a lock file (``.dmlbook-train.lock``, held with the
  maintained :mod:`filelock` package through an OS lock, so a process killed with ``kill -9``
  leaves no stale lock) is held for the whole run; a second run in the same folder stops at once
  with :class:`RunFolderBusy` instead of interleaving checkpoints and CSV files with the first;
* temporary files of this package's own run files left by a killed process
  (``.last.pt.*.tmp`` ...) are removed, under the lock; other files are never touched, so
  ``train.out_dir: /tmp`` leaves other programs' ``.*.tmp`` files alone.

Under ``torchrun`` only rank 0 writes files, so only rank 0 takes the lock. Tested in
``tests/engine/test_run_folder.py``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["LOCK_NAME", "RUN_FILES", "RunFolderBusy", "check_writable", "run_folder"]

#: The lock file in every run folder.
LOCK_NAME = ".dmlbook-train.lock"
#: The files a run writes atomically (:func:`dmlbook.training.checkpoint.atomic_write`), whose
#: temporary files ``.<name>.<random>.tmp`` a killed process may leave behind.
RUN_FILES = ("last.pt", "best.pt", "metrics.csv", "train_log.csv", "run.json")


class RunFolderBusy(OSError):
    """Another process holds the lock of the run folder."""


def check_writable(out: Path) -> None:
    """Create ``out`` if needed and write (then delete) a file in it; one clear ``OSError`` if not."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dmlbook-write-test-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OSError(
            f"the run folder {out} cannot be written ({err.strerror or err}); nothing was "
            "trained. Give the run a writable folder (train.out_dir, e.g. --set "
            "train.out_dir=/scratch/runs/NAME) or fix the folder's permissions."
        ) from err


def _remove_own_temporaries(out: Path) -> None:
    for name in RUN_FILES:
        for stale in out.glob(f".{name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()


@contextlib.contextmanager
def run_folder(out: Path, is_main: bool = True) -> Iterator[Path]:
    """Check, lock and clean the run folder ``out`` for the ``with`` block (rank 0 only).

    Raises
    ------
    OSError
        If ``out`` cannot be created or written.
    RunFolderBusy
        If another process holds its lock; the message says what to do.
    """
    out = Path(out)
    if not is_main:
        yield out
        return
    check_writable(out)
    lock = FileLock(out / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunFolderBusy(
            f"another dmlbook train is running in {out} (it holds {out / LOCK_NAME}); wait for "
            "it to end or stop it, or give this run another folder (train.out_dir, or another "
            "name)."
        ) from None
    try:
        _remove_own_temporaries(out)
        yield out
    finally:
        lock.release()
