"""The errata of the seed papers, collected from the chapters that prove them.

A chapter that finds a misprint marks it in a markdown cell of its own, next to the proof, in
this form (a MyST admonition; in Jupyter it reads as plain text)::

    :::{admonition} Erratum — Liu et al., Eq. 20
    :class: erratum
    **Printed:** $D_{ik} = \\max_{y_{ik}=0} D_{ik}$ selects the hardest negative.

    **Correct:** $D_{ik} = \\min_{y_{ik}=0} D_{ik}$: the hardest negative is the nearest.

    **Proof:** the tiny batch above; the printed rule leaves ...
    :::

The title names the paper and the place (``<paper>, <equation, table or section>``); the three
fields are required, in that order. ``collect`` reads every chapter, ``errata_page`` writes the
book's errata page from what it found (``tools/book.py`` does this on every build, so the page
cannot drift from the chapters), each erratum linked to the section of its chapter by that
section's heading. Tests: ``tests/papers/test_errata.py``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

OPENING = ":::{admonition} Erratum — "
FIELDS = ("Printed", "Correct", "Proof")
_FIELD = re.compile(r"^\*\*(Printed|Correct|Proof):\*\*\s*", re.MULTILINE)


class ErratumFormatError(ValueError):
    """An erratum cell that does not follow the convention (the message says what to fix)."""


@dataclass(frozen=True)
class Erratum:
    """One misprint of a seed paper and where the book proves the correction."""

    paper: str
    where: str
    printed: str
    correct: str
    proof: str
    chapter: str
    cell: int
    section: str = ""

    @property
    def title(self) -> str:
        return f"{self.paper}, {self.where}"


_HEADING = re.compile(r"^(#{1,2})\s+(.+?)\s*$", re.MULTILINE)


def heading_slug(heading: str) -> str:
    """The anchor MyST gives a heading: lower case, punctuation dropped, spaces to hyphens
    (``14.9 The loss chapters`` -> ``149-the-loss-chapters``). MyST slugs only the heading's
    text: inline maths (``$...$``) is left out, so ``HAP2S$_E$ (x)`` -> ``hap2s-x``."""
    text = re.sub(r"(?<!\\)\$[^$]*\$", "", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def parse_cell(source: str, chapter: str, cell: int) -> Erratum:
    """Parse one erratum cell's markdown; raise ``ErratumFormatError`` when it is malformed."""
    where = f"{chapter}, cell {cell}"
    lines = source.strip().splitlines()
    if not lines or not lines[0].startswith(OPENING):
        raise ErratumFormatError(
            f"{where}: an erratum cell starts with '{OPENING}<paper>, <place>'"
        )
    if lines[-1].strip() != ":::":
        raise ErratumFormatError(f"{where}: close the erratum admonition with a line ':::'")
    paper, sep, place = lines[0][len(OPENING) :].partition(", ")
    if not sep or not paper.strip() or not place.strip():
        raise ErratumFormatError(
            f"{where}: the title must read 'Erratum — <paper>, <place>', e.g. "
            f"'Erratum — Liu et al., Eq. 20'; got {lines[0]!r}"
        )
    body = "\n".join(line for line in lines[1:-1] if not line.startswith(":class:"))
    parts = _FIELD.split(body)
    names = parts[1::2]
    if tuple(names) != FIELDS:
        raise ErratumFormatError(
            f"{where}: give the fields **Printed:**, **Correct:** and **Proof:**, in that order "
            f"(found {', '.join(names) or 'none'})"
        )
    values = [" ".join(v.split()) for v in parts[2::2]]
    empty = [n for n, v in zip(FIELDS, values, strict=True) if not v]
    if empty:
        raise ErratumFormatError(f"{where}: the field(s) {', '.join(empty)} are empty")
    return Erratum(paper.strip(), place.strip(), *values, chapter=chapter, cell=cell)


def errata_in(path: Path) -> list[Erratum]:
    """Every erratum cell of one chapter notebook, in order."""
    nb = nbformat.read(path, as_version=4)
    found = []
    section = ""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and not cell.source.lstrip().startswith(OPENING.rstrip()):
            headings = [h for _, h in _HEADING.findall(cell.source)]
            section = headings[-1] if headings else section  # the section the cell ends in
        if cell.cell_type != "markdown" or OPENING.rstrip() not in cell.source:
            continue
        if not cell.source.lstrip().startswith(OPENING.rstrip()):
            # An erratum inside a prose cell would be rendered but never reach the errata page.
            raise ErratumFormatError(
                f"{path.name}, cell {i}: move the erratum admonition into a markdown cell of its "
                f"own (the cell must start with '{OPENING}<paper>, <place>')"
            )
        erratum = parse_cell(cell.source, path.name, i)
        found.append(dataclasses.replace(erratum, section=section))
    return found


def collect(paths: list[Path]) -> list[Erratum]:
    """The errata of all ``paths`` (chapter notebooks), in reading order."""
    return [e for path in paths for e in errata_in(path)]


def where_proved(e: Erratum) -> str:
    """A link to the section that proves ``e``: ``[12.5 Grouped ...](12_dro.ipynb#125-grouped-...)``."""
    chapter = Path(e.chapter).stem
    if not e.section:
        return f"[{chapter}]({chapter}.ipynb)"
    label = e.section.replace("[", "(").replace("]", ")")
    return f"[{label}]({chapter}.ipynb#{heading_slug(e.section)})"


def errata_page(errata: list[Erratum]) -> str:
    """The errata page (MyST markdown): one section per paper, each erratum with its chapter."""
    lines = [
        "# Errata of the papers",
        "",
        "Misprints this book found in its source papers, each with what was printed, what is "
        "correct and the section of the chapter that proves it (usually with SymPy, otherwise "
        "on a worked batch or against the paper's own tables). The page is generated from the "
        "chapters' erratum cells every time the book is built.",
        "",
    ]
    if not errata:
        return "\n".join(lines + ["No erratum cells were found in the chapters.", ""])
    papers = list(dict.fromkeys(e.paper for e in errata))
    for paper in papers:
        lines += [f"## {paper}", ""]
        for e in (e for e in errata if e.paper == paper):
            lines += [
                f"### {e.where}",
                "",
                f"- **Printed:** {e.printed}",
                f"- **Correct:** {e.correct}",
                f"- **Proof:** {e.proof} ({where_proved(e)})",
                "",
            ]
    lines.append(f"{len(errata)} errata in {len(papers)} papers.")
    return "\n".join(lines) + "\n"
