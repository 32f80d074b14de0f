"""Read an assignment's master notebook: its questions and points, its secrets; finish a release.

A master notebook is in otter-grader's format (raw cells ``# BEGIN QUESTION`` with a YAML
configuration, ``# BEGIN SOLUTION`` / ``# END SOLUTION``, ``# BEGIN TESTS`` / ``# END TESTS``).

* ``questions``: each question's name, points (the sum of its tests' points, or the points of a
  hand-graded one), heading, prompt and, for a hand-graded question, the model answer and
  rubric (the markdown of its solution block);
* ``finish_release``: writes the points computed from the tests into the released notebook's
  headings (``## Q1. Recall@K (4 points)``, the title with the total) and adds the submission
  instructions after the title;
* ``secret_lines`` / ``leaks``: the lines of the solutions and hidden tests, and where they
  occur in what students receive.

Tested by ``tests/test_coursework.py``.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import nbformat
import yaml

_POINTS = re.compile(r"\s*\((\d+(?:\.\d+)?) points?(, graded by hand)?\)\s*$")

SUBMIT = """\
## How to submit

1. Answer every question in this notebook, in the cells that hold `...` (and, for a question
   graded by hand, in the text cell below it). Leave the other cells as they are.
2. Restart the kernel and run every cell (*Kernel > Restart Kernel and Run All Cells*): the
   notebook must run from top to bottom without an error. `grader.check("q1")` and the other
   checks run the **public** tests: they catch common mistakes, but passing them is not full
   marks. **Hidden** tests grade your submission{by_hand}.
3. Save, and hand in this one file, `{file}`, under this name (where your course says: an
   upload page, Gradescope, or a shared folder). Only this notebook is graded; files you create
   beside it are not.

When it is graded, your notebook runs again from the top, without network access and within a
time and memory limit that your instructor sets: code that relies on files of your own, on the
internet, or on earlier runs of the kernel loses the points that depend on it. Each question is
graded right after its `grader.check` cell has run, so later cells cannot change it:

* a cell that raises an error: the next cells still run; the questions that need what it
  should have defined lose their points;
* a crash (the kernel dies, for instance `os._exit` or a blown memory limit) or running out of
  time: the questions graded before it keep their points, that question and the later ones
  score 0;
* the memory limit: an allocation over it fails in its cell (a `MemoryError`), as above.

The modules the rules forbid do not exist where your notebook is graded: calling them raises
an error there, even when it works on your computer.
"""


def _config(cell) -> dict:
    return yaml.safe_load(cell.source.split("\n", 1)[1]) or {}


def _marker(cell) -> str:
    return cell.source.strip() if cell.cell_type == "raw" else ""


def questions(master_nb: Path) -> list[dict]:
    """Every question of a master notebook, in order (see the module docstring for the keys)."""
    nb = nbformat.read(master_nb, as_version=4)
    out: list[dict] = []
    current, in_solution = None, False
    for cell in nb.cells:
        marker = _marker(cell)
        if marker.startswith("# BEGIN QUESTION"):
            config = _config(cell)
            points = config.get("points", 0)
            total = sum(points) if isinstance(points, list) else points
            current = {"name": config["name"], "points": float(total), "manual": False}
            current |= {"manual": bool(config.get("manual")), "prompt": "", "rubric": ""}
            current["heading"] = ""
            out.append(current)
        elif marker == "# END QUESTION":
            current = None
        elif marker in ("# BEGIN SOLUTION", "# END SOLUTION"):
            in_solution = marker == "# BEGIN SOLUTION"
        elif current is not None and cell.cell_type == "markdown":
            key = "rubric" if in_solution else "prompt"
            current[key] = (current[key] + "\n\n" + cell.source).strip()
            if not current["heading"] and not in_solution:
                current["heading"] = heading_of(cell.source)
    return out


def heading_of(markdown: str) -> str:
    """``'Q1. Recall@K'`` from a cell whose first ``## `` line is ``## Q1. Recall@K (4 points)``."""
    for line in markdown.splitlines():
        if line.startswith("## "):
            return _POINTS.sub("", line[3:]).strip()
    return ""


def points_text(question: dict) -> str:
    n = question["points"]
    words = f"{n:g} point{'s' if n != 1 else ''}"
    return f"({words}, graded by hand)" if question["manual"] else f"({words})"


def heading_problems(master_nb: Path) -> list[str]:
    """Questions whose heading in the master gives other points than the tests give."""
    nb = nbformat.read(master_nb, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    problems = []
    for q in questions(master_nb):
        if f"## {q['heading']} {points_text(q)}" not in text:
            problems.append(f"{q['name']}: the heading must say {points_text(q)}")
    return problems


def finish_release(student_nb: Path, master_nb: Path) -> None:
    """Write the computed points into the headings of ``student_nb``, add how to submit."""
    qs = questions(master_nb)
    by_heading = {q["heading"]: q for q in qs}
    nb = nbformat.read(student_nb, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("## ") and heading_of(line) in by_heading:
                lines[i] = f"## {heading_of(line)} {points_text(by_heading[heading_of(line)])}"
        cell.source = "\n".join(lines)
    title = next(
        i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("# ")
    )
    auto = sum(q["points"] for q in qs if not q["manual"])
    by_hand = sum(q["points"] for q in qs if q["manual"])
    first, _, rest = nb.cells[title].source.partition("\n")
    total = f"{auto + by_hand:g} points" + (
        f": {auto:g} autograded, {by_hand:g} graded by hand" if by_hand else ""
    )
    nb.cells[title].source = f"{_POINTS.sub('', first)} ({total})\n{rest}"
    manual = [q["name"].upper() for q in qs if q["manual"]]
    text = SUBMIT.format(
        file=student_nb.name, by_hand=f"; {', '.join(manual)} is read by a person" if manual else ""
    )
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata.update({"deletable": False, "editable": False})
    nb.cells.insert(title + 1, cell)
    schema_valid(nb)
    nbformat.write(nb, student_nb)


def schema_valid(nb) -> None:
    """Make ``nb`` valid under its schema: cell ids need nbformat 4.5 (otter writes 4.4).

    Every cell gets an id (``cell-<n>``) unless it has one; ``nbformat.validate`` then passes.
    """
    nb.nbformat, nb.nbformat_minor = 4, max(5, nb.get("nbformat_minor", 0))
    taken = {c.get("id") for c in nb.cells}
    for index, cell in enumerate(nb.cells):
        if not cell.get("id"):
            new = f"cell-{index}"
            while new in taken:
                new += "x"
            cell["id"] = new
            taken.add(new)


def released_text(folder: Path) -> str:
    """Every text a student receives under ``folder``: files, and the members of any zip."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix in (".zip", ".whl"):
            with zipfile.ZipFile(path) as zf:
                parts += [zf.read(n).decode("utf-8", "replace") for n in zf.namelist()]
        else:
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def lines_of(source: str) -> set[str]:
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


def _classify(master_nb: Path) -> tuple[set[str], set[str], set[str]]:
    """The master's lines: (solutions, hidden tests, public: what its release shows)."""
    nb = nbformat.read(master_nb, as_version=4)
    secrets, hidden, public = set(), set(), set()
    in_solution = in_tests = False
    for cell in nb.cells:
        text = cell.source.strip()
        if cell.cell_type == "raw":
            in_solution = {"# BEGIN SOLUTION": True, "# END SOLUTION": False}.get(text, in_solution)
            in_tests = {"# BEGIN TESTS": True, "# END TESTS": False}.get(text, in_tests)
        elif cell.cell_type == "markdown":
            (secrets if in_solution else public).update(lines_of(cell.source))
        elif cell.cell_type == "code":
            marked = _solution_comment_lines(cell.source)
            secrets |= lines_of("\n".join(marked))
            if in_tests:
                body = lines_of(cell.source.split("# END TEST CONFIG", 1)[-1])
                (hidden if "hidden: true" in cell.source else public).update(body)
            elif not in_solution:
                public |= lines_of(cell.source) - lines_of("\n".join(marked))
    return secrets, hidden, public


def secret_lines(master_nb: Path) -> set[str]:
    """Lines of the master's solutions and hidden tests, which no released file may hold.

    A solution line is a line that otter replaces in the student notebook: between
    ``# BEGIN SOLUTION`` and ``# END SOLUTION`` comments, or ending in ``# SOLUTION``, in any code
    cell (wherever the cell is: otter strips the markers only inside a solution block, so a
    marked line elsewhere ships unless this scan catches it), and every line of a written
    (markdown) answer or rubric in a solution block. A hidden-test line is a line of a test cell
    whose configuration says ``hidden: true`` and that no public test has (public tests ship
    with the student notebook, so their lines may appear).
    """
    secrets, hidden, public = _classify(master_nb)
    return secrets | (hidden - public)


def public_lines(master_nb: Path) -> set[str]:
    """Lines the master's release shows anyway: prompts, provided code, public tests."""
    return _classify(master_nb)[2]


def occurs(line: str, text: str) -> bool:
    """Whether ``line`` is in ``text`` as written, not as the tail of a longer name (``_x = 1``
    does not hold ``x = 1``); a notebook's JSON strings are searched as they are."""
    if line not in text:  # the fast test first: most secret lines are nowhere
        return False
    return re.search(r"(?<![\w.])" + re.escape(line), text) is not None


def leaks(master_nb: Path, release: Path) -> list[str]:
    """Solution or hidden-test lines found in anything under ``release`` (empty: no leak)."""
    text = released_text(release)
    return sorted(line for line in secret_lines(master_nb) if occurs(line, text))
