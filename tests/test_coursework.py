"""The coursework (issues 15, 28): what CI must prove for every assignment under ``coursework/``.

For each assignment, built once with ``tools/coursework.py`` into a temporary folder:

* the reference solution scores full marks, graded in the sandbox students are graded in, in
  at most 60 s of CPU;
* the released student notebook, stubs untouched, scores zero, and nothing a student receives
  (the release folder and its zip) holds a line of a solution or of a hidden test;
* the released headings give the points the tests give, and the release says how to submit;
* each committed wrong submission (``coursework/<name>/mistakes/``, a typical mistake each) loses
  exactly the points of the tests that ``expected.json`` names, graded through the instructor's
  ``grade`` command into its CSV, and ``expected.json`` says whether a public check (what a
  student sees with ``grader.check``) catches it.

Also: a master whose solution fails is refused, the leak scan finds a leaked line, the masters'
headings agree with their tests, and the public tests run in a notebook kernel through
``otter.Notebook().check`` as a student would, naming the mistake they catch.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework as cw  # noqa: E402  (tools/ is not a package)

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

NAMES = cw.assignments()
BUDGET_CPU_SECONDS = 60.0
# What each hostile submission tries to write outside its sandbox (coursework/*/hostile/).
HOSTILE_MARKERS = [
    Path(f"/tmp/dmlbook-hostile-{who}")
    for who in ("hook", "compare", "peek", "source", "setprofile")
]


def test_one_assignment_per_part_of_the_book():
    assert NAMES == [
        "a1_gpw_classic",
        "a2_ms_liu",
        "a3_dro",
        "a4_gradient_surgery",
        "a5_training_evaluation",
    ]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("coursework")


@pytest.fixture(scope="module")
def wheel(out) -> Path:
    return cw.gradescope.build_wheel(out / "wheel")


@pytest.fixture(scope="module", params=NAMES)
def built(request, out, wheel) -> dict:
    """Build one assignment; grade its untouched release and its wrong submissions into CSV."""
    name = request.param
    reference, cpu = cw.build_one(name, out, wheel=wheel)
    subs = out / "submissions" / name
    (subs / "untouched").mkdir(parents=True)
    shutil.copy2(out / "release" / name / f"{name}.ipynb", subs / "untouched")
    for wrong in (cw.COURSEWORK / name / "mistakes").glob("*.ipynb"):
        shutil.copy2(wrong, subs)
    for hostile in (cw.COURSEWORK / name / "hostile").glob("*.ipynb"):
        shutil.copy2(hostile, subs)
    for marker in HOSTILE_MARKERS:
        marker.unlink(missing_ok=True)
    assert cw.grade(subs, out / "grades" / name, out / "autograder") == 0
    with open(out / "grades" / name / f"{name}.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    spec = json.loads((out / "autograder" / f"{name}.json").read_text())
    return {"name": name, "reference": reference, "cpu": cpu, "rows": rows, "spec": spec}


def test_reference_scores_full_marks_within_budget(built):
    reference = built["reference"]
    assert reference and all(r.passed for r in reference)
    assert any(r.hidden for r in reference) and any(not r.hidden for r in reference)
    assert built["cpu"] <= BUDGET_CPU_SECONDS, (
        f"{built['name']}: graded in {built['cpu']:.1f} s CPU"
    )


def test_untouched_release_scores_zero(built):
    row = built["rows"]["untouched"]
    manual = [q for q in built["spec"]["questions"] if q["manual"]]
    assert float(row["possible"]) == sum(r.points for r in built["reference"]) + sum(
        q["points"] for q in manual
    )
    tests = [r.name for r in built["reference"]]
    assert float(row["total"]) == 0 and all(float(row[t]) == 0 for t in tests)
    assert row["status"] == "graded" and row["pending"] == " ".join(q["name"] for q in manual)


def test_release_headings_give_the_tests_points_and_say_how_to_submit(built, out):
    name = built["name"]
    nb = nbformat.read(out / "release" / name / f"{name}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    points: dict[str, float] = {}
    for r in built["reference"]:
        points[r.name.split(" - ")[0]] = points.get(r.name.split(" - ")[0], 0) + r.points
    for q in built["spec"]["questions"]:
        if not q["manual"]:
            assert q["points"] == points[q["name"]], q["name"]
        assert f"## {q['heading']} {cw.masters.points_text(q)}" in text, q["name"]
    total = sum(q["points"] for q in built["spec"]["questions"])
    assert nb.cells[1].source.splitlines()[0].endswith(f"({total:g} points)") or (
        f"({total:g} points:" in nb.cells[1].source.splitlines()[0]
    )
    assert "## How to submit" in nb.cells[2].source and f"`{name}.ipynb`" in nb.cells[2].source


def test_master_headings_agree_with_their_tests():
    for name in NAMES:
        assert cw.masters.heading_problems(cw.master(name)) == [], name


def test_release_holds_no_solution_and_no_hidden_test(built, out):
    name = built["name"]
    release = out / "release"
    assert (release / f"{name}.zip").is_file()
    secrets = cw.secret_lines(cw.master(name))
    assert len(secrets) >= 10, "the scan must have something to look for"
    text = cw.released_text(release / name) + cw.released_text(release)
    assert [line for line in secrets if line in text] == []
    student = nbformat.read(release / name / f"{name}.ipynb", as_version=4)
    cases = [
        case
        for test in student.metadata["otter"]["tests"].values()
        for suite in test["suites"]
        for case in suite["cases"]
    ]
    assert cases and not any(case["hidden"] for case in cases), "public tests only"


def test_wrong_submission_loses_exactly_the_targeted_tests(built):
    name = built["name"]
    expected = json.loads((cw.COURSEWORK / name / "mistakes" / "expected.json").read_text())
    points = {r.name: r.points for r in built["reference"]}
    public = {r.name for r in built["reference"] if not r.hidden}
    assert expected
    for file, spec in expected.items():
        row = built["rows"][Path(file).stem]
        lost = {t for t in points if float(row[t]) == 0}
        assert lost == set(spec["fails"]), f"{file} ({spec['mistake']})"
        assert bool(lost & public) == spec["public"], f"{file}: does a public check catch it?"
        assert float(row["autograded"]) == sum(points.values()) - sum(points[t] for t in lost)


def test_hostile_submission_scores_only_its_honest_part(built):
    """Issue 43: each hostile submission (``coursework/<name>/hostile/``) loses exactly the
    tests its honest part fails, whatever it does in its kernel, and writes nothing outside.

    ``expected.json`` says, per file, the attack, the tests its honest part fails (graded as if
    the attack were not there), and what the grader before issue 43 gave it (measured once).
    """
    folder = cw.COURSEWORK / built["name"] / "hostile"
    if not folder.is_dir():
        pytest.skip(f"{built['name']} has no hostile submissions")
    expected = json.loads((folder / "expected.json").read_text())
    points = {r.name: r.points for r in built["reference"]}
    assert sorted(expected) == sorted(p.name for p in folder.glob("*.ipynb"))
    for file, spec in expected.items():
        row = built["rows"][Path(file).stem]
        lost = {t for t in points if float(row[t]) == 0}
        assert lost == set(spec["fails"]), f"{file} ({spec['attack']}): {row['reason']}"
        assert float(row["autograded"]) == sum(points.values()) - sum(points[t] for t in lost)
        if "honest_twin" in spec:  # the same answers without the attack, graded alongside
            twin = built["rows"][Path(spec["honest_twin"]).stem]
            assert row["autograded"] == twin["autograded"], file
    assert [m for m in HOSTILE_MARKERS if m.exists()] == [], "a submission wrote outside"


def test_release_is_schema_valid(built, out):
    name = built["name"]
    nb = nbformat.read(out / "release" / name / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)  # raises on a cell id under nbformat 4.4 (otter's release)
    assert nb.nbformat_minor >= 5 and all(c.get("id") for c in nb.cells)


def test_build_refuses_a_failing_solution(tmp_path):
    name = "a1_gpw_classic"
    root = tmp_path / "coursework"
    shutil.copytree(cw.COURSEWORK / name, root / name)
    nb_path = cw.master(name, root)
    nb = nbformat.read(nb_path, as_version=4)
    right = "return per_anchor[has_pair].mean()"
    broken = [c for c in nb.cells if right in c.source]
    assert len(broken) == 1
    broken[0].source = broken[0].source.replace(right, "return per_anchor.sum()")
    nbformat.write(nb, nb_path)
    with pytest.raises(RuntimeError, match="refused|fails"):
        cw.build_one(name, tmp_path / "out", root)
    assert not (tmp_path / "out" / "release" / name).exists()
    assert not (tmp_path / "out" / "autograder" / f"{name}.zip").exists()


def test_leak_scan_finds_a_solution_left_in_a_release(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_raw_cell("# BEGIN SOLUTION"),
        nbformat.v4.new_code_cell("def f(x):\n    # BEGIN SOLUTION\n    return x * x + 1\n"),
        nbformat.v4.new_raw_cell("# END SOLUTION"),
        nbformat.v4.new_raw_cell("# BEGIN TESTS"),
        nbformat.v4.new_code_cell(
            '""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\n'
            "assert f(12345) == 152399026"
        ),
        nbformat.v4.new_raw_cell("# END TESTS"),
    ]
    nbformat.write(nb, tmp_path / "a.ipynb")
    release = tmp_path / "release"
    release.mkdir()
    student = nbformat.v4.new_notebook()
    student.cells = [nbformat.v4.new_code_cell("def f(x):\n    ...")]
    nbformat.write(student, release / "a.ipynb")
    assert cw.leaks(tmp_path / "a.ipynb", release) == []
    student.cells[0].source = "def f(x):\n    return x * x + 1"
    nbformat.write(student, release / "a.ipynb")
    assert cw.leaks(tmp_path / "a.ipynb", release) == ["return x * x + 1"]
    with open(release / "notes.txt", "w") as f:
        f.write("assert f(12345) == 152399026\n")
    assert "assert f(12345) == 152399026" in cw.leaks(tmp_path / "a.ipynb", release)


def test_public_tests_run_in_a_kernel_with_otter_notebook_check(tmp_path, monkeypatch):
    """A student's filled-in notebook, run top to bottom: ``grader.check`` names the mistake.

    The committed mistake of a1 (a sum where Eq. 9 averages) fails Q1's public check with its
    message; Q2 and Q3 pass.
    """
    name = "a1_gpw_classic"
    shutil.copy2(
        cw.COURSEWORK / name / "mistakes" / "sum_over_positives.ipynb", tmp_path / f"{name}.ipynb"
    )
    nb = nbformat.read(tmp_path / f"{name}.ipynb", as_version=4)
    for key, value in cw.grader_env().items():
        monkeypatch.setenv(key, value)
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    checks = [c for c in nb.cells if c.cell_type == "code" and "grader.check(" in c.source]
    assert len(checks) == 3
    shown = [json.dumps(cell.outputs) for cell in checks]
    assert "failed" in shown[0].lower() and "an average over the anchor" in shown[0], shown[0][:800]
    for text in shown[1:]:
        assert "passed" in text and "failed" not in text.lower(), text[:500]
