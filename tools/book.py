"""Execute the book's chapters: in place (``refresh``) or into ``build/book`` rendered as HTML (``build``).

Usage (through the Makefile, which installs the environment first)::

    python tools/book.py refresh [CHAPTER ...]   # maintainers: re-execute and store outputs in book/
    python tools/book.py build                    # readers: execute into build/book/ and render HTML
    python tools/book.py list                     # the chapters in reading order

Every chapter is executed top to bottom in a fresh kernel with ``TQDM_DISABLE=1`` (no progress
bars in stored outputs). Volatile metadata (timestamps, kernel versions) is stripped; execution
counts are kept, because nbval needs them. A chapter that writes to stderr, fails, or runs longer
than ``--max-seconds`` is reported and the command exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = ROOT / "build" / "book"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
IGNORE_MARK = "# NBVAL_IGNORE_OUTPUT"


def chapters(selected: list[str] | None = None) -> list[Path]:
    """All chapters in reading order, or the ``selected`` ones (checked to exist)."""
    if selected:
        paths = [Path(p).resolve() for p in selected]
        missing = [str(p) for p in paths if not p.is_file() or p.suffix != ".ipynb"]
        if missing:
            sys.exit(f"not a chapter notebook: {', '.join(missing)}")
        return paths
    found = [
        p
        for p in BOOK.rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
    ]
    return sorted(found, key=lambda p: p.relative_to(BOOK).as_posix())


def normalise(nb: nbformat.NotebookNode) -> None:
    """Strip volatile metadata, keep outputs and execution counts."""
    nb.metadata = nbformat.from_dict(
        {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
        | {k: v for k, v in nb.metadata.items() if k in ("jupytext_skip",)}
    )
    for cell in nb.cells:
        for key in ("execution", "collapsed", "scrolled", "ExecuteTime"):
            cell.metadata.pop(key, None)
        cell.pop("id", None)
    nb.nbformat, nb.nbformat_minor = 4, 4


def stderr_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of code cells (not marked to be ignored) whose outputs include stderr."""
    bad = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or IGNORE_MARK in cell.source:
            continue
        if any(
            o.get("output_type") == "stream" and o.get("name") == "stderr" for o in cell.outputs
        ):
            bad.append(i)
    return bad


def execute(src: Path, dst: Path, cell_timeout: int) -> float:
    """Execute ``src`` in a fresh kernel (working directory: its folder) and write it to ``dst``."""
    nb = nbformat.read(src, as_version=4)
    os.environ["TQDM_DISABLE"] = "1"
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads sleep, not spin
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        # Kernel start-up chatter (log warnings) would interleave with the progress lines.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(src.parent)}},
    )
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        seconds = time.perf_counter() - start
    normalise(nb)
    nbformat.validate(nb)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, dst)
    bad = stderr_cells(nb)
    if bad:
        raise RuntimeError(
            f"cells {bad} wrote to stderr (a warning or a progress bar); stored outputs must be "
            f"deterministic. Fix the cause, or mark the cell '{IGNORE_MARK}'."
        )
    return seconds


def run_all(paths: list[Path], out_of: callable, cell_timeout: int, max_seconds: float) -> int:
    """Execute every path; print one progress line per chapter; return the number of failures."""
    failures = 0
    total = time.perf_counter()
    for n, src in enumerate(paths, 1):
        name = src.relative_to(BOOK).as_posix() if src.is_relative_to(BOOK) else str(src)
        print(f"[{n}/{len(paths)}] {name} ...", end=" ", flush=True)
        try:
            seconds = execute(src, out_of(src), cell_timeout)
        except CellExecutionError as err:
            failures += 1
            print("FAILED")
            print(str(err)[-3000:], file=sys.stderr)
            continue
        except RuntimeError as err:
            failures += 1
            print(f"FAILED: {err}")
            continue
        over = seconds > max_seconds
        failures += over
        note = f" (over the {max_seconds:.0f} s budget)" if over else ""
        print(f"{seconds:.1f} s{note}", flush=True)
    print(f"{len(paths)} chapter(s) in {time.perf_counter() - total:.1f} s, {failures} failure(s)")
    return failures


def write_toc(paths: list[Path], root: Path) -> None:
    """Jupyter Book 1.x table of contents: intro page, then the chapters in reading order."""
    lines = ["format: jb-book", "root: intro", "chapters:"]
    for p in paths:
        lines.append(f"- file: {p.relative_to(root).with_suffix('').as_posix()}")
    (root / "_toc.yml").write_text("\n".join(lines) + "\n")


def build(cell_timeout: int, max_seconds: float) -> int:
    """Execute every chapter into build/book and render the HTML book there."""
    paths = chapters()
    if BUILD.exists():
        shutil.rmtree(BUILD)
    BUILD.mkdir(parents=True)
    for extra in ("intro.md", "_config.yml", "references.bib"):
        if (BOOK / extra).exists():
            shutil.copy2(BOOK / extra, BUILD / extra)
    failures = run_all(paths, lambda p: BUILD / p.relative_to(BOOK), cell_timeout, max_seconds)
    if failures:
        print("not rendering: fix the failing chapters first", file=sys.stderr)
        return 1
    write_toc([BUILD / p.relative_to(BOOK) for p in paths], BUILD)
    print("rendering HTML with Jupyter Book ...", flush=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(BUILD), "--quiet"], cwd=ROOT)
    if proc.returncode:
        return proc.returncode
    index = BUILD / "_build" / "html" / "index.html"
    print(f"open {index.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("command", choices=("refresh", "build", "list"))
    parser.add_argument("chapters", nargs="*", help="chapters for refresh (default: all)")
    parser.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="budget per chapter")
    args = parser.parse_args(argv)
    if args.command == "list":
        for p in chapters():
            print(p.relative_to(ROOT))
        return 0
    if args.command == "build":
        if args.chapters:
            parser.error("build always executes the whole book")
        return build(args.cell_timeout, args.max_seconds)
    return (
        1
        if run_all(chapters(args.chapters), lambda p: p, args.cell_timeout, args.max_seconds)
        else 0
    )


if __name__ == "__main__":
    sys.exit(main())
