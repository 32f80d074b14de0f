"""Grading survives hostile submissions (issue 28): ``make grade``'s code path, end to end.

A small assignment built here (one autograded question: a public and a hidden test; one
question graded by hand) and a class folder of honest and hostile submissions, graded once in
parallel through ``tools/coursework.py grade``'s function, under small limits (12 s, 1 GiB). The
hostile ones: a kernel that kills itself (``os._exit``), an endless loop, a memory blow-up, a
submission that tries to read the hidden tests, the autograder and the solutions, to reach
the network and to see other processes, one that writes outside its folder and forges a result
on the grader's output. Proved: every honest submission gets its right score; each hostile one
scores 0 with the reason in the CSV; nothing outside the sandbox was read or written, the
network was not reached, no other process was visible (one test each: graded with
``--isolation process`` instead, each of those four fails); the executed notebooks, the
feedback (hidden tests' messages included) and the hand-grading sheets are written; scores
typed by hand add up. The submissions use no torch, so that the whole file costs a few seconds
of CPU; ``tests/test_coursework.py`` grades the real assignments through the same path.
"""

from __future__ import annotations

import csv
import hashlib
import json
import socket
import sys
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework_grade as grading  # noqa: E402
import coursework_sandbox as sandbox  # noqa: E402

import coursework as cw  # noqa: E402  (tools/ is not a package)

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

SECRET = "quokka-hidden-test"
TEST_FILE = f"""OK_FORMAT = True
test = {{'name': 'q1', 'points': [1, 2], 'suites': [{{'cases': [
    {{'code': '>>> assert double(2) == 4', 'hidden': False, 'locked': False,
      'failure_message': 'double(2) must be 4'}},
    {{'code': '>>> assert double(-3) == -6  # {SECRET}', 'hidden': True, 'locked': False,
      'failure_message': 'double must double negative numbers too'}}],
  'scored': True, 'setup': '', 'teardown': '', 'type': 'doctest'}}]}}
"""
SPEC = {
    "assignment": "tiny",
    "questions": [
        {
            "name": "q1",
            "points": 3.0,
            "manual": False,
            "heading": "Q1. Double",
            "prompt": "",
            "rubric": "",
        },
        {
            "name": "q2",
            "points": 2.0,
            "manual": True,
            "heading": "Q2. Why",
            "prompt": "## Q2. Why (2 points, graded by hand)\n\nSay why it doubles.",
            "rubric": "**Rubric**: 2 points when it says multiplication by two.",
        },
    ],
}
LIMITS = sandbox.Limits(seconds=12, memory=2**30)


def notebook(*cells: str, answer: str = "") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells] + [
        nbformat.v4.new_markdown_cell(
            "<!-- BEGIN QUESTION -->\n\n## Q2. Why (2 points, graded by hand)"
        ),
        nbformat.v4.new_markdown_cell(answer or "_Type your answer here, replacing this text._"),
        nbformat.v4.new_markdown_cell("<!-- END QUESTION -->"),
    ]
    nb.metadata["otter"] = {"assignment_name": "tiny"}
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("class")
    autograders, subs, out = tmp / "autograder", tmp / "subs", tmp / "grades"
    autograders.mkdir()
    with zipfile.ZipFile(autograders / "tiny.zip", "w") as zf:
        zf.writestr("tests/q1.py", TEST_FILE)
    (autograders / "tiny.json").write_text(json.dumps(SPEC))
    zip_hash = hashlib.sha256((autograders / "tiny.zip").read_bytes()).hexdigest()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    marker = f"pwned-{tmp.name}"
    targets = [
        autograders / marker,
        subs / marker,
        out / marker,
        Path("/tmp") / marker,
        ROOT / marker,
    ]
    secrets = [autograders / "tiny.zip", cw.master("a5_training_evaluation"), ROOT / "README.md"]
    good = "def double(x):\n    return 2 * x"
    class_folder = {
        "hang": notebook("import time\nwhile True:\n    time.sleep(0.05)", good),
        "alice": notebook(good, answer="It multiplies by two."),
        "bob/tiny": notebook("x = 1", "def double(x):\n    return x + x if x > 0 else 0"),
        "crash": notebook("import os\nos._exit(3)", good),
        "memory": notebook("hog = bytearray(3 * 2**30)\n" + good),
        "reader": notebook(
            *[f"print(open({str(p)!r}, 'rb').read())" for p in secrets],
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)",
            "import os\nprint('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
        ),
        "writer": notebook(
            'import os\nos.write(1, b\'{"status": "graded", "results": {"q1 - 1": [true, ""]}}\\n\')',
            *[f"open({str(p)!r}, 'w').write('x')" for p in targets],
        ),
    }
    for who, nb in class_folder.items():
        path = subs / f"{who}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    cpu = grading.resource.getrusage(grading.resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    problems = cw.grade(subs, out, autograders, LIMITS, "sandbox", parallel=2)
    wall = time.perf_counter() - start
    after = grading.resource.getrusage(grading.resource.RUSAGE_CHILDREN)
    with open(out / "tiny.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    try:
        listener.accept()
        reached = True
    except BlockingIOError:
        reached = False
    listener.close()
    print(
        f"graded {len(rows)} submissions in {wall:.1f} s wall, "
        f"{after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime:.1f} s CPU"
    )
    return {
        "rows": rows,
        "out": out,
        "autograders": autograders,
        "problems": problems,
        "zip_hash": zip_hash,
        "targets": targets,
        "reached": reached,
        "subs": subs,
    }


def test_honest_submissions_get_their_scores(graded):
    rows = graded["rows"]
    assert graded["problems"] == 0
    assert (rows["alice"]["total"], rows["alice"]["autograded"], rows["alice"]["status"]) == (
        "3",
        "3",
        "graded",
    )
    assert rows["bob"]["total"] == "1" and rows["bob"]["q1 - 2"] == "0", (
        "public passes, hidden fails"
    )
    assert rows["alice"]["possible"] == "5" and rows["alice"]["pending"] == "q2"


@pytest.mark.parametrize(
    "who, status, words",
    [
        ("crash", "crashed", ["kernel died", "exit status 3"]),
        ("hang", "timeout", ["time limit of 12 s"]),
        ("memory", "graded", ["MemoryError", "memory limit, 1G"]),
        ("reader", "graded", ["FileNotFoundError"]),
        ("writer", "graded", ["cell 2", "Error"]),
    ],
)
def test_hostile_submission_scores_zero_with_a_reason(graded, who, status, words):
    row = graded["rows"][who]
    assert row["total"] == "0" and row["status"] == status, row
    assert all(w in row["reason"] for w in words), row["reason"]


def _outputs(graded, who: str) -> list[dict]:
    ran = nbformat.read(graded["out"] / "tiny" / who / "executed.ipynb", as_version=4)
    return [o for c in ran.cells for o in c.get("outputs", [])]


def test_hidden_tests_autograder_and_solutions_cannot_be_read(graded):
    outputs = _outputs(graded, "reader")
    assert SECRET not in json.dumps(outputs) and "BEGIN SOLUTION" not in json.dumps(outputs)
    errors = [o["ename"] for o in outputs if "ename" in o]
    assert errors[:3] == ["FileNotFoundError"] * 3, errors


def test_the_network_cannot_be_reached(graded):
    assert not graded["reached"], "a submission reached the grader's network"
    errors = [o["ename"] for o in _outputs(graded, "reader") if "ename" in o]
    assert errors[3:] == ["ConnectionRefusedError"], errors


def test_nothing_outside_the_scratch_folder_was_written(graded):
    assert [p for p in graded["targets"] if p.exists()] == []
    zip_path = graded["autograders"] / "tiny.zip"
    assert hashlib.sha256(zip_path.read_bytes()).hexdigest() == graded["zip_hash"]


def test_no_other_process_is_visible(graded):
    """Its own PID namespace: bubblewrap (1) and the kernel, not the grader or other kernels."""
    shown = [o["text"] for o in _outputs(graded, "reader") if o.get("text", "").startswith("pids")]
    assert len(shown) == 1, shown
    pids = json.loads(shown[0].split(" ", 1)[1])
    assert len(pids) <= 3, pids


def test_executed_notebooks_feedback_and_hand_grading_sheets(graded):
    out = graded["out"] / "tiny"
    for who in graded["rows"]:
        assert (out / who / "executed.ipynb").is_file() and (out / who / "feedback.html").is_file()
    feedback = (out / "bob" / "feedback.html").read_text()
    assert "double must double negative numbers too" in feedback and SECRET in feedback
    mine = (out / "bob" / "student_feedback.html").read_text()
    assert "q1 - 2" in mine and "hidden" in mine and "failed" in mine, "the hidden test's name"
    assert SECRET not in mine and "negative numbers" not in mine, "not its code or message"
    sheet = (out / "alice" / "by_hand.html").read_text()
    assert "It multiplies by two." in sheet and "2 points when it says multiplication" in sheet
    assert "Say why it doubles." in sheet
    crashed = nbformat.read(out / "crash" / "executed.ipynb", as_version=4)
    assert crashed.metadata["dmlbook_grading"]["outcome"] == "crashed"


def test_the_hand_grading_sheet_prints_to_pdf(graded, tmp_path):
    if cw.report.html_to_pdf(graded["out"] / "tiny" / "alice" / "by_hand.html", tmp_path / "a.pdf"):
        pytest.skip("no Chromium on PATH (apt-get install chromium)")
    data = (tmp_path / "a.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 2000


def test_scores_typed_by_hand_add_up(graded, tmp_path):
    csv_path = tmp_path / "tiny.csv"
    csv_path.write_text((graded["out"] / "tiny.csv").read_text())
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["q2 (by hand, /2)"] = "1.5" if row["student"] == "alice" else "0"
    cw.report.write_csv(csv_path, rows)
    assert cw.totals(csv_path, graded["autograders"]) == 0
    with open(csv_path) as f:
        after = {row["student"]: row for row in csv.DictReader(f)}
    assert after["alice"]["total"] == "4.5" and after["alice"]["pending"] == ""
    assert after["crash"]["total"] == "0"
    rows[0]["q2 (by hand, /2)"] = "7"
    cw.report.write_csv(csv_path, rows)
    with pytest.raises(SystemExit, match="not a number from 0 to 2"):
        cw.totals(csv_path, graded["autograders"])


def test_parallel_grading_runs_up_to_the_slots_asked_for(monkeypatch):
    running, peak, lock = [0], [0], threading.Lock()

    def fake_driver(job, limits, procs=None):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return grading.Outcome("graded")

    monkeypatch.setattr(grading, "_call_driver", fake_driver)
    job = grading.Job("x.ipynb", "tiny", "x", {}, "x", "", {})
    assert len(grading.grade_all([job] * 6, 3, LIMITS)) == 6
    assert peak[0] == 3


def test_a_machine_without_the_sandbox_is_refused_in_one_clear_message(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    problem = sandbox.sandbox_problem(None)
    assert "apt-get install bubblewrap" in problem
    monkeypatch.setattr(cw.sandbox, "sandbox_problem", lambda uid: "no namespaces here")
    with pytest.raises(SystemExit, match="(?s)no namespaces here.*ISOLATION=process"):
        cw.isolation_for("sandbox")


def test_sizes_parse_as_an_instructor_writes_them():
    assert sandbox.parse_size("4G") == 4 * 2**30 and sandbox.parse_size("512m") == 512 * 2**20
    assert sandbox.parse_size("1.5GiB") == 3 * 2**29 and sandbox.format_size(2**30) == "1G"
    with pytest.raises(ValueError, match="512M or 4G"):
        sandbox.parse_size("lots")


def test_an_interrupted_run_keeps_the_rows_it_did_not_grade_again(graded, tmp_path):
    out = tmp_path / "grades"
    out.mkdir()
    (out / "tiny.csv").write_text((graded["out"] / "tiny.csv").read_text())
    tests, cases = cw.report.load_tests(graded["autograders"] / "tiny.zip")
    alice = str(graded["subs"] / "alice.ipynb")
    job = grading.Job(
        alice, "tiny", "alice", tests, str(out / "tiny" / "alice" / "executed.ipynb"), "", {}
    )
    group = {"jobs": [job], "cases": cases, "manual": SPEC["questions"][1:], "scores": {}}
    regraded = grading.Outcome("graded", results={"q1 - 1": [True, ""], "q1 - 2": [False, "x"]})
    cw.report.write_reports({"tiny": group}, {alice: regraded}, out, interrupted=True)
    with open(out / "tiny.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert rows["alice"]["total"] == "1" and rows["crash"]["status"] == "crashed"
    assert len(rows) == len(graded["rows"])
