"""A number the prose attributes to a paper is printed by the chapter's code, not typed.

The papers' numbers live in ``dmlbook/data/paper_results.csv``. A chapter may state one in a
markdown cell only if one of its code cells prints it (from that file), so that prose cannot
drift from the data: a markdown cell that states a paper's number (a value of the file, written
with one or two decimals) which no stored code output of the same chapter shows fails here, and
so does a code cell that types such a number instead of loading it (an ``assert`` or
``check_close`` line may name the value it checks; ``80.0`` in code is taken for a float, not a paper's number). Reads
the notebooks' JSON only (no execution).

A number that coincides with a paper's value but is not one (an ImageNet accuracy, a section
number) is listed in ``NOT_A_PAPERS_NUMBER`` with the reason.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from dmlbook.papers.paper_results import load_paper_results

BOOK = Path(__file__).resolve().parent.parent / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
TOKEN = re.compile(r"(?<![\w.])(\d{2}\.\d{1,2})(?![\d])")
DECIMAL = re.compile(r"(?<![\w.])(\d+\.\d+)")
#: A number right after one of these words is a reference (Section 12.8, Exercise 13.2, a self-check
#: ``check("13.2", ...)``), not data.
REFERENCE = re.compile(
    r"(Sections?|Sec\.|Chapters?|Exercises?|Answers?|§|Eqs?\.|Tables?|Fig\.|Figures?|#|check\(\")\s*$"
)

#: (chapter, number): why the number is not a paper's number although a paper prints it too.
NOT_A_PAPERS_NUMBER = {
    ("14_training_at_scale", "76.1"): "ImageNet top-1 of torchvision's BN-Inception V1 weights",
    ("14_training_at_scale", "80.9"): "ImageNet top-1 of torchvision's V2 weights",
    ("05_lifted_structure", "81.8"): "88.72 - ln 1000: 1000 float32 exponentials overflow",
}


@cache
def paper_numbers() -> frozenset[str]:
    """Every value of the papers' tables as printed (one and two decimals), 10 and above."""
    values = load_paper_results().value
    found = {f"{v:.1f}" for v in values} | {f"{v:.2f}" for v in values}
    return frozenset(v for v in found if float(v) >= 10)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def printed_numbers(nb: list[dict]) -> list[float]:
    """Every decimal number in the stored outputs of the code cells (text and text/plain)."""
    text = []
    for cell in nb:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            text.append("".join(out.get("text", "")))
            text.append("".join(out.get("data", {}).get("text/plain", "")))
    return [float(x) for x in DECIMAL.findall(" ".join(text))]


def is_printed(token: str, printed: list[float]) -> bool:
    """``token`` (``"78.2"``) is shown by an output, to the token's own precision."""
    decimals = len(token.partition(".")[2])
    return any(abs(round(x, decimals) - float(token)) < 1e-9 for x in printed)


def stated(source: str) -> list[tuple[str, str]]:
    """(number, context) for each paper-like number of a text that is not a reference."""
    out = []
    for match in TOKEN.finditer(source):
        if match.group(1) not in paper_numbers():
            continue
        if REFERENCE.search(source[max(0, match.start() - 12) : match.start()]):
            continue
        context = " ".join(source[max(0, match.start() - 60) : match.end() + 20].split())
        out.append((match.group(1), context))
    return out


def unprinted(path: Path) -> list[str]:
    nb = cells(path)
    printed = printed_numbers(nb)
    problems = []
    for i, cell in enumerate(nb):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":  # an assert (or a check_close pin of the chapter's own
            # printed result) checks a value; 80.0 in code is a float
            source = "\n".join(
                line
                for line in source.splitlines()
                if not line.lstrip().startswith(("assert", "check_close("))
            )
        for number, context in stated(source):
            if cell["cell_type"] == "code" and number.endswith(".0"):
                continue
            if (path.stem, number) in NOT_A_PAPERS_NUMBER:
                continue
            if cell["cell_type"] == "code":
                problems.append(f"cell {i} types {number} in code: load it ({context!r})")
            elif cell["cell_type"] == "markdown" and not is_printed(number, printed):
                problems.append(f"cell {i} states {number}, which no output prints ({context!r})")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_paper_number_in_the_prose_is_printed_by_the_chapter(path):
    assert unprinted(path) == []


def test_the_rule_flags_typed_and_unprinted_numbers(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "source": "LS reaches 56.8 and gamma = 1 gets 56.4; see Section 12.8.",
            },
            {"cell_type": "code", "source": "print(table)", "outputs": [{"text": "LS  56.80\n"}]},
            {"cell_type": "code", "source": "r1 = 65.7\nassert r1 > 57.0", "outputs": []},
        ]
    }
    path = tmp_path / "12_x.ipynb"
    path.write_text(json.dumps(nb))
    found = unprinted(path)
    assert len(found) == 2
    assert found[0].startswith("cell 0 states 56.4") and found[1].startswith("cell 2 types 65.7")
    assert is_printed("78.2", [78.19]) and not is_printed("78.2", [78.35])
