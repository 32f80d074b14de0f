"""Every chapter ends with its exercises, and every exercise has an answer (issue 15).

Checked on every notebook ``book/NN_*.ipynb`` with ``NN < 90`` or ``NN == 90`` (chapters added
later are checked too): the last ``## `` section is the exercises, ``## NN.x Exercises`` in a
chapter (``## Exercises`` in the appendix); under it, each exercise is a markdown cell
``**Exercise NN.k** (kind, stars).`` with ``k = 1, 2, ...``, of one of the five kinds and one to
three stars, immediately followed by its answer: a markdown cell tagged ``answer`` holding a MyST
dropdown admonition ``Answer NN.k``. Answer cells appear nowhere else, and there are 3-6
exercises, at least one of them open-ended (issue 41).

Issue 41 adds what a student needs to do the exercises without the answers:

- every answer's fences nest (a code fence inside the admonition is closed inside it, so the
  dropdown renders whole in the instructor edition);
- every exercise is self-contained in the student edition (the chapter with its answer cells
  removed as ``tools/book.py`` removes them): a name it uses in code is defined there, not only
  in an answer, and the data an answer's code types in (``torch.tensor([...])``) is printed in
  the exercise's statement, in a statement it cites, or in the chapter's code;
- an exercise offers ``check("NN.k", ...)`` exactly when :mod:`dmlbook.exercises` has a
  self-check for it.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt

BOOK = Path(__file__).resolve().parent.parent / "book"
KINDS = {"derive", "implement", "predict-then-run", "read-a-table", "open-ended"}
STAR = "\u2605"


def chapters() -> list[Path]:
    out = []
    for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        number = int(path.name[:2])
        if number < 90 or number == 90:
            out.append(path)
    return out


def number_of(path: Path) -> str:
    return str(int(path.name[:2]))


def is_answer(cell) -> bool:
    return "answer" in cell.metadata.get("tags", [])


def exercise_cells(path: Path) -> tuple[str, list]:
    """The heading of the last section and the cells after it."""
    nb = nbformat.read(path, as_version=4)
    headings = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown" and re.match(r"^## ", c.source)
    ]
    assert headings, f"{path.name}: no section"
    last = headings[-1]
    return nb.cells[last].source.splitlines()[0], nb.cells[last + 1 :], nb.cells[:last]


def test_every_chapter_is_checked():
    names = [p.stem for p in chapters()]
    assert "01_what_is_dml" in names and "90_papers_numbers" in names
    assert all(int(n[:2]) <= 90 for n in names)


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.stem)
def test_chapter_ends_with_answered_exercises(path):
    nn = number_of(path)
    heading, cells, before = exercise_cells(path)
    if int(nn) >= 90:
        assert heading == "## Exercises", f"{path.name}: the last section is {heading!r}"
    else:
        assert re.fullmatch(rf"## {nn}\.\d+ Exercises", heading), (
            f"{path.name}: the last section is {heading!r}, expected '## {nn}.x Exercises'"
        )
    assert not any(is_answer(c) for c in before), f"{path.name}: an answer cell outside Exercises"
    exercises = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "markdown" and c.source.startswith("**Exercise ")
    ]
    assert 3 <= len(exercises) <= 6, f"{path.name}: {len(exercises)} exercises"
    for k, i in enumerate(exercises, 1):
        m = re.match(
            rf"\*\*Exercise {nn}\.{k}\*\* \(([a-z-]+), ({STAR}{{1,3}})\)\. \S", cells[i].source
        )
        assert m and m.group(1) in KINDS, (
            f"{path.name}: exercise {k} opens {cells[i].source[:40]!r}"
        )
        assert i + 1 < len(cells), f"{path.name}: exercise {nn}.{k} has no answer"
        answer = cells[i + 1]
        assert answer.cell_type == "markdown" and is_answer(answer), (
            f"{path.name}: the cell after exercise {nn}.{k} is not a markdown cell tagged 'answer'"
        )
        lines = answer.source.strip().splitlines()
        assert re.fullmatch(rf"(`{{3,}})\{{admonition\}} Answer {nn}\.{k}", lines[0]), lines[0]
        assert lines[1] == ":class: dropdown" and lines[-1] == re.match("`+", lines[0]).group()
        assert len(answer.source) > 80, f"{path.name}: answer {nn}.{k} is too short to be one"
    kinds = [re.search(r"\(([a-z-]+),", cells[i].source).group(1) for i in exercises]
    assert len(set(kinds)) >= 2, f"{path.name}: mix the kinds of exercise"
    assert "open-ended" in kinds, f"{path.name}: no open-ended exercise"
    assert sum(is_answer(c) for c in cells) == len(exercises)


# ---- issue 41: fences, self-containment, self-checks ----------------------------------------

ROOT = BOOK.parent
_spec = importlib.util.spec_from_file_location(
    "book_tool_for_exercises", ROOT / "tools" / "book.py"
)
book_tool = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("book_tool_for_exercises", book_tool)
_spec.loader.exec_module(book_tool)

MD = MarkdownIt("commonmark")
EXERCISE = re.compile(r"^\*\*Exercise (\d+\.\d+)\*\*")
CITED = re.compile(r"Exercise (\d+\.\d+)")
NUMBER = re.compile(r"(?<![\w{])-?\d+(?:\.\d+)?")


def fence_problems(source: str) -> list[str]:
    """What is wrong with an answer cell's fences: the admonition must be the cell's only block,
    opened on the first line and closed on the last, and every fence inside it closed inside it."""
    lines = source.strip().splitlines()
    tokens = [t for t in MD.parse(source.strip()) if t.level == 0]
    if (
        len(tokens) != 1
        or tokens[0].type != "fence"
        or not tokens[0].info.startswith("{admonition}")
    ):
        kinds = [f"{t.type}:{t.info}" if t.type == "fence" else t.type for t in tokens]
        return [f"the admonition is not the cell's only block: {kinds}"]
    outer = tokens[0]
    if outer.map != [0, len(lines)] or lines[-1].strip() != outer.markup:
        return [f"the admonition ends on line {outer.map[1]} of {len(lines)}, not on the last"]
    problems = []
    inner = outer.content.splitlines()
    for t in MD.parse(outer.content):
        if t.type == "fence":
            close = inner[t.map[1] - 1].strip() if t.map[1] - 1 > t.map[0] else ""
            if not (close.startswith(t.markup[0] * len(t.markup)) and set(close) <= set(t.markup)):
                problems.append(
                    f"the {t.markup}{t.info} fence on line {t.map[0] + 2} is not closed"
                )
    return problems


def test_fence_problems_finds_a_three_backtick_admonition_around_code():
    bad = "```{admonition} Answer 1.1\n:class: dropdown\nText.\n\n```python\nx = 1\n```\n```"
    good = "````{admonition} Answer 1.1\n:class: dropdown\nText.\n\n```python\nx = 1\n```\n````"
    assert fence_problems(bad) and fence_problems(good) == []
    assert fence_problems("````{admonition} A\n:class: dropdown\n```python\nx = 1\n````")


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.stem)
def test_every_answer_renders_as_one_dropdown(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and is_answer(cell):
            problems = fence_problems(cell.source)
            assert not problems, f"{path.name}, {cell.source.splitlines()[0]}: {problems}"


def python_blocks(source: str) -> list[ast.Module]:
    """The code blocks of a markdown cell (fenced or indented) that parse as Python."""
    found = []
    for t in MD.parse(source):
        if t.type == "fence" and t.content.strip() and t.info.split()[:1] in ([], ["python"]):
            code = t.content
        elif t.type == "fence" and t.info.startswith("{admonition}"):
            found += python_blocks(t.content)
            continue
        elif t.type == "code_block":
            code = t.content
        else:
            continue
        try:
            found.append(ast.parse(textwrap.dedent(code)))
        except SyntaxError:
            pass
    return found


def defined_names(trees: list[ast.Module]) -> set[str]:
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def tensor_rows(trees: list[ast.Module]) -> list[list[float]]:
    """The innermost number lists of every ``torch.tensor([...])`` literal."""
    rows = []
    for tree in trees:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) in ("torch.tensor", "tensor")
                and node.args
                and isinstance(node.args[0], ast.List)
            ):
                for lst in ast.walk(node.args[0]):
                    if isinstance(lst, ast.List) and all(
                        isinstance(e, (ast.Constant, ast.UnaryOp)) for e in lst.elts
                    ):
                        try:
                            rows.append([float(ast.literal_eval(e)) for e in lst.elts])
                        except ValueError:
                            pass
    return rows


def contains_run(values: list[float], row: list[float]) -> bool:
    return any(values[i : i + len(row)] == row for i in range(len(values) - len(row) + 1))


def leaks(
    statements: dict[str, str], answers: dict[str, str], student_code: list[str]
) -> list[str]:
    """What the exercises need that only their answers hold (module docstring)."""
    code_trees = []
    for src in student_code:
        try:
            code_trees.append(
                ast.parse(
                    "\n".join(
                        line
                        for line in src.splitlines()
                        if not line.lstrip().startswith(("%", "!"))
                    )
                )
            )
        except SyntaxError:
            pass
    available = defined_names(code_trees) | set(dir(builtins))
    answer_names = defined_names([t for a in answers.values() for t in python_blocks(a)])
    code_numbers = [float(v) for v in NUMBER.findall("\n".join(student_code))]
    found = []
    for number, statement in statements.items():
        if re.search(r"\bAnswer \d+\.\d+", statement):
            found.append(f"Exercise {number} cites an answer")
        own = defined_names(python_blocks(statement))
        body = statement.split("\n\nSelf-check:")[0]  # it names the student's own answer
        own |= set(re.findall(r"[Ww]rite `(\w+)\(", body))  # what the exercise asks to write
        spans = []
        for span in re.findall(r"`([^`]+)`", body):
            try:
                spans.append(ast.parse(span))
            except SyntaxError:
                continue
        own |= defined_names(spans)  # a span may define what another uses
        for tree in spans:
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    name = node.id
                    if name in answer_names and name not in available and name not in own:
                        found.append(f"Exercise {number} uses `{name}`, defined only in an answer")
        sources = [statement] + [statements.get(c, "") for c in CITED.findall(statement)]
        values = [float(v) for v in NUMBER.findall("\n".join(sources))]
        for row in tensor_rows(python_blocks(answers.get(number, ""))):
            if not (contains_run(values, row) or contains_run(code_numbers, row)):
                found.append(f"Exercise {number}: the data {row} is only in its answer")
    return found


def student_edition(path: Path, tmp: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(statements by number, answers by number, code cells) of the chapter's student edition,
    made by tools/book.py's own ``remove_answers`` on a copy."""
    full = nbformat.read(path, as_version=4)
    answers = {}
    for cell in full.cells:
        if cell.cell_type == "markdown" and is_answer(cell):
            answers[re.search(r"Answer (\d+\.\d+)", cell.source)[1]] = cell.source
    copy = tmp / path.name
    nbformat.write(full, copy)
    book_tool.remove_answers(copy)
    student = nbformat.read(copy, as_version=4)
    assert not any(is_answer(c) for c in student.cells)
    statements = {
        EXERCISE.match(c.source)[1]: c.source
        for c in student.cells
        if c.cell_type == "markdown" and EXERCISE.match(c.source)
    }
    code = [c.source for c in student.cells if c.cell_type == "code"]
    return statements, answers, code


def all_statements(tmp: Path) -> dict[str, str]:
    out = {}
    for path in chapters():
        out |= student_edition(path, tmp)[0]
    return out


def test_leaks_finds_data_and_names_only_in_an_answer():
    statements = {
        "2.3": "**Exercise 2.3** (predict-then-run, \u2605). The batch S below, labels 0, 0, 1, 1.",
        "3.2": "**Exercise 3.2** (derive, \u2605). Run `contrastive_sum(S, y)` on the batch of "
        "Exercise 2.3; see Answer 2.3.",
    }
    answers = {
        "2.3": "````{admonition} Answer 2.3\n:class: dropdown\n```python\n"
        "S = torch.tensor([[1.0, 0.7], [0.7, 1.0]])\ndef contrastive_sum(S, y):\n    pass\n```\n````",
    }
    found = leaks(statements, answers, ["import torch"])
    assert any("[1.0, 0.7]" in f for f in found)
    assert any("`contrastive_sum`" in f for f in found)
    assert any("cites an answer" in f for f in found)
    statements["2.3"] += " $$S = \\begin{pmatrix} 1.0 & 0.7 \\\\ 0.7 & 1.0 \\end{pmatrix}$$"
    statements["3.2"] = statements["3.2"].replace("`contrastive_sum(S, y)`", "your function")
    statements["3.2"] = statements["3.2"].replace("; see Answer 2.3", "")
    assert leaks(statements, answers, ["import torch"]) == []


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.stem)
def test_every_exercise_is_self_contained_in_the_student_edition(path, tmp_path):
    statements, answers, code = student_edition(path, tmp_path)
    everywhere = (
        all_statements(tmp_path)
        if any(
            c.split(".")[0] != number_of(path)
            for s in statements.values()
            for c in CITED.findall(s)
        )
        else statements
    )
    cited = {
        c: everywhere[c] for s in statements.values() for c in CITED.findall(s) if c in everywhere
    }
    found = leaks(
        statements | {k: v for k, v in cited.items() if k not in statements}, answers, code
    )
    assert found == [], found


def test_every_self_check_is_offered_by_its_exercise_and_only_there(tmp_path):
    from dmlbook.exercises import EXERCISES

    statements = all_statements(tmp_path)
    offered = {}
    for number, statement in statements.items():
        calls = re.findall(r'`check\("(\d+\.\d+)"', statement)
        assert set(calls) <= {number}, f"Exercise {number} offers the check of {calls}"
        if calls:
            offered[number] = statement
    assert sorted(offered) == sorted(EXERCISES), (
        f"offered without a check: {sorted(set(offered) - set(EXERCISES))}; "
        f"checks no exercise offers: {sorted(set(EXERCISES) - set(offered))}"
    )
