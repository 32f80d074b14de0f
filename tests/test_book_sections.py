"""Every chapter numbers its sections ``## N.1``, ``## N.2``, ... in order, each number once.

Reads the notebooks' markdown only (no execution). A heading ``## 11.7 Summary`` followed by
``## 11.7 Exercises`` (repeated) or ``## 13.8`` followed by ``## 13.5`` (out of sequence) fails,
naming the chapter and the headings in the order they appear.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
HEADING = re.compile(r"^##\s+(\d+)\.(\d+)\b(.*)$", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def section_numbers(path: Path) -> list[tuple[int, int, str]]:
    """``(chapter, section, title)`` of every ``## N.M`` heading, in reading order."""
    cells = json.loads(path.read_text())["cells"]
    found = []
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        text = FENCE.sub("", "".join(cell["source"]))  # headings inside code blocks do not count
        found += [(int(n), int(m), title.strip()) for n, m, title in HEADING.findall(text)]
    return found


def problems(numbers: list[tuple[int, int, str]], chapter: int) -> list[str]:
    """What is wrong with a chapter's section numbers (empty when they run 1, 2, 3, ...)."""
    out, seen = [], set()
    expected = 1
    for n, m, title in numbers:
        if n != chapter:
            out.append(f"'## {n}.{m} {title}' carries chapter number {n}, not {chapter}")
            continue
        if m != expected:
            kind = "repeated" if m in seen else "out of sequence"
            out.append(f"'## {n}.{m} {title}' is {kind} (expected {chapter}.{expected})")
        seen.add(m)
        expected = max(expected, m) + 1
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_sections_are_numbered_in_sequence(path):
    chapter = int(path.name[:2])
    numbers = section_numbers(path)
    listing = ", ".join(f"{n}.{m} {t}" for n, m, t in numbers)
    assert problems(numbers, chapter) == [], f"{path.name}: {listing}"


def test_the_rule_catches_repeats_gaps_and_wrong_chapters():
    good = [(11, 1, "a"), (11, 2, "b"), (11, 3, "Summary")]
    assert problems(good, 11) == []
    repeated = [(11, 6, "x"), (11, 7, "Summary"), (11, 7, "Exercises"), (11, 8, "Exercises")]
    found = problems([(11, k, "") for k in range(1, 6)] + repeated, 11)
    assert [p.split(" is ")[-1] for p in found] == [
        "repeated (expected 11.8)",
        "out of sequence (expected 11.9)",
    ]
    backwards = [(13, k, "") for k in range(1, 9)] + [(13, 5, "Summary"), (13, 9, "Exercises")]
    assert len(problems(backwards, 13)) == 2
    assert "carries chapter number 12" in problems([(12, 1, "x")], 13)[0]
