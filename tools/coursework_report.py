"""What grading writes for the instructor: the grades CSV, feedback, hand-grading sheets.

For each assignment, under the grades folder (``build/coursework/grades/`` by default)::

    <assignment>.csv                       one row per submission (columns below)
    <assignment>/<student>/executed.ipynb  the submission as it ran, outputs included
    <assignment>/<student>/feedback.html   every test case: points, passed or not, and its
                                           message (hidden tests included: for the instructor)
    <assignment>/<student>/student_feedback.html  the same for the student: hidden tests by
                                           name and result only (no code, no message)
    <assignment>/<student>/by_hand.html    each hand-graded question: the prompt, the student's
                                           answer, the model answer and the rubric, a score line
    <assignment>/<student>/by_hand.pdf     the same page as a PDF (headless Chromium, when
                                           Playwright's browser is installed: ``html_to_pdf``)

The CSV's columns: ``student``, ``file``, ``total`` (autograded plus the hand-graded scores
entered so far), ``possible`` (every point, by hand included), ``autograded``, one column per
hand-graded question (``q3 (by hand, /3)``: empty until the instructor types the score),
``pending`` (hand-graded questions without a score: ``total`` is not final while it is not
empty), one column per test case (``q1 - 2``: its points, 0 when it failed), ``status``
(``graded``, ``timeout``, ``crashed``, ``unreadable``, ``grader-error``), ``reason`` (why a
submission scored 0, or the cells that raised), and ``seconds`` of grading.

Scores typed into the hand-graded columns survive a new ``make grade`` (matched by student and
file), and ``python tools/coursework.py totals <csv>`` recomputes ``total`` and ``pending``
after typing them, without grading again. ``explain`` turns why a run stopped into the
``status`` and ``reason`` columns; ``write_reports`` writes all of the above (also for the
submissions graded before an interrupted run stopped). Tested by
``tests/test_coursework_isolation.py``.
"""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import signal
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import mistune
import nbformat

_markdown = mistune.create_markdown(escape=True)  # a student's raw HTML is shown, not run


@dataclass(frozen=True)
class Case:
    """One test case as the instructor's copy of the tests defines it."""

    name: str
    points: float
    hidden: bool
    failure_message: str


def number(x: float) -> str:
    """A score as the CSV shows it: ``3``, ``4.5``."""
    return f"{x:g}"


def load_tests(autograder_zip: Path) -> tuple[dict[str, str], list[Case]]:
    """The test files of an autograder zip (name -> source) and their cases, in order."""
    from otter.test_files.ok_test import OKTestFile

    with zipfile.ZipFile(autograder_zip) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith("tests/") and n.endswith(".py"))
        tests = {n.removeprefix("tests/"): zf.read(n).decode() for n in names}
    cases = []
    for name, source in tests.items():
        spec: dict = {}
        exec(compile(source, name, "exec"), spec)  # the instructor's own test file
        for c in OKTestFile.from_spec(spec["test"], path=name).test_cases:
            cases.append(Case(c.name, float(c.points), c.hidden, c.failure_message or ""))
    return tests, cases


def manual_column(question: dict) -> str:
    """The CSV column of a hand-graded question: ``'q3 (by hand, /3)'``."""
    return f"{question['name']} (by hand, /{question['points']:g})"


def safe_name(text: str) -> str:
    """A student's name as a folder name (letters, digits, ``._-``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "student"


def read_manual_scores(path: Path, manual: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """Hand-graded scores already typed into ``path`` (an earlier CSV), by (student, file).

    Raises ``ValueError`` naming the row and column of a score that is not a number between 0
    and the question's points.
    """
    if not path.is_file():
        return {}
    out: dict[tuple[str, str], dict[str, float]] = {}
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            scores = {}
            for question in manual:
                text = (row.get(manual_column(question)) or "").strip()
                if not text:
                    continue
                try:
                    value = float(text)
                except ValueError:
                    value = -1.0
                if not 0 <= value <= question["points"]:
                    raise ValueError(
                        f"{path}, line {line} ({row.get('student')}): "
                        f"{manual_column(question)} is {text!r}, not a number from 0 to "
                        f"{question['points']:g}"
                    )
                scores[question["name"]] = value
            out[(row.get("student", ""), row.get("file", ""))] = scores
    return out


def row_of(
    student: str, file: str, cases: list[Case], outcome, manual: list[dict], scores: dict
) -> dict[str, object]:
    """One CSV row: points per case (0 unless the case ran and passed), totals, status."""
    earned = {
        c.name: c.points if outcome.results.get(c.name, [False])[0] is True else 0 for c in cases
    }
    auto = sum(earned.values())
    possible = sum(c.points for c in cases) + sum(q["points"] for q in manual)
    reason = outcome.reason or "; ".join(outcome.notes[:3])
    row: dict[str, object] = {"student": student, "file": file}
    row["total"] = number(auto + sum(scores.values()))
    row["possible"] = number(possible)
    row["autograded"] = number(auto)
    for question in manual:
        row[manual_column(question)] = (
            number(scores[question["name"]]) if question["name"] in scores else ""
        )
    row["pending"] = " ".join(q["name"] for q in manual if q["name"] not in scores)
    row |= {name: number(points) for name, points in earned.items()}
    row |= {"status": outcome.status, "reason": reason, "seconds": round(outcome.seconds, 1)}
    return row


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def recompute_totals(path: Path, manual: list[dict]) -> int:
    """Rewrite ``total`` and ``pending`` of a grades CSV from its typed-in hand-graded scores.

    Returns the number of rows still pending.
    """
    scores = read_manual_scores(path, manual)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    pending = 0
    for row in rows:
        typed = scores.get((row["student"], row["file"]), {})
        row["total"] = number(float(row["autograded"]) + sum(typed.values()))
        row["pending"] = " ".join(q["name"] for q in manual if q["name"] not in typed)
        pending += bool(row["pending"])
    write_csv(path, rows)
    return pending


_STYLE = (
    "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto;line-height:1.4}"
    "pre{background:#f4f4f4;padding:.6em;white-space:pre-wrap}.fail{color:#a00}.pass{color:#070}"
    "section{border-top:1px solid #ccc;margin-top:1.5em}td,th{padding:.2em .6em;text-align:left}"
    ".answer{border-left:4px solid #36c;padding-left:1em}.rubric{background:#fff8e0;padding:.5em}"
    "</style>"
)


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"{_STYLE}</head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n"
    )


def feedback_html(assignment: str, student: str, cases: list[Case], outcome, row: dict) -> str:
    """The instructor's feedback page of one submission: every case and its message."""
    parts = [
        f"<p>Autograded: <b>{row['autograded']}</b> of {sum(c.points for c in cases):g} "
        f"points. Status: <b>{html.escape(outcome.status)}</b>. "
        f"Graded in {outcome.seconds:.1f} s ({outcome.cpu_seconds:.1f} s of CPU).</p>"
    ]
    if row["reason"]:
        parts.append(f"<p class='fail'>{html.escape(str(row['reason']))}</p>")
    parts.append("<table><tr><th>test</th><th>points</th><th>kind</th><th>result</th></tr>")
    for c in cases:
        passed, _ = outcome.results.get(c.name, [False, ""])
        verdict = (
            "passed" if passed is True else "failed" if c.name in outcome.results else "not run"
        )
        parts.append(
            f"<tr><td>{html.escape(c.name)}</td><td>{row[c.name]} / {c.points:g}</td>"
            f"<td>{'hidden' if c.hidden else 'public'}</td>"
            f"<td class='{'pass' if passed is True else 'fail'}'>{verdict}</td></tr>"
        )
    parts.append("</table>")
    for c in cases:
        passed, message = outcome.results.get(c.name, [False, ""])
        if passed is True:
            continue
        parts.append(f"<section><h3>{html.escape(c.name)}</h3>")
        if c.failure_message:
            parts.append(f"<p><b>{html.escape(c.failure_message)}</b></p>")
        parts.append(f"<pre>{html.escape(message or 'not run: ' + str(row['reason']))}</pre>")
        parts.append("</section>")
    for note in outcome.notes:
        parts.append(f"<p>Note: {html.escape(note)}</p>")
    return _page(f"{assignment}: {student}", "\n".join(parts))


def student_feedback_html(assignment: str, student: str, cases: list[Case], outcome, row) -> str:
    """The feedback to give the student: every case's result, hidden tests by name only.

    A public test's failure shows its message and report (the student has that test already);
    a hidden test shows its name, points and whether it passed, never its code, message or
    report (``feedback_html`` is the instructor's, with everything).
    """
    parts = [
        f"<p>Autograded: <b>{row['autograded']}</b> of {sum(c.points for c in cases):g} "
        f"points. Status: <b>{html.escape(outcome.status)}</b>.</p>"
    ]
    if row["reason"]:
        parts.append(f"<p class='fail'>{html.escape(str(row['reason']))}</p>")
    parts.append("<table><tr><th>test</th><th>points</th><th>kind</th><th>result</th></tr>")
    for c in cases:
        passed = outcome.results.get(c.name, [False, ""])[0] is True
        verdict = "passed" if passed else "failed" if c.name in outcome.results else "not run"
        parts.append(
            f"<tr><td>{html.escape(c.name)}</td><td>{row[c.name]} / {c.points:g}</td>"
            f"<td>{'hidden' if c.hidden else 'public'}</td>"
            f"<td class='{'pass' if passed else 'fail'}'>{verdict}</td></tr>"
        )
    parts.append("</table>")
    for c in cases:
        passed, message = outcome.results.get(c.name, [False, ""])
        if passed is True or c.hidden:
            continue
        parts.append(f"<section><h3>{html.escape(c.name)} (public)</h3>")
        if c.failure_message:
            parts.append(f"<p><b>{html.escape(c.failure_message)}</b></p>")
        parts.append(f"<pre>{html.escape(message or 'not run')}</pre></section>")
    return _page(f"{assignment}: your results, {student}", "\n".join(parts))


def answer_cells(nb, question: dict) -> list:
    """A hand-graded question's cells in a submission: between its ``BEGIN QUESTION`` marker
    (the cell holding the question's heading) and the next ``END QUESTION`` marker."""
    cells, inside = [], False
    for cell in nb.cells:
        text = cell.source
        if not inside and "<!-- BEGIN QUESTION -->" in text and question["heading"] in text:
            inside = True
            continue
        if inside and "<!-- END QUESTION -->" in text:
            break
        if inside:
            cells.append(cell)
    return cells


def by_hand_html(assignment: str, student: str, nb, manual: list[dict]) -> str:
    """The sheet a grader fills for one submission: prompt, answer, model answer, rubric."""
    parts = []
    for q in manual:
        parts.append(f"<section><h2>{html.escape(q['heading'])} ({q['points']:g} points)</h2>")
        parts.append(_markdown(q["prompt"]))
        cells = answer_cells(nb, q) if nb is not None else []
        answer = "\n\n".join(c.source for c in cells).strip()
        parts.append("<h3>The student's answer</h3><div class='answer'>")
        parts.append(_markdown(answer) if answer else "<p class='fail'>(no answer found)</p>")
        parts.append("</div><h3>Model answer and rubric (instructor only)</h3>")
        parts.append(f"<div class='rubric'>{_markdown(q['rubric'])}</div>")
        parts.append(
            f"<p>Score: ______ / {q['points']:g} (type it into the CSV column "
            f"<code>{html.escape(manual_column(q))}</code>)</p></section>"
        )
    return _page(f"{assignment}: {student} (graded by hand)", "\n".join(parts))


BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def html_to_pdf(page: Path, pdf: Path) -> str | None:
    """Print ``page`` to ``pdf`` with headless Chromium; None, or why no PDF was made.

    The page is the grader's own (a student's text in it is escaped, never run); Chromium gets
    no network (``--proxy-server`` to nowhere) and no user profile of the instructor's.
    """
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        return "no Chromium on PATH (apt-get install chromium)"
    with tempfile.TemporaryDirectory(prefix="pdf-profile-") as profile:
        cmd = [browser, "--headless", "--disable-gpu", "--no-pdf-header-footer"]
        cmd += [f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--no-first-run"]
        cmd += ["--no-sandbox"] if os.geteuid() == 0 else []
        cmd += [f"--print-to-pdf={pdf}", page.resolve().as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return "Chromium did not finish in 120 s"
    if proc.returncode or not pdf.is_file():
        return f"Chromium failed: {proc.stderr.strip()[-300:]}"
    return None


_MEMORY_WORDS = ("MemoryError", "can't allocate memory", "bad_alloc", "Cannot allocate memory")


def is_memory(text: str) -> bool:
    return any(word in text for word in _MEMORY_WORDS)


def signal_name(returncode: int | None) -> str:
    """``'exit status 3'`` or ``'killed by SIGKILL'`` for a kernel's (or bwrap's) exit status."""
    if returncode is None:
        return "still running"
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number:
        with_name = signal.Signals(number).name if number in signal.valid_signals() else number
        return f"killed by {with_name}"
    return f"exit status {returncode}"


def explain(outcome, stopped: str, returncode: int | None, limits) -> None:
    """Set a grading outcome's ``status`` and ``reason`` from why its run stopped.

    ``stopped`` is ``'timeout: cell 4'``, ``'crashed: while the tests ran'``, ...; ``returncode``
    the kernel's (or its sandbox's) exit status.
    """
    kind, where = stopped.split(": ", 1)
    memory = [n for n in outcome.notes if is_memory(n)]
    if kind == "timeout":
        outcome.status = "timeout"
        outcome.reason = f"time limit of {limits.seconds:g} s reached ({where}){_KEPT}"
    elif kind == "crashed":
        outcome.status = "crashed"
        hint = f", after hitting the memory limit ({memory[-1]})" if memory else ""
        status = f", {signal_name(returncode)}" if returncode is not None else ""
        outcome.reason = f"the kernel died ({where}{status}{hint}){_KEPT}"
    else:
        outcome.status = "crashed"
        outcome.reason = f"{stopped}: 0 on every test"


_KEPT = ": the questions graded before it keep their points, the others score 0"


def write_reports(
    groups: dict, outcomes: dict, out: Path, interrupted: bool = False, pdf: bool = False
) -> None:
    """The CSV of each assignment, and each submission's feedback and hand-grading sheet.

    ``groups``: per assignment, its ``jobs``, ``cases``, ``manual`` questions and typed
    ``scores`` (``coursework.grade``); ``outcomes``: by submission path, those graded so far.
    ``interrupted``: the CSV keeps its earlier rows of the submissions not graded this time.
    ``pdf``: also print each hand-grading sheet to ``by_hand.pdf`` (``html_to_pdf``).
    """
    for name, group in groups.items():
        rows = _kept_rows(out / f"{name}.csv", outcomes) if interrupted else []
        jobs = [job for job in group["jobs"] if job.submission in outcomes]
        for job in jobs:
            outcome = outcomes[job.submission]
            scores = group["scores"].get((job.student, job.submission), {})
            row = row_of(
                job.student, job.submission, group["cases"], outcome, group["manual"], scores
            )
            rows.append(row)
            folder = Path(job.executed).parent
            folder.mkdir(parents=True, exist_ok=True)
            page = feedback_html(name, job.student, group["cases"], outcome, row)
            (folder / "feedback.html").write_text(page)
            page = student_feedback_html(name, job.student, group["cases"], outcome, row)
            (folder / "student_feedback.html").write_text(page)
            if group["manual"]:
                ran = Path(job.executed)
                nb = nbformat.read(ran, as_version=4) if ran.is_file() else None
                page = by_hand_html(name, job.student, nb, group["manual"])
                (folder / "by_hand.html").write_text(page)
                why = html_to_pdf(folder / "by_hand.html", folder / "by_hand.pdf") if pdf else None
                if why:
                    print(f"no PDF of {folder / 'by_hand.html'}: {why}")
        if rows:
            write_csv(out / f"{name}.csv", rows)
        zeros = sum(1 for job in jobs if outcomes[job.submission].status != "graded")
        print(f"wrote {out / f'{name}.csv'} ({len(rows)} submission(s), {zeros} stopped with 0)")


def _kept_rows(path: Path, outcomes: dict) -> list[dict[str, str]]:
    """An earlier CSV's rows of the submissions that ``outcomes`` does not hold."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row.get("file") not in outcomes]
