"""Execute the book's chapters: in place (``refresh``) or into ``build/book`` rendered as HTML (``build``).

Usage (through the Makefile, which installs the environment first)::

    python tools/book.py refresh [CHAPTER ...]   # maintainers: re-execute and store outputs in book/
    python tools/book.py build                    # readers: execute into build/book/ and render HTML
    python tools/book.py build --edition instructor   # the same with the exercises' answers shown
    python tools/book.py list                     # the chapters in reading order

Every chapter is executed top to bottom in a fresh kernel with ``TQDM_DISABLE=1`` (no progress
bars in stored outputs). Volatile metadata (timestamps, kernel versions) is stripped; execution
counts are kept, because nbval needs them.

Time budget. A chapter must run in at most 45 s of CPU on two quiet cores of an ordinary CPU.
Wall time depends on whatever else the machine is doing, so the budget is kept on the kernel's CPU
time (user + system, of the kernel and the processes it waited for), which load barely changes:
``--max-cpu-seconds`` (default 45). On a quiet machine a chapter's wall time is at most about its
CPU time, so the budget also bounds what a reader waits. Both times are printed for every chapter.

"Ordinary" means AVX2 kernels: many laptops and cloud machines have AVX2 but not AVX-512, and
there the same chapter costs about twice the CPU or more (issue 46, ``bench/step_layout.py``).
``refresh`` therefore runs the kernels as such a CPU would (``--kernels avx2``, its default:
``ATEN_CPU_CAPABILITY=avx2`` for torch's own kernels, ``ONEDNN_MAX_CPU_ISA=AVX2`` for the
convolutions), so the budget it checks holds there; ``--kernels native`` uses what this CPU has.
``build`` runs the reader's machine as it is (``native``). The first line of either names the CPU,
its instruction sets and the kernels used.

- ``refresh`` (maintainers) is where the budget is enforced: a chapter over it, one that fails, or
  one that writes to stderr makes the command exit non-zero, and a failing chapter is not stored.
- ``build`` (readers) always renders what it executed: a slow chapter is a warning with its
  measured times; a failing chapter is rendered with its error shown, and the command exits
  non-zero after rendering so the failure is not missed.

Editions. Every chapter ends with exercises; each answer is a markdown cell tagged ``answer``
(a MyST dropdown). The **student** edition (the default, ``build/book/``) removes every answer
cell from the executed copies before rendering, so neither the pages nor the notebooks they
offer for download hold an answer; the **instructor** edition (``build/book-instructor/``) keeps
them, behind a dropdown. The chapters in ``book/`` always hold the answers: publish the student
build, not the repository, where answers must stay private.

Rendering (``prepare`` + ``render``): the errata page is generated from the chapters' erratum
cells (``dmlbook/papers/errata.py``), the API reference from the package (``tools/api_reference.py``),
the Binder/Colab links open the notebooks of the edition built where they are published on GitHub
(``tools/book_links.py``), and the rendered HTML is scanned for anything a page would fetch from
the network (a script, style sheet, font or image; ``tools/book_check.py``), which fails the
build: the book must read offline. ``python tools/book_check.py build/book/_build/html`` opens every page in headless
Chromium as well.
"""

from __future__ import annotations

if __name__ == "__main__":  # the imports below take seconds, more on a busy machine
    print("loading the book's tools (nbclient, nbformat, dmlbook) ...", flush=True)

import argparse
import os
import re
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))  # bench/machine.py
from book_check import network_references  # noqa: E402  (tools/ is not a package)
from book_links import LaunchTarget, apply_to_config, launch_target, write_manifest  # noqa: E402
from heartbeat import Heartbeat, minutes, run_filtered  # noqa: E402
from machine import cpu_flags, cpu_model  # noqa: E402

from dmlbook.papers.errata import collect, errata_page  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = ROOT / "build" / "book"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
IGNORE_MARK = "# NBVAL_IGNORE_OUTPUT"
EDITIONS = ("student", "instructor")
ANSWER_TAG = "answer"
OUTPUTS = {"student": BUILD, "instructor": ROOT / "build" / "book-instructor"}
#: ``--kernels``: the environment of each chapter's kernel (module docstring, "Time budget").
KERNELS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def chapters(selected: list[str] | None = None, book: Path = BOOK) -> list[Path]:
    """All chapters of ``book`` in reading order, or the ``selected`` ones (checked to exist)."""
    if selected:
        paths = [Path(p).resolve() for p in selected]
        missing = [str(p) for p in paths if not p.is_file() or p.suffix != ".ipynb"]
        if missing:
            sys.exit(f"not a chapter notebook: {', '.join(missing)}")
        return paths
    found = [
        p
        for p in book.rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
    ]
    return sorted(found, key=lambda p: p.relative_to(book).as_posix())


def merge_streams(outputs: list) -> list:
    """Join consecutive stream outputs of the same name (stdout, stderr) into one output.

    Where the kernel splits one cell's printing into several outputs depends on its timing, so
    the stored notebook would otherwise change from run to run (nbval joins them the same way).
    """
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and out.get("output_type") == "stream"
            and prev.get("output_type") == "stream"
            and out.get("name") == prev.get("name")
        ):
            prev["text"] = "".join(prev["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def normalise(nb: nbformat.NotebookNode) -> None:
    """Strip volatile metadata, keep outputs (consecutive streams joined) and execution counts.

    ``language_info`` is kept whole, as the kernel reported it: JupyterLab writes the kernel's
    ``language_info`` into a notebook it opens, and anything less than the same dict marks the
    chapter as changed the moment it opens. A live widget's view (``WIDGET_VIEW``) is dropped:
    its model exists only while the kernel runs (JupyterLab would show "model not found"); the
    static rendering the widget displays beside it (``dmlbook.chapters.explorer``) is kept.
    """
    language = nb.metadata.get("language_info") or {"name": "python"}
    nb.metadata = nbformat.from_dict(
        {"kernelspec": KERNELSPEC, "language_info": language}
        | {k: v for k, v in nb.metadata.items() if k in ("jupytext_skip",)}
    )
    for cell in nb.cells:
        for key in ("execution", "collapsed", "scrolled", "ExecuteTime"):
            cell.metadata.pop(key, None)
        cell.pop("id", None)
        if "outputs" in cell:
            cell.outputs = merge_streams(cell.outputs)
            for out in cell.outputs:
                out.get("data", {}).pop(WIDGET_VIEW, None)
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


class ChapterError(RuntimeError):
    """A chapter that failed or wrote to stderr (its executed notebook may still have been written)."""


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's terminated, waited-for children (kernels)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def execute(
    src: Path,
    dst: Path,
    cell_timeout: int,
    keep_failed: bool = False,
    on_cell: Callable[[int, int], None] | None = None,
) -> tuple[float, float]:
    """Execute ``src`` in a fresh kernel (working directory: its folder) and write it to ``dst``.

    Returns ``(wall_seconds, cpu_seconds)``. The CPU time is the kernel's: jupyter_client waits for
    the kernel process when it shuts it down, so its usage (and that of any worker processes it
    waited for) lands in this process's ``RUSAGE_CHILDREN``. Raises ``ChapterError`` when a cell
    fails or writes to stderr; with ``keep_failed`` a failed chapter is still written to ``dst``
    with its error output (the reader's build shows it), otherwise ``dst`` is left untouched.
    ``on_cell(index, cells)`` is called as each cell starts (the progress of a long chapter).
    """
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
    if on_cell is not None:
        client.on_cell_start = lambda cell, cell_index: on_cell(cell_index, len(nb.cells))
    cpu_before, start = children_cpu_seconds(), time.perf_counter()
    error = None
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        error = err
    seconds = time.perf_counter() - start
    cpu = children_cpu_seconds() - cpu_before
    if error is not None and not keep_failed:
        raise ChapterError(str(error)[-3000:]) from error
    normalise(nb)
    nbformat.validate(nb)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, dst)
    if error is not None:
        raise ChapterError(str(error)[-3000:]) from error
    bad = stderr_cells(nb)
    if bad:
        raise ChapterError(
            f"cells {bad} wrote to stderr (a warning or a progress bar); stored outputs must be "
            f"deterministic. Fix the cause, or mark the cell '{IGNORE_MARK}'."
        )
    return seconds, cpu


def execute_with_progress(
    src: Path, dst: Path, cell_timeout: int, keep_failed: bool
) -> tuple[float, float]:
    """:func:`execute`, adding ``[cell i/n]`` to the chapter's line every 10 s it runs."""
    at = [0, 0]  # the cell running, of how many

    def started(index: int, cells: int) -> None:
        at[:] = [index, cells]

    def status(elapsed: float) -> str:
        where = f"cell {at[0] + 1}/{at[1]}" if at[1] else "starting the kernel"
        return f"[{where}, {elapsed:.0f} s]"

    with Heartbeat(status, end=" "):
        return execute(src, dst, cell_timeout, keep_failed=keep_failed, on_cell=started)


def run_all(
    paths: list[Path],
    out_of: callable,
    cell_timeout: int,
    max_cpu_seconds: float,
    enforce_budget: bool = True,
    keep_failed: bool = False,
) -> tuple[int, list[str]]:
    """Execute every path, one progress line per chapter.

    Returns ``(failures, slow)``: the number of chapters that failed (plus, with
    ``enforce_budget``, those over ``max_cpu_seconds`` of kernel CPU time) and a line of measured
    times for each chapter over the budget.
    """
    failures, slow = 0, []
    total = time.perf_counter()
    for n, src in enumerate(paths, 1):
        name = src.relative_to(BOOK).as_posix() if src.is_relative_to(BOOK) else str(src)
        print(f"[{n}/{len(paths)}] {name} ...", end=" ", flush=True)
        try:
            seconds, cpu = execute_with_progress(src, out_of(src), cell_timeout, keep_failed)
        except ChapterError as err:
            failures += 1
            print("FAILED")
            print(str(err), file=sys.stderr)
            continue
        timing = f"{seconds:.1f} s wall, {cpu:.1f} s CPU"
        if cpu > max_cpu_seconds:
            slow.append(f"{name}: {timing} (budget {max_cpu_seconds:.0f} s CPU)")
            failures += enforce_budget
            timing += f" (over the {max_cpu_seconds:.0f} s CPU budget)"
        print(timing, flush=True)
    print(f"{len(paths)} chapter(s) in {time.perf_counter() - total:.1f} s, {failures} failure(s)")
    return failures, slow


def use_kernels(kernels: str) -> None:
    """Set the environment the chapters' kernels start with (``KERNELS[kernels]``) and say so:
    ``CPU: <model> (<instruction sets>); chapters run on <kernels> kernels``."""
    for key in {k for setting in KERNELS.values() for k in setting}:
        os.environ.pop(key, None)
    os.environ.update(KERNELS[kernels])
    setting = " ".join(f"{k}={v}" for k, v in sorted(KERNELS[kernels].items()))
    print(
        f"CPU: {cpu_model()} ({cpu_flags()}); chapters run on {kernels} kernels"
        + (f" ({setting})" if setting else ""),
        flush=True,
    )


#: Pages of ``book/`` read right after the introduction, before Chapter 1 (the notation page).
FRONT_PAGES = ("notation",)


def write_toc(
    paths: list[Path], root: Path, appendices: tuple[str, ...] = (), front: tuple[str, ...] = ()
) -> None:
    """Jupyter Book 1.x table of contents: intro page, ``front`` pages, the chapters, appendices."""
    lines = ["format: jb-book", "root: intro", "chapters:"]
    lines += [f"- file: {name}" for name in front]
    for p in paths:
        lines.append(f"- file: {p.relative_to(root).with_suffix('').as_posix()}")
    lines += [f"- file: {name}" for name in appendices]
    (root / "_toc.yml").write_text("\n".join(lines) + "\n")


def remove_answers(path: Path) -> int:
    """Delete every cell tagged ``answer`` from the notebook at ``path``; returns how many."""
    nb = nbformat.read(path, as_version=4)
    kept = [c for c in nb.cells if ANSWER_TAG not in c.metadata.get("tags", [])]
    removed = len(nb.cells) - len(kept)
    if removed:
        nb.cells = kept
        nbformat.write(nb, path)
    return removed


def prepare(
    book: Path,
    out: Path,
    paths: list[Path],
    launch: LaunchTarget | None,
    edition: str = "student",
    api: bool = True,
) -> None:
    """Write the Jupyter Book sources beside the executed chapters in ``out``.

    The configuration (launch buttons to ``launch``'s tree, none without one; see
    ``tools/book_links.py``) and a record of it for ``make check-book``, the intro page, the API
    reference generated from the package (``tools/api_reference.py``; ``api=False`` leaves it out),
    ``_static/`` (the book's CSS), the errata page collected from the chapters, and the table of
    contents listing the notation page (``FRONT_PAGES``, where ``book`` has it) and ``paths``
    (chapters under ``out``) in reading order. The ``student`` edition deletes the answer cells
    from ``paths`` (copies under ``out``, never ``book/``); the ``instructor`` edition keeps them
    and says so in the title.
    """
    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {EDITIONS}, got {edition!r}")
    if edition == "student":
        for path in paths:
            if not path.resolve().is_relative_to(out.resolve()):
                raise ValueError(
                    f"{path} is not under {out}: prepare removes answers from executed copies only"
                )
            remove_answers(path)
    config = yaml.safe_load((book / "_config.yml").read_text())
    if edition == "instructor":
        config["title"] = f"{config.get('title', '')} (instructor edition)".strip()
    apply_to_config(config, launch)
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    write_manifest(out, edition, launch)
    for extra in ("intro.md", "references.bib", *(f"{name}.md" for name in FRONT_PAGES)):
        if (book / extra).exists():
            shutil.copy2(book / extra, out / extra)
    front = tuple(name for name in FRONT_PAGES if (book / f"{name}.md").exists())
    if (book / "_static").is_dir():
        shutil.copytree(book / "_static", out / "_static", dirs_exist_ok=True)
    (out / "errata.md").write_text(errata_page(collect(paths)))
    appendices = ("errata",)
    if api:
        import api_reference  # imports torch: only when the page is made

        found = api_reference.entries()
        (out / "api.md").write_text(api_reference.page(found))
        # the page's links come from the docstrings, which its source (api.md) only names
        (out / "_sources_extra").mkdir(exist_ok=True)
        (out / "_sources_extra" / "api.txt").write_text(api_reference.docstring_text(found))
        appendices += ("api",)
    write_toc(paths, out, appendices=appendices, front=front)


def render(out: Path) -> int:
    """Render ``out`` with Jupyter Book, then scan the HTML for anything fetched from the network.

    Sphinx's lines are shortened to one per page read and one per page written, its warnings are
    printed as they come, and a line every 10 s says it is still at work. Any warning fails the
    build (``-W``), after every page has been read and written (``--keep-going``); on failure the
    end of its whole output is printed.
    """
    print("rendering HTML with Jupyter Book ...", flush=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    command = [str(jb), "build", "-W", "--keep-going", str(out)]  # a Sphinx warning fails it
    code, tail = run_filtered(command, _sphinx_line, _rendering, cwd=ROOT)
    if code:
        print("\n".join(tail), file=sys.stderr)
        return code
    html = out / "_build" / "html"
    remote = network_references(html)
    if remote:
        print("pages that need the network:\n  " + "\n  ".join(remote), file=sys.stderr)
        return 1
    print("offline: no page loads a script, style sheet, font or image from the network")
    return 0


SPHINX_PROGRESS = re.compile(r"^(reading sources|writing output)\.\.\. \[\s*(\d+)%\] (\S+)")


def _sphinx_line(line: str) -> str | None:
    """What ``make book`` shows of Sphinx's output: pages read and written, warnings, errors."""
    match = SPHINX_PROGRESS.match(line)
    if match:
        verb = "read" if match[1].startswith("reading") else "wrote"
        return f"  {verb} {match[3]} ({match[2]} %)"
    if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|^Traceback|Error:", line):
        return line
    return None


def _rendering(elapsed: float) -> str:
    return f"  ... still rendering ({minutes(elapsed)})"


def build(
    cell_timeout: int,
    max_cpu_seconds: float,
    book: Path = BOOK,
    out: Path | None = None,
    edition: str = "student",
    api: bool = True,
) -> int:
    """Execute every chapter of ``book`` into ``out`` and render the HTML book there.

    ``out`` defaults to the edition's folder (``build/book/``, ``build/book-instructor/``).

    Renders whatever was executed, failed chapters included (their error is on the page); slow
    chapters are a warning. Returns non-zero when a chapter failed or rendering failed.
    """
    out = OUTPUTS[edition] if out is None else out
    paths = chapters(book=book)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    failures, slow = run_all(
        paths,
        lambda p: out / p.relative_to(book),
        cell_timeout,
        max_cpu_seconds,
        enforce_budget=False,
        keep_failed=True,
    )
    executed = [out / p.relative_to(book) for p in paths if (out / p.relative_to(book)).exists()]
    repository = yaml.safe_load((book / "_config.yml").read_text()).get("repository", {})
    launch, why = launch_target(
        edition, ROOT, repository.get("branch", "main"), repository.get("path_to_book", "book")
    )
    print(why, flush=True)
    prepare(book, out, executed, launch, edition, api)
    code = render(out)
    if code:
        return code
    if slow:
        print(
            "warning: over the chapter time budget here (rendered all the same; a busy machine "
            "inflates these, `make refresh` enforces the budget):\n  " + "\n  ".join(slow),
            flush=True,
        )
    if failures:
        print(f"{failures} chapter(s) failed: their pages show the error", flush=True)
    index = out / "_build" / "html" / "index.html"
    # The last line is the book, whatever was said before it.
    print(f"open {index.relative_to(ROOT) if index.is_relative_to(ROOT) else index}", flush=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("command", choices=("refresh", "build", "list"))
    parser.add_argument("chapters", nargs="*", help="chapters for refresh (default: all)")
    parser.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument(
        "--edition",
        choices=EDITIONS,
        default="student",
        help="build: student (answers removed, build/book/) or instructor (answers shown, "
        "build/book-instructor/)",
    )
    parser.add_argument(
        "--kernels",
        choices=tuple(KERNELS),
        default=None,
        help="the chapters' kernels: avx2 (as an ordinary CPU; refresh's default) or native "
        "(this CPU's own; build's default)",
    )
    parser.add_argument(
        "--max-cpu-seconds",
        type=float,
        default=45.0,
        help="budget per chapter in kernel CPU seconds; "
        "refresh fails a chapter over it, build only warns",
    )
    args = parser.parse_args(argv)
    if args.command == "list":
        for p in chapters():
            print(p.relative_to(ROOT))
        return 0
    if args.command == "build":
        if args.chapters:
            parser.error("build always executes the whole book")
        use_kernels(args.kernels or "native")
        return build(args.cell_timeout, args.max_cpu_seconds, edition=args.edition)
    use_kernels(args.kernels or "avx2")
    failures, _ = run_all(
        chapters(args.chapters), lambda p: p, args.cell_timeout, args.max_cpu_seconds
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
