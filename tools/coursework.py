"""Build the coursework (student releases, autograders) and grade submissions, offline.

Usage (through the Makefile: ``make coursework``, ``make grade SUBMISSIONS=dir``)::

    python tools/coursework.py list                     # the assignments
    python tools/coursework.py build [NAME ...]          # releases + autograders (default: all)
    python tools/coursework.py grade SUBMISSIONS        # grade a folder into one CSV per assignment

Every assignment is one master notebook, ``coursework/<name>/<name>.ipynb``, in otter-grader's
format (solution and test blocks; hidden tests marked ``hidden: true``). ``build`` runs
``otter assign`` on it, which writes the student notebook and an autograder zip, then grades the
reference solution with ``otter run``; it refuses (exit 1, nothing released for that assignment)
unless the solution scores full marks, and scans the release for any line of a solution or of a
hidden test. Outputs, under ``build/coursework/`` (ignored by git)::

    release/<name>.zip          what students get: the student notebook (public tests inside)
    release/<name>/             the same, unzipped
    autograder/<name>.zip       what the instructor keeps: every test, hidden ones included
    reference/<name>.json       the reference solution's per-test results

``grade`` takes a folder of submitted notebooks (any depth; the student's name is the file name,
or the folder name when the file keeps the assignment's name), recognises each notebook's
assignment from its metadata, grades it with ``otter run`` (no Docker, no network, this
environment's packages) and writes ``<out>/<assignment>.csv``: one row per submission, the total,
and one column per test case (``q1 - 2``: question 1, second test), so the points a student lost
can be traced to the test that took them. Graders import ``dmlbook`` from this checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
COURSEWORK = ROOT / "coursework"
BUILD = ROOT / "build" / "coursework"
OTTER = Path(sys.executable).with_name("otter")


@dataclass(frozen=True)
class TestResult:
    """One test case of one question: its name (``q1 - 2``), points, visibility and outcome."""

    name: str
    points: float
    hidden: bool
    passed: bool
    message: str


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's waited-for descendants (otter and kernels)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def assignments(selected: list[str] | None = None, root: Path = COURSEWORK) -> list[str]:
    """The assignment names (folders of ``root`` holding ``<name>/<name>.ipynb``), sorted."""
    found = sorted(p.parent.name for p in root.glob("*/*.ipynb") if p.stem == p.parent.name)
    if not selected:
        return found
    unknown = [name for name in selected if name not in found]
    if unknown:
        sys.exit(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(found)}")
    return list(selected)


def master(name: str, root: Path = COURSEWORK) -> Path:
    """The master notebook of assignment ``name``."""
    return root / name / f"{name}.ipynb"


def grader_env() -> dict[str, str]:
    """The environment of otter and its kernels: this checkout's ``dmlbook`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.setdefault("TQDM_DISABLE", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def grade_one(submission: Path, autograder: Path) -> list[TestResult]:
    """Grade one notebook with ``otter run`` (in a child process) and return every test case."""
    code = (
        "import contextlib, io, json, sys\n"
        "from otter.run import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    r = main(sys.argv[1], autograder=sys.argv[2], output_dir=None, no_logo=True)\n"
        "out = [dict(name=t.test_case.name, points=t.test_case.points, hidden=t.test_case.hidden,\n"
        "            passed=bool(t.passed), message=t.message)\n"
        "       for f in r.results.values() for t in f.test_case_results]\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(submission), str(autograder)],
        capture_output=True,
        text=True,
        env=grader_env(),
    )
    if proc.returncode:
        raise RuntimeError(f"otter run failed on {submission}:\n{proc.stderr[-3000:]}")
    return [TestResult(**row) for row in json.loads(proc.stdout.strip().splitlines()[-1])]


def score(results: list[TestResult]) -> tuple[float, float]:
    """``(points earned, points possible)``."""
    return sum(r.points for r in results if r.passed), sum(r.points for r in results)


def released_text(folder: Path) -> str:
    """Every text a student receives under ``folder``: files, and the members of any zip."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                parts += [zf.read(n).decode("utf-8", "replace") for n in zf.namelist()]
        else:
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _lines(source: str) -> set[str]:
    """The stripped, non-trivial lines of a cell (at least 12 characters, not a marker)."""
    out = set()
    for line in source.splitlines():
        s = line.strip()
        if len(s) >= 12 and "BEGIN" not in s and "END" not in s and not s.startswith('"""'):
            out.add(s)
    return out


def _solution_comment_lines(source: str) -> list[str]:
    """Lines between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` comments, and ``x = 1  # SOLUTION``."""
    out, inside = [], False
    for line in source.splitlines():
        if "# BEGIN SOLUTION" in line or "# END SOLUTION" in line:
            inside = "# BEGIN SOLUTION" in line
        elif inside:
            out.append(line)
        elif line.rstrip().endswith("# SOLUTION"):
            out.append(line.rsplit("# SOLUTION", 1)[0])
    return out


def secret_lines(master_nb: Path) -> set[str]:
    """Lines of the master's solutions and hidden tests, which no released file may hold.

    A solution line is a line that otter replaces in the student notebook: between
    ``# BEGIN SOLUTION`` and ``# END SOLUTION`` comments, or ending in ``# SOLUTION``, in any code
    cell (wherever the cell is: otter strips the markers only inside a solution block, so a
    marked line elsewhere ships unless this scan catches it), and every line of a written
    (markdown) answer in a solution block. A hidden-test line is a line of a test cell whose
    configuration says ``hidden: true`` and that no public test has (public tests ship with the
    student notebook, so their lines may appear).
    """
    nb = nbformat.read(master_nb, as_version=4)
    secrets, hidden, public = set(), set(), set()
    in_solution = in_tests = False
    for cell in nb.cells:
        text = cell.source.strip()
        if cell.cell_type == "raw":
            in_solution = {"# BEGIN SOLUTION": True, "# END SOLUTION": False}.get(text, in_solution)
            in_tests = {"# BEGIN TESTS": True, "# END TESTS": False}.get(text, in_tests)
        elif cell.cell_type == "markdown" and in_solution:
            secrets |= _lines(cell.source)
        elif cell.cell_type == "code":
            secrets |= _lines("\n".join(_solution_comment_lines(cell.source)))
            if in_tests:
                body = _lines(cell.source.split("# END TEST CONFIG", 1)[-1])
                (hidden if "hidden: true" in cell.source else public).update(body)
    return secrets | (hidden - public)


def leaks(master_nb: Path, release: Path) -> list[str]:
    """Solution or hidden-test lines found in anything under ``release`` (empty: no leak)."""
    text = released_text(release)
    return sorted(line for line in secret_lines(master_nb) if line in text)


def _zip_folder(folder: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(path, path.relative_to(folder).as_posix())


def build_one(
    name: str, out: Path = BUILD, root: Path = COURSEWORK
) -> tuple[list[TestResult], float]:
    """Build assignment ``name`` into ``out``; raise ``RuntimeError`` (nothing released) on failure.

    Returns the reference solution's per-test results (all passed) and the CPU seconds its
    grading took (``otter run`` and the kernel it starts; the budget is 60 s on two cores).
    """
    for stale in (out / "release" / name, out / "release" / f"{name}.zip"):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(
            missing_ok=True
        )
    with tempfile.TemporaryDirectory() as tmp:
        dist = Path(tmp) / "dist"
        proc = subprocess.run(
            [str(OTTER), "assign", str(master(name, root)), str(dist)],
            capture_output=True,
            text=True,
            env=grader_env(),
        )
        if proc.returncode:
            raise RuntimeError(
                f"{name}: otter assign refused to build (the reference solution fails a test, or "
                f"the master notebook is malformed):\n{(proc.stdout + proc.stderr)[-3000:]}"
            )
        zips = list((dist / "autograder").glob("*.zip"))
        solution = dist / "autograder" / f"{name}.ipynb"
        cpu = children_cpu_seconds()
        results = grade_one(solution, zips[0])
        cpu = children_cpu_seconds() - cpu
        failed = [r.name for r in results if not r.passed]
        if failed:
            raise RuntimeError(f"{name}: the reference solution fails {', '.join(failed)}")
        found = leaks(master(name, root), dist / "student")
        if found:
            raise RuntimeError(f"{name}: the student release contains: {found[:5]}")
        (out / "autograder").mkdir(parents=True, exist_ok=True)
        shutil.copy2(zips[0], out / "autograder" / f"{name}.zip")
        shutil.copytree(dist / "student", out / "release" / name)
        _zip_folder(out / "release" / name, out / "release" / f"{name}.zip")
    (out / "reference").mkdir(parents=True, exist_ok=True)
    (out / "reference" / f"{name}.json").write_text(
        json.dumps({"grading_cpu_seconds": cpu, "tests": [r.__dict__ for r in results]}, indent=1)
        + "\n"
    )
    return results, cpu


def build(names: list[str], out: Path = BUILD) -> int:
    """Build every assignment in ``names``; one line each. Returns the number that failed."""
    failures = 0
    for name in names:
        start = time.perf_counter()
        print(f"{name} ...", end=" ", flush=True)
        try:
            results, cpu = build_one(name, out)
        except RuntimeError as err:
            failures += 1
            print("REFUSED")
            print(str(err), file=sys.stderr)
            continue
        got, possible = score(results)
        print(
            f"reference {got:g}/{possible:g} (graded in {cpu:.1f} s CPU), "
            f"built in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    if not failures:
        print(
            f"student releases: {out / 'release'}\nautograders (keep private): {out / 'autograder'}"
        )
    return failures


def assignment_of(notebook: Path) -> str | None:
    """The assignment a submitted notebook belongs to (otter's metadata), or None."""
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception:  # not a notebook (a corrupt upload): reported by the caller
        return None
    return nb.metadata.get("otter", {}).get("assignment_name")


def student_of(notebook: Path, assignment: str) -> str:
    """The student's name: the file name, or its folder's when the file is ``<assignment>.ipynb``."""
    return notebook.parent.name if notebook.stem == assignment else notebook.stem


def grade(submissions: Path, out: Path, autograders: Path = BUILD / "autograder") -> int:
    """Grade every notebook under ``submissions`` into ``out/<assignment>.csv``.

    Returns the number of notebooks that could not be graded (not an assignment, or no
    autograder built for it: run ``build`` first).
    """
    if not submissions.is_dir():
        sys.exit(f"not a folder of submissions: {submissions}")
    notebooks = sorted(
        p for p in submissions.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    if not notebooks:
        sys.exit(f"no .ipynb file under {submissions}")
    rows: dict[str, list[dict[str, object]]] = {}
    problems = 0
    for nb in notebooks:
        name = assignment_of(nb)
        zip_path = autograders / f"{name}.zip"
        if name is None or not zip_path.is_file():
            problems += 1
            why = "not a coursework notebook" if name is None else f"no autograder for {name!r}"
            print(f"skipped {nb}: {why} (run `make coursework` first)", file=sys.stderr)
            continue
        results = grade_one(nb, zip_path)
        got, possible = score(results)
        student = student_of(nb, name)
        print(f"{name}: {student} {got:g}/{possible:g}", flush=True)
        row: dict[str, object] = {"student": student, "file": str(nb), "total": got}
        row["possible"] = possible
        row |= {r.name: (r.points if r.passed else 0) for r in results}
        rows.setdefault(name, []).append(row)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in rows.items():
        columns = list(dict.fromkeys(k for row in table for k in row))
        with open(out / f"{name}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(table)
        print(f"wrote {out / f'{name}.csv'} ({len(table)} submission(s))")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the assignments")
    b = sub.add_parser("build", help="student releases and autograders")
    b.add_argument("names", nargs="*", help="assignments (default: all)")
    b.add_argument("--out", type=Path, default=BUILD, help="output folder (default: %(default)s)")
    g = sub.add_parser("grade", help="grade a folder of submissions into CSV files")
    g.add_argument("submissions", type=Path, help="folder of submitted notebooks")
    g.add_argument("--out", type=Path, default=BUILD / "grades", help="CSV folder")
    g.add_argument(
        "--autograders", type=Path, default=BUILD / "autograder", help="built autograder zips"
    )
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(assignments()))
        return 0
    if args.command == "build":
        return 1 if build(assignments(args.names), args.out) else 0
    return 1 if grade(args.submissions, args.out, args.autograders) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
