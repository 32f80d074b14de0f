"""The run folder of a training run: writable, locked, never overwritten, cleaned of its own files.

Before anything is built, :func:`run_folder` checks what would otherwise fail late or lose work:

* the folder can be written (a read-only folder used to be found at the first checkpoint, after
  the training since the resume was lost);
* no other ``dmlbook train`` uses it: the process holds an OS lock (``flock``) on the open folder
  itself for the whole run, and one on the lock file ``.dmlbook-train.lock`` (with the
  maintained :mod:`filelock` package). The kernel drops both when the process ends, even by
  ``kill -9``, so no stale lock is left; deleting the lock file does not release the folder's
  lock. A second run in the same folder stops at once with :class:`RunFolderBusy` instead of
  interleaving checkpoints and CSV files with the first. (Where the file system cannot lock a
  folder, e.g. some NFS mounts, the lock file alone is held.)
* a fresh run never overwrites another one: if the folder holds a run's files
  (:data:`RUN_FILES`, or a ``tensorboard/`` folder) and the new run does not continue that
  run's ``last.pt``, it stops with :class:`RunFolderTaken`, which names the choices: resume it,
  another ``train.out_dir``, or ``overwrite``, which moves the old run's files into
  ``<folder>/previous-run-N/`` (nothing is deleted);
* temporary files of this package's own run files left by a killed process
  (``.last.pt.*.tmp`` ...) are removed, under the lock; other files are never touched, so
  ``train.out_dir: /tmp`` leaves other programs' ``.*.tmp`` files alone.

Under ``torchrun`` only rank 0 writes files, so only rank 0 takes the lock. Tested in
``tests/engine/test_run_folder.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: an open lock file cannot be deleted there
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_NAME",
    "PREVIOUS_PREFIX",
    "RUN_FILES",
    "RunFolderBusy",
    "RunFolderTaken",
    "check_writable",
    "run_files",
    "run_folder",
]

#: The lock file in every run folder.
LOCK_NAME = ".dmlbook-train.lock"
#: The files a run writes atomically (:func:`dmlbook.training.checkpoint.atomic_write`), whose
#: temporary files ``.<name>.<random>.tmp`` a killed process may leave behind.
RUN_FILES = ("last.pt", "best.pt", "metrics.csv", "train_log.csv", "run.json")
#: ``overwrite`` moves an old run's files into ``<folder>/previous-run-N/``.
PREVIOUS_PREFIX = "previous-run-"


class RunFolderBusy(OSError):
    """Another process holds the lock of the run folder."""


class RunFolderTaken(FileExistsError):
    """A fresh run would overwrite the run already in its folder; the message lists the choices."""


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


def _busy(out: Path) -> RunFolderBusy:
    return RunFolderBusy(
        f"another dmlbook train is running in {out} (it holds the folder's lock, "
        f"{out / LOCK_NAME}); wait for it to end or stop it, or give this run another folder "
        "(train.out_dir, or another name)."
    )


def _lock_folder(out: Path) -> int | None:
    """``flock`` the open folder ``out`` itself; its descriptor, or None where that is not
    supported (no ``fcntl``, or a file system that cannot lock a folder)."""
    if fcntl is None:  # pragma: no cover - Windows
        return None
    try:
        fd = os.open(out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - a folder that cannot be opened for reading
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _busy(out) from None
    except OSError:  # pragma: no cover - e.g. NFS without flock on folders: the lock file only
        os.close(fd)
        return None
    return fd


def run_files(out: Path) -> list[str]:
    """The names of the run files (and ``tensorboard/``) that ``out`` holds."""
    names = [name for name in RUN_FILES if (out / name).exists()]
    return names + (["tensorboard"] if (out / "tensorboard").is_dir() else [])


def _describe(out: Path) -> str:
    """``"run 'x', iteration 4 of 12"`` from the old run's ``run.json``, or ``""``."""
    try:
        meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
        state = "complete" if meta.get("complete") else "not complete"
        return (
            f"run {meta['name']!r}, iteration {meta['iteration']:,} of "
            f"{meta['total_iterations']:,}, {state}; "
        )
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _previous(out: Path) -> Path:
    n = 1
    while (out / f"{PREVIOUS_PREFIX}{n}").exists():
        n += 1
    return out / f"{PREVIOUS_PREFIX}{n}"


def _keep_or_move(out: Path, overwrite: bool) -> None:
    """Refuse to write a fresh run over the run in ``out``, or move that run aside."""
    found = run_files(out)
    if not found:
        return
    target = _previous(out)
    if not overwrite:
        raise RunFolderTaken(
            f"the run folder {out} already holds a run ({_describe(out)}{', '.join(found)}); "
            "nothing was trained or overwritten. Continue that run with --resume (Python: "
            "resume=True), give this run another folder with --set train.out_dir=DIR, or start "
            f"afresh with --overwrite (overwrite=True), which moves the old run's files into "
            f"{target} (nothing is deleted)."
        )
    target.mkdir()
    for name in found:
        os.replace(out / name, target / name)


@contextlib.contextmanager
def run_folder(
    out: Path, is_main: bool = True, *, fresh: bool = False, overwrite: bool = False
) -> Iterator[Path]:
    """Check, lock and clean the run folder ``out`` for the ``with`` block (rank 0 only).

    Parameters
    ----------
    out : Path
        The run folder (created if needed).
    is_main : bool
        Rank 0 (or a single process): the only one that checks, locks and writes.
    fresh : bool
        The run does not continue the ``last.pt`` of ``out``: it must not write over a run that
        ``out`` holds, unless ``overwrite``.
    overwrite : bool
        Move the files of a run that ``out`` holds into ``out/previous-run-N/`` first.

    Raises
    ------
    OSError
        If ``out`` cannot be created or written.
    RunFolderBusy
        If another process holds its lock; the message says what to do.
    RunFolderTaken
        For a fresh run into a folder that holds a run, without ``overwrite``.
    """
    out = Path(out)
    if not is_main:
        yield out
        return
    check_writable(out)
    folder_fd = _lock_folder(out)
    lock = FileLock(out / LOCK_NAME, timeout=0)
    try:
        try:
            lock.acquire()
        except Timeout:
            raise _busy(out) from None
        try:
            if fresh:
                _keep_or_move(out, overwrite)
            _remove_own_temporaries(out)
            yield out
        finally:
            lock.release()
    finally:
        if folder_fd is not None:
            os.close(folder_fd)  # releases the flock
