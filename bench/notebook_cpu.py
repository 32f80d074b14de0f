"""CPU time of a chapter run the way a reader runs it, against ``make book``'s executor.

``make book`` executes every chapter with ``tools/book.py`` (nbclient, ``OMP_WAIT_POLICY=PASSIVE``
in the environment). A reader in JupyterLab, or ``jupyter nbconvert --execute``, has no such
variable: unless ``import dmlbook`` sets it before torch loads its OpenMP runtime, idle OpenMP
threads spin between parallel regions and, on a busy machine, burn several times the CPU of the
chapter itself. This script runs each given chapter both ways from this source tree, one after
the other, and prints the CPU time (user + system of every process each run waited for: the
driver and the kernel) and the wall time, with the load average before and after.

Usage::

    python bench/notebook_cpu.py book/12_dro.ipynb [book/15_fair_comparison.ipynb ...]

Appends its lines to ``bench/results/notebook_cpu.md`` (``--out`` to change). Measure on a busy
machine (load >= 4 on 2 cores) to see the difference; on a quiet one both agree anyway.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """``(cpu_seconds, wall_seconds)`` of ``cmd`` and everything it waited for."""
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return children_cpu() - cpu, time.perf_counter() - wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("chapters", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "notebook_cpu.md")
    args = p.parse_args(argv)
    reader = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}  # as in a terminal
    reader["TQDM_DISABLE"] = "1"
    book = dict(reader, OMP_WAIT_POLICY="PASSIVE")  # what the Makefile exports
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for chapter in args.chapters:
            chapter = chapter.resolve()
            load = os.getloadavg()[0]
            nbconvert = measure(
                [str(BIN / "jupyter"), "nbconvert", "--execute", "--to", "notebook",
                 "--output-dir", tmp, "--output", "nbconvert.ipynb", str(chapter)],
                reader, chapter.parent,
            )  # fmt: skip
            executor = measure(
                [sys.executable, "-c",
                 "import sys; sys.path.insert(0, 'tools'); import book; from pathlib import Path; "
                 f"book.execute(Path({str(chapter)!r}), Path({tmp!r}) / 'book.ipynb', 600)"],
                book, ROOT,
            )  # fmt: skip
            line = (
                f"| {chapter.name} | {nbconvert[0]:.1f} | {nbconvert[1]:.0f} | {executor[0]:.1f} | "
                f"{executor[1]:.0f} | {nbconvert[0] / executor[0]:.2f} | "
                f"{load:.1f} -> {os.getloadavg()[0]:.1f} |"
            )
            print(line, flush=True)
            lines.append(line)
    stamp = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs"
    with open(args.out, "a") as f:
        f.write("\n".join(f"{line} {stamp} |" for line in lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
