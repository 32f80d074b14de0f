"""Grade the submission of a Gradescope autograder run (its ``run_autograder`` runs this).

Inside Gradescope's container: ``/autograder/source`` holds the tests, ``cases.json`` and the
grading tools (``coursework_gradescope``); ``/autograder/submission`` the student's notebook.
The notebook is graded as ``make grade`` grades it (``coursework_grade``: its code in its own
kernel, which answers the grader's calls with plain data; the tests, expected values and
comparisons in the grader's process), and ``/autograder/results/results.json`` gets one entry
per test case: public cases show their message, hidden ones only their name and whether they
passed (``visibility: after_published``).

The sandbox: bubblewrap where the container lets it create namespaces; Gradescope's Docker
containers usually do not (no ``CAP_SYS_ADMIN``), and then the kernel runs as a user id of its
own with the same limits (``--isolation process``), after ``/autograder/source`` (the tests)
and the installed ``dmlbook`` (the code of the modules the rules forbid) are made readable by
root only. What a hostile submission can still do there is said in book/91_instructors.ipynb.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coursework_grade as grading  # noqa: E402  (the grading tools sit beside this file)
import coursework_sandbox as sandbox  # noqa: E402

AUTOGRADER = Path("/autograder")


def results_json(cases: list[dict], outcome: grading.Outcome, isolation: str) -> dict:
    """Gradescope's results: a score per case; hidden cases without their contents."""
    tests = []
    for case in cases:
        passed, message = outcome.results.get(case["name"], [False, "not run"])
        shown = message if not case["hidden"] else ("passed" if passed is True else "failed")
        if not case["hidden"] and passed is not True and case.get("failure_message"):
            shown = f"{case['failure_message']}\n\n{shown}"
        tests.append(
            {
                "name": case["name"] + (" (hidden)" if case["hidden"] else ""),
                "score": case["points"] if passed is True else 0.0,
                "max_score": case["points"],
                "visibility": "after_published" if case["hidden"] else "visible",
                "output": str(shown)[-4000:],
            }
        )
    said = f"status: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else "")
    notes = "; ".join(outcome.notes[:5])
    return {
        "score": sum(t["score"] for t in tests),
        "tests": tests,
        "output": f"{said}. Graded with isolation {isolation}." + (f" {notes}" if notes else ""),
    }


def main(root: Path = AUTOGRADER) -> int:
    source, results = root / "source", root / "results" / "results.json"
    cases = json.loads((source / "cases.json").read_text())
    tests = {p.name: p.read_text() for p in sorted((source / "tests").glob("*.py"))}
    name = json.loads((source / "otter_config.json").read_text()).get("assignment_name", "")
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb"))
    if len(notebooks) != 1:
        outcome = grading.Outcome("unreadable", f"{len(notebooks)} notebooks submitted, not 1")
        results.write_text(json.dumps(results_json(cases, outcome, "none"), indent=1))
        return 0
    os.chmod(source, 0o700)  # the tests: the grader's (root's) only
    with sandbox.UserIds(1 if os.geteuid() == 0 else 0) as ids:
        uid = ids.ids[0] if ids.ids else None
        isolation = "sandbox" if sandbox.sandbox_problem(uid) is None else "process"
    if isolation == "process" and os.geteuid() == 0:
        os.chmod(sandbox._package_dir(), 0o700)  # the kernel gets the copy with stubs
    seconds = float(os.environ.get("DMLBOOK_GRADING_SECONDS", "300"))
    limits = sandbox.Limits(seconds=seconds, threads=grading.available_cores())
    executed = Path(tempfile.mkdtemp(prefix="executed-")) / "executed.ipynb"
    job = grading.Job(str(notebooks[0]), name, "student", tests, str(executed), "", {})
    (outcome,) = grading.grade_all([job], 1, limits, isolation=isolation)
    results.write_text(json.dumps(results_json(cases, outcome, isolation), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
