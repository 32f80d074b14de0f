"""Build the coursework (releases, autograders, the student kit) and grade submissions, offline.

Usage (through the Makefile: ``make coursework``, ``make grade SUBMISSIONS=dir``)::

    python tools/coursework.py list                  # the assignments
    python tools/coursework.py build [NAME ...]      # releases, autograders, kit (default: all)
    python tools/coursework.py grade SUBMISSIONS [--timeout 300] [--memory 4G] [--parallel N]
    python tools/coursework.py totals GRADES.csv     # totals again, after grading by hand
    python tools/coursework.py gradescope NAME       # run NAME's Gradescope zip in its layout

Every assignment is one master notebook, ``coursework/<name>/<name>.ipynb``, in otter-grader's
format. ``build`` runs ``otter assign --no-run-tests`` on it (the student notebook and an
autograder zip), writes the points computed from the tests into the released headings and adds
how to submit (``coursework_master``), grades the reference solution exactly as a student's
submission is graded (in the sandbox; otter's own run of the tests would only repeat it), and
refuses (exit 1, nothing released for that assignment) unless it scores full marks,
the release holds no line of a solution or hidden test, and the tests import nothing the
Gradescope environment lacks. Then it writes the student kit (``coursework_student``).
Outputs, under ``build/coursework/`` (ignored by git)::

    release/<name>.zip, release/<name>/   the student notebook (public tests inside)
    student/, student.zip                 the student kit: dmlbook's wheel, chapters without
                                          answers, the releases (what students get)
    autograder/<name>.zip                 Gradescope-ready autograder (every test: keep private)
    autograder/<name>.json                questions, points, hand-graded prompts and rubrics
    reference/<name>.ipynb, .json         the reference solution and its per-test results

``grade`` takes a folder of submitted notebooks (any depth; the student is the file name, or
the folder name when the file keeps the assignment's name), recognises each notebook's
assignment from its metadata, and grades every one in its own sandboxed kernel, in parallel, the
tests running in the grader's process and asking the kernel for the answers as plain data
(``coursework_grade``, ``coursework_remote``, ``coursework_sandbox``); it writes
``<out>/<assignment>.csv`` and, per student, the executed notebook, the instructor's and the
student's feedback and the hand-grading sheet (``coursework_report``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coursework_grade as grading  # noqa: E402
import coursework_gradescope as gradescope  # noqa: E402  (tools/ is not a package)
import coursework_master as masters  # noqa: E402
import coursework_report as report  # noqa: E402
import coursework_sandbox as sandbox  # noqa: E402
import coursework_student as student_kit  # noqa: E402
from coursework_master import leaks, released_text, secret_lines  # noqa: E402, F401

ROOT = Path(__file__).resolve().parent.parent
COURSEWORK = ROOT / "coursework"
BUILD = ROOT / "build" / "coursework"
OTTER = Path(sys.executable).with_name("otter")
WHEEL_CACHE = ROOT / "build" / "wheel-cache"  # wheels pip downloaded for Gradescope zips


@dataclass(frozen=True)
class TestResult:
    """One test case of one question: its name (``q1 - 2``), points, visibility and outcome."""

    name: str
    points: float
    hidden: bool
    passed: bool
    message: str


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
    """The environment of ``otter assign`` and its kernels: this checkout's ``dmlbook`` first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.setdefault("TQDM_DISABLE", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def isolation_for(isolation: str, strict: bool = True) -> str:
    """Check that ``isolation`` works here; exit with one clear message when it does not.

    ``strict=False`` (the reference solution, the instructor's own code) falls back to
    ``process`` when no sandbox can be made.
    """
    with sandbox.UserIds(1 if os.geteuid() == 0 else 0) as ids:
        uid = ids.ids[0] if ids.ids else None
        if isolation == "process":
            problem = sandbox.process_problem(uid)
            if problem:
                sys.exit(f"cannot grade with --isolation process: {problem}")
            if strict:
                print(sandbox.weaker_isolation_warning(uid), file=sys.stderr)
            return "process"
        problem = sandbox.sandbox_problem(uid)
    if problem is None:
        return "sandbox"
    if not strict and sandbox.process_problem(uid) is None:
        return "process"
    if not strict:
        raise RuntimeError(f"no sandbox and no separate user can run the reference: {problem}")
    sys.exit(
        f"cannot grade untrusted code safely: {problem}\nFix that, or grade with the weaker "
        "isolation (separate processes and limits, no private file system or network): "
        "make grade ... ISOLATION=process"
    )


def _clean(out: Path, name: str) -> None:
    for stale in (out / "release" / name, out / "release" / f"{name}.zip"):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(
            missing_ok=True
        )


def build_one(
    name: str,
    out: Path = BUILD,
    root: Path = COURSEWORK,
    wheel: Path | None = None,
    wheels: list[Path] | None = None,
) -> tuple[list[TestResult], float]:
    """Build assignment ``name`` into ``out``; raise ``RuntimeError`` (nothing released) on failure.

    Returns the reference solution's per-test results (all passed) and the CPU seconds its
    grading took (its kernel, in the sandbox students get, and the tests in the grader's driver;
    the budget is 60 s on two cores). ``wheels``: carried by the Gradescope zip, which then
    installs offline (``coursework_gradescope.collect_wheels``); None: it installs from the
    indexes.
    """
    _clean(out, name)
    with tempfile.TemporaryDirectory() as tmp:
        dist = Path(tmp) / "dist"
        proc = subprocess.run(
            # --no-run-tests: the reference is graded below, in the students' sandbox
            [str(OTTER), "assign", "--no-run-tests", str(master(name, root)), str(dist)],
            capture_output=True,
            text=True,
            env=grader_env(),
        )
        if proc.returncode:
            raise RuntimeError(
                f"{name}: otter assign refused to build (the master notebook is malformed):\n"
                f"{(proc.stdout + proc.stderr)[-3000:]}"
            )
        (otter_zip,) = (dist / "autograder").glob("*.zip")
        solution = dist / "autograder" / f"{name}.ipynb"
        masters.finish_release(dist / "student" / f"{name}.ipynb", master(name, root))
        tests, cases = report.load_tests(otter_zip)
        job = grading.Job(
            str(solution), name, "reference", tests, str(Path(tmp) / "ran.ipynb"), "", {}
        )
        limits = sandbox.Limits(seconds=600)
        (outcome,) = grading.grade_all([job], 1, limits, isolation=isolation_for("sandbox", False))
        results = [
            TestResult(c.name, c.points, c.hidden, *outcome.results.get(c.name, [False, ""]))
            for c in cases
        ]
        failed = [r.name for r in results if r.passed is not True]
        if failed:
            why = f" ({outcome.reason})" if outcome.reason else ""
            raise RuntimeError(f"{name}: the reference solution fails {', '.join(failed)}{why}")
        found = leaks(master(name, root), dist / "student")
        if found:
            raise RuntimeError(f"{name}: the student release contains: {found[:5]}")
        cells = nbformat.read(solution, as_version=4).cells
        sources = [c.source for c in cells if not grading.is_otter_cell(c.source)]
        missing = gradescope.uncovered_imports(sources + list(tests.values()))
        if missing:
            raise RuntimeError(f"{name}: the tests import {missing}, which Gradescope would lack")
        wheel = wheel or gradescope.build_wheel(out / "wheel")
        _write_build(out, name, root, dist, otter_zip, solution, wheel, cases, wheels)
    (out / "reference" / f"{name}.json").write_text(
        json.dumps(
            {"grading_cpu_seconds": outcome.cpu_seconds, "tests": [asdict(r) for r in results]},
            indent=1,
        )
        + "\n"
    )
    return results, outcome.cpu_seconds


def _write_build(out, name, root, dist, otter_zip, solution, wheel, cases, wheels) -> None:
    for folder in ("autograder", "reference", "release"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    target = out / "autograder" / f"{name}.zip"
    gradescope.gradescope_zip(otter_zip, wheel, target, cases, wheels)
    spec = {"assignment": name, "questions": masters.questions(master(name, root))}
    (out / "autograder" / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")
    shutil.copyfile(solution, out / "reference" / f"{name}.ipynb")
    shutil.copytree(dist / "student", out / "release" / name)
    shutil.make_archive(str(out / "release" / name), "zip", out / "release" / name)


def build(names: list[str], out: Path = BUILD, carry_wheels: bool = False) -> int:
    """Build every assignment in ``names``, then the student kit. Returns how many failed.

    ``carry_wheels``: the Gradescope zips carry every wheel grading needs (offline install).
    """
    failures = 0
    wheel = gradescope.build_wheel(out / "wheel")
    wheels = gradescope.collect_wheels(out / "wheels", WHEEL_CACHE) if carry_wheels else None
    for name in names:
        start = time.perf_counter()
        print(f"{name} ...", end=" ", flush=True)
        try:
            results, cpu = build_one(name, out, wheel=wheel, wheels=wheels)
        except RuntimeError as err:
            failures += 1
            print("REFUSED")
            print(str(err), file=sys.stderr)
            continue
        got = sum(r.points for r in results if r.passed)
        print(
            f"reference {got:g}/{sum(r.points for r in results):g} (graded in {cpu:.1f} s CPU), "
            f"built in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    releases = sorted((out / "release").glob("*.zip"))
    try:
        kit = student_kit.build_kit(out, wheel, releases, [master(n) for n in assignments()])
    except RuntimeError as err:
        print(f"student kit REFUSED: {err}", file=sys.stderr)
        return failures + 1
    if not failures:
        print(f"for students: {kit} (the wheel, the chapters without answers, the releases)")
        print(f"autograders (keep private; Gradescope-ready): {out / 'autograder'}")
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


def _jobs(submissions: Path, out: Path, autograders: Path) -> tuple[dict, int]:
    """Per assignment: its jobs, cases and hand-graded questions; and how many were skipped."""
    notebooks = sorted(
        p for p in submissions.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    if not notebooks:
        sys.exit(f"no .ipynb file under {submissions}")
    groups: dict[str, dict] = {}
    skipped = 0
    for nb in notebooks:
        name = assignment_of(nb)
        zip_path, spec_path = autograders / f"{name}.zip", autograders / f"{name}.json"
        if name is None or not zip_path.is_file() or not spec_path.is_file():
            skipped += 1
            why = "not a coursework notebook" if name is None else f"no autograder for {name!r}"
            print(f"skipped {nb}: {why} (run `make coursework` first)", file=sys.stderr)
            continue
        if name not in groups:
            tests, cases = report.load_tests(zip_path)
            manual = [q for q in json.loads(spec_path.read_text())["questions"] if q["manual"]]
            try:
                scores = report.read_manual_scores(out / f"{name}.csv", manual)
            except ValueError as err:
                sys.exit(f"fix the hand-graded score first: {err}")
            groups[name] = {"tests": tests, "cases": cases, "manual": manual, "jobs": []}
            groups[name] |= {"scores": scores, "folders": set()}
        group = groups[name]
        who = student_of(nb, name)
        folder = report.safe_name(who)
        while folder in group["folders"]:
            folder += "_"
        group["folders"].add(folder)
        executed = out / name / folder / "executed.ipynb"
        group["jobs"].append(grading.Job(str(nb), name, who, group["tests"], str(executed), "", {}))
    return groups, skipped


def grade(
    submissions: Path,
    out: Path,
    autograders: Path = BUILD / "autograder",
    limits: sandbox.Limits | None = None,
    isolation: str = "sandbox",
    parallel: int | None = None,
    pdf: bool = False,
) -> int:
    """Grade every notebook under ``submissions`` into ``out`` (module docstring).

    Returns the number of notebooks that could not be graded at all (not an assignment's, or
    no autograder built for it: run ``build`` first); a submission that crashes, hangs or
    misbehaves is graded (0, with the reason) and does not count. Ctrl-C (or SIGTERM) ends the
    running sandboxes, writes what was graded and keeps the CSV's other rows.
    """
    if not submissions.is_dir():
        sys.exit(f"not a folder of submissions: {submissions}")
    parallel = parallel or grading.available_cores()
    threads = max(1, grading.available_cores() // parallel)
    limits = limits or sandbox.Limits(threads=threads)
    mode = isolation_for(isolation)
    groups, skipped = _jobs(submissions, out, autograders)
    jobs = [job for group in groups.values() for job in group["jobs"]]
    print(
        f"grading {len(jobs)} submission(s), {parallel} at a time, each in its own "
        f"{'sandbox' if mode == 'sandbox' else 'process'} within {limits.describe()}",
        flush=True,
    )
    done: dict[str, grading.Outcome] = {}

    def progress(job: grading.Job, outcome: grading.Outcome) -> None:
        done[job.submission] = outcome
        cases = groups[job.assignment]["cases"]
        got = sum(c.points for c in cases if outcome.results.get(c.name, [False])[0] is True)
        why = f" ({outcome.reason})" if outcome.reason else ""
        print(
            f"[{len(done)}/{len(jobs)}] {job.assignment}: {job.student} {got:g}/"
            f"{sum(c.points for c in cases):g} {outcome.status}{why}, {outcome.seconds:.0f} s",
            flush=True,
        )

    start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C
    try:
        outcomes = grading.grade_all(jobs, parallel, limits, on_done=progress, isolation=mode)
    except KeyboardInterrupt:
        report.write_reports(groups, done, out, interrupted=True)
        sys.exit(f"interrupted: {len(done)} of {len(jobs)} submission(s) graded and written")
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.write_reports(groups, done, out, pdf=pdf)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    cpu += sum(o.killed_cpu_seconds for o in outcomes)
    print(
        f"graded in {time.perf_counter() - start:.0f} s, {cpu:.0f} s of CPU (kernels and drivers)"
    )
    return skipped


def totals(csv_path: Path, autograders: Path = BUILD / "autograder") -> int:
    """Recompute a grades CSV's totals after hand-graded scores were typed into it."""
    spec = json.loads((autograders / f"{csv_path.stem}.json").read_text())
    manual = [q for q in spec["questions"] if q["manual"]]
    try:
        pending = report.recompute_totals(csv_path, manual)
    except ValueError as err:
        sys.exit(str(err))
    print(f"{csv_path}: totals updated; {pending} submission(s) still wait for a hand grade")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the assignments")
    b = sub.add_parser("build", help="student releases, autograders, the student kit")
    b.add_argument("names", nargs="*", help="assignments (default: all)")
    b.add_argument("--out", type=Path, default=BUILD, help="output folder (default: %(default)s)")
    b.add_argument(
        "--carry-wheels",
        action="store_true",
        help="Gradescope zips carry every wheel grading needs (offline setup.sh, ~330 MB each)",
    )
    g = sub.add_parser("grade", help="grade a folder of submissions into CSV files")
    g.add_argument("submissions", type=Path, help="folder of submitted notebooks")
    g.add_argument("--out", type=Path, default=BUILD / "grades", help="grades folder")
    g.add_argument("--autograders", type=Path, default=BUILD / "autograder")
    g.add_argument("--timeout", type=float, default=300, help="seconds per submission (300)")
    g.add_argument("--memory", default="4G", help="memory per submission (4G)")
    g.add_argument("--parallel", type=int, default=None, help="at a time (default: all cores)")
    g.add_argument("--isolation", choices=sandbox.MODES, default="sandbox")
    g.add_argument("--pdf", action="store_true", help="hand-grading sheets as PDF (Chromium)")
    t = sub.add_parser("totals", help="recompute a grades CSV's totals after grading by hand")
    t.add_argument("csv", type=Path)
    t.add_argument("--autograders", type=Path, default=BUILD / "autograder")
    s = sub.add_parser("gradescope", help="run an autograder zip as Gradescope would")
    s.add_argument("name")
    s.add_argument("--submission", type=Path, help="a notebook (default: the reference solution)")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(assignments()))
        return 0
    if args.command == "build":
        return 1 if build(assignments(args.names), args.out, args.carry_wheels) else 0
    if args.command == "totals":
        return totals(args.csv, args.autograders)
    if args.command == "gradescope":
        return check_gradescope(args.name, args.submission)
    try:
        memory = sandbox.parse_size(args.memory)
    except ValueError as err:
        parser.error(f"--memory: {err}")
    if args.timeout <= 0 or (args.parallel is not None and args.parallel < 1):
        parser.error("--timeout and --parallel must be positive")
    parallel = args.parallel or grading.available_cores()
    limits = sandbox.Limits(
        seconds=args.timeout,
        memory=memory,
        threads=max(1, grading.available_cores() // parallel),
    )
    return (
        1
        if grade(
            args.submissions,
            args.out,
            args.autograders,
            limits,
            args.isolation,
            parallel,
            args.pdf,
        )
        else 0
    )


def check_gradescope(name: str, submission: Path | None = None, out: Path = BUILD) -> int:
    """Run ``name``'s Gradescope zip in Gradescope's layout; 0 when it gives full marks."""
    zip_path = out / "autograder" / f"{name}.zip"
    submission = submission or out / "reference" / f"{name}.ipynb"
    if not zip_path.is_file() or not submission.is_file():
        sys.exit(f"no {zip_path} or {submission}: run `make coursework ASSIGNMENTS={name}` first")
    with zipfile.ZipFile(zip_path) as zf:
        if not any(n.startswith("wheels/") for n in zf.namelist()):
            sys.exit(
                f"{zip_path} carries no wheels: build it with `coursework.py build --carry-wheels`"
            )
    try:
        score, possible, seconds = gradescope.check(
            zip_path, submission, out / "gradescope" / f"{name}.results.json"
        )
    except RuntimeError as err:
        sys.exit(f"{name}: the Gradescope zip failed in its layout: {err}")
    print(
        f"{name}: {score:g}/{possible:g} in Gradescope's layout, offline (setup.sh: {seconds:.0f} s)"
    )
    return 0 if abs(score - possible) < 1e-9 else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
