"""``runs.csv`` of ``bench/omniglot_compare.py`` and the claims that let several processes share
one ``--out`` folder (imported by that script; tests in ``tests/bench/test_omniglot_compare.py``).

A run is one row, named by the values of :data:`KEY`
(:data:`dmlbook.studies.fair_comparison.RUN_KEY`); a row is appended under a file lock as soon as
its run ends, so an interrupted invocation loses only the runs in flight (and a long run resumes
from its checkpoint). A process claims a run by writing its PID to ``claims/NAME``; the claim of a
process that is gone is taken over.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a source tree without an install (PYTHONPATH unset)
    sys.path.insert(0, str(ROOT))

from dmlbook.studies import fair_comparison as fc  # noqa: E402

COLUMNS = [
    "phase", "loss", "hparams", "seed", "steps", "sampler", "variant", "width", "fold",
    "val MAP@R", "val R@1",
    "one-shot error", "MAP@R", "R@1", "run errors", "cpu_s", "wall_s", "load1", "device",
    "finished",
]  # fmt: skip
KEY = list(fc.RUN_KEY)


def read_runs(path: Path) -> pd.DataFrame:
    dtype = {"hparams": str, "sampler": str, "variant": str, "fold": str}
    rows = pd.read_csv(path, comment="#", dtype=dtype)
    return rows.reindex(columns=COLUMNS)


class Ledger:
    """``runs.csv``: the rows finished so far; appends one row per run, under a file lock."""

    def __init__(self, path: Path, header: str) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ",".join(f'"{c}"' if " " in c else c for c in COLUMNS)
        self._write(lambda f: f.write((columns + "\n" if f.tell() == 0 else "") + header + "\n"))

    def rows(self) -> pd.DataFrame:
        return read_runs(self.path)

    def done(self) -> set[tuple]:
        return {tuple(r) for r in self.rows()[KEY].astype(str).itertuples(index=False)}

    def append(self, row: dict) -> None:
        line = pd.DataFrame([row], columns=COLUMNS).to_csv(header=False, index=False)
        self._write(lambda f: f.write(line))

    def _write(self, write) -> None:
        """``write(f)`` on the file opened for appending, under an exclusive lock (several
        invocations may share one file, e.g. one per group of families)."""
        with open(self.path, "a") as f:
            try:
                import fcntl

                fcntl.flock(f, fcntl.LOCK_EX)
            except ImportError:  # pragma: no cover - not POSIX
                pass
            f.seek(0, os.SEEK_END)
            write(f)
            f.flush()


def key_of(row: dict) -> tuple:
    return tuple(str(row[k]) for k in KEY)


def slug(row: dict) -> str:
    """A file name for one run (:func:`~dmlbook.studies.fair_comparison.run_name`)."""
    return fc.run_name(row)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(out: Path, name: str) -> bool:
    """Mark a run as taken by this process (``out/claims/name`` holds its PID); False when a
    living process holds it. Several processes on one ``--out`` thus share its runs."""
    path = out / "claims" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            with open(path, "x") as f:
                f.write(str(os.getpid()))
            return True
        except FileExistsError:
            text = path.read_text().strip()
            if text.isdigit() and _alive(int(text)):
                return False
            path.unlink(missing_ok=True)  # its process is gone: an interrupted run
    return False


def release(out: Path, name: str) -> None:
    (out / "claims" / name).unlink(missing_ok=True)


def busy(out: Path) -> bool:
    """Whether another living process holds a run of this folder."""
    folder = out / "claims"
    pids = [p.read_text().strip() for p in folder.glob("*")] if folder.is_dir() else []
    return any(p.isdigit() and int(p) != os.getpid() and _alive(int(p)) for p in pids)
