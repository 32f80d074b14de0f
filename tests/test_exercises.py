"""Every chapter ends with its exercises, and every exercise has an answer (issue 15).

Checked on every notebook ``book/NN_*.ipynb`` with ``NN < 90`` or ``NN == 90`` (chapters added
later are checked too): the last ``## `` section is the exercises, ``## NN.x Exercises`` in a
chapter (``## Exercises`` in the appendix); under it, each exercise is a markdown cell
``**Exercise NN.k** (kind).`` with ``k = 1, 2, ...``, of one of the four kinds, immediately
followed by its answer: a markdown cell tagged ``answer`` holding a MyST dropdown admonition
``Answer NN.k``. Answer cells appear nowhere else, and there are 3-5 exercises.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"
KINDS = {"derive", "implement", "predict-then-run", "read-a-table"}


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
    assert 3 <= len(exercises) <= 5, f"{path.name}: {len(exercises)} exercises"
    for k, i in enumerate(exercises, 1):
        m = re.match(rf"\*\*Exercise {nn}\.{k}\*\* \(([a-z-]+)\)\. \S", cells[i].source)
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
    kinds = {re.search(r"\(([a-z-]+)\)", cells[i].source).group(1) for i in exercises}
    assert len(kinds) >= 2, f"{path.name}: mix the kinds of exercise"
    assert sum(is_answer(c) for c in cells) == len(exercises)
