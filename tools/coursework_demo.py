"""A demo class for ``make grade``: 10 honest and 5 hostile submissions to a5, graded and checked.

Usage (after ``make coursework``)::

    python tools/coursework_demo.py [--out build/coursework/demo] [--timeout 60] [--memory 2G]

It writes ``<out>/submissions/``: six correct submissions (one of them a loop-based Recall@K),
the three committed wrong ones (``coursework/a5_training_evaluation/mistakes/``), the untouched
release, and five hostile ones whose Q1 answer kills its kernel (``os._exit``), loops forever,
allocates without bound, reads the hidden tests, the autograder, the solutions and the other
submissions, or writes beside the autograder and over another student's notebook. It grades the
folder exactly as ``make grade`` does, then checks the CSV: every honest submission has the
score its answers earn (``expected.json`` for the wrong ones) and every hostile one 0 with a
reason; and that nothing outside the sandboxes changed. ``grade`` prints the wall-clock time and
the CPU time (drivers and kernels). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coursework_sandbox as sandbox  # noqa: E402  (tools/ is not a package)

import coursework as cw  # noqa: E402

NAME = "a5_training_evaluation"
LOOP_RECALL = '''def recall_at_k(embeddings, labels, ks=(1, 2, 4, 8)):
    """Recall@K, one query at a time."""
    x = torch.nn.functional.normalize(torch.as_tensor(embeddings, dtype=torch.float64), dim=1)
    y = torch.as_tensor(labels).tolist()
    S = (x @ x.T).tolist()
    hits = {k: [] for k in ks}
    for i in range(len(y)):
        pos = [S[i][j] for j in range(len(y)) if j != i and y[j] == y[i]]
        if not pos:
            continue
        above = sum(1 for j in range(len(y)) if y[j] != y[i] and S[i][j] > max(pos))
        for k in ks:
            hits[k].append(above < k)
    return {k: sum(h) / len(h) for k, h in hits.items()}
'''


def hostile(grades: Path, autograder: Path, subs: Path) -> dict[str, str]:
    """Q1 answers of the five hostile submissions."""
    return {
        "hostile_crash": "import os\nos._exit(1)",
        "hostile_loop": "while True:\n    pass",
        "hostile_memory": "hog = []\nwhile True:\n    hog.append(bytearray(2**28))",
        "hostile_reader": (
            "import glob\nfound = {}\n"
            f"for path in [{str(autograder)!r}, {str(cw.master(NAME))!r}, "
            f"*glob.glob({str(subs)!r} + '/*.ipynb')]:\n"
            "    found[path] = open(path, 'rb').read()\n"
            "exec(found['tests/q1.py'])  # with the hidden tests, answer them"
        ),
        "hostile_writer": (
            f"open({str(autograder.with_name('pwned.txt'))!r}, 'w').write('x')\n"
            f"open({str(subs / 'student01.ipynb')!r}, 'w').write('{{}}')\n"
            f"open({str(grades / (NAME + '.csv'))!r}, 'w').write('student,total')"
        ),
    }


def write_class(out: Path, build: Path) -> dict[str, float]:
    """Write the 15 submissions; returns each one's expected autograded score."""
    subs = out / "submissions"
    shutil.rmtree(subs, ignore_errors=True)
    subs.mkdir(parents=True)
    release = nbformat.read(build / "release" / NAME / f"{NAME}.ipynb", as_version=4)
    reference = json.loads((build / "reference" / f"{NAME}.json").read_text())["tests"]
    full = sum(t["points"] for t in reference)
    points = {t["name"]: t["points"] for t in reference}
    solutions = [
        c.source
        for c in nbformat.read(build / "reference" / f"{NAME}.ipynb", as_version=4).cells
        if c.cell_type == "code" and "otter_assign_solution_cell" in c.metadata.get("tags", [])
    ]
    solutions = [
        "\n".join(
            line.removesuffix("  # SOLUTION")
            for line in s.splitlines()
            if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line
        )
        for s in solutions
    ]
    expected: dict[str, float] = {}

    def submit(who: str, answers: list[str]) -> None:
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        slots = [
            c
            for c in nb.cells
            if c.cell_type == "code" and "otter_answer_cell" in c.metadata.get("tags", [])
        ]
        for cell, text in zip(slots, answers, strict=False):
            cell.source = text
        nbformat.write(nb, subs / f"{who}.ipynb")

    for i in range(1, 7):
        submit(f"student{i:02d}", [LOOP_RECALL if i == 6 else solutions[0], *solutions[1:]])
        expected[f"student{i:02d}"] = full
    mistakes = cw.COURSEWORK / NAME / "mistakes"
    for file, spec in json.loads((mistakes / "expected.json").read_text()).items():
        shutil.copy2(mistakes / file, subs / file)
        expected[Path(file).stem] = full - sum(points[t] for t in spec["fails"])
    nbformat.write(release, subs / "untouched.ipynb")
    expected["untouched"] = 0
    autograder = build / "autograder" / f"{NAME}.zip"
    for who, code in hostile(out / "grades", autograder, subs).items():
        submit(who, [code])
        expected[who] = 0
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=cw.BUILD / "demo")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--memory", default="2G")
    args = parser.parse_args(argv)
    build = cw.BUILD
    if not (build / "reference" / f"{NAME}.ipynb").is_file():
        sys.exit("run `make coursework` first")
    expected = write_class(args.out, build)
    zip_path = build / "autograder" / f"{NAME}.zip"
    before = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (args.out / "submissions").glob("*")
    }
    before[zip_path] = hashlib.sha256(zip_path.read_bytes()).hexdigest()
    shutil.rmtree(args.out / "grades", ignore_errors=True)
    limits = sandbox.Limits(seconds=args.timeout, memory=sandbox.parse_size(args.memory))
    start = time.perf_counter()
    cw.grade(args.out / "submissions", args.out / "grades", build / "autograder", limits)
    wall = time.perf_counter() - start
    with open(args.out / "grades" / f"{NAME}.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    failures = []
    for who, want in sorted(expected.items()):
        row = rows[who]
        ok = float(row["autograded"]) == want and (not who.startswith("hostile") or row["reason"])
        failures += [] if ok else [who]
        print(
            f"{'ok ' if ok else 'BAD'} {who:27s} {row['autograded']:>2s} (expected {want:g}) "
            f"{row['status']:8s} {row['reason'][:80]}"
        )
    changed = [str(p) for p, h in before.items() if hashlib.sha256(p.read_bytes()).hexdigest() != h]
    stray = [str(p) for p in (zip_path.with_name("pwned.txt"),) if p.exists()]
    print(
        f"{len(rows)} submissions graded in {wall:.0f} s; "
        f"changed outside the sandboxes: {changed + stray or 'nothing'}"
    )
    return 1 if failures or changed or stray else 0


if __name__ == "__main__":
    sys.exit(main())
