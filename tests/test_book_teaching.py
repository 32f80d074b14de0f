"""The book reads as a lesson: short cells, scaffolding out of sight, words before use (issue 39).

Reads the notebooks' JSON, ``book/intro.md`` and ``book/notation.md`` only (no execution; the
whole file takes well under a second). Each failure names the chapter, the cell index (0-based,
as ``json.load(...)["cells"]`` counts) and the rule with its limit:

- a code cell the page shows has at most ``MAX_CODE_LINES`` lines, a markdown cell at most
  ``MAX_WORDS`` words; cells tagged ``remove-input``, ``remove-cell`` or ``hide-input`` are
  exempt from the code rule (the reader does not see their source);
- test scaffolding is out of sight: a shown code cell calls no ``check_close``, and a cell of
  nothing but ``assert`` statements is hidden;
- no chapter but 14 plans a benchmark run (its "At benchmark scale" cell is a link to Chapter 14's
  table);
- every chapter 1-15 has a "Summary" section;
- a metric, acronym or term of ``TERMS`` is defined (expanded) no later, in reading order
  (introduction, the notation page's prose, then the chapters by number), than the first cell
  that uses it;
- every acronym of a chapter's markdown (an all-capital token of two or more letters: DRO, KKT,
  MAP@R, HAP2S) has a row on the notation page and is expanded ("long form (A)", "A (long
  form", "long form, A") no later, in reading order (introduction, the notation page's prose,
  chapters 1-15, 90, 91), than its first use in prose, code or printed output; the few words of
  ``ALLOWED_ACRONYMS`` are exempt, each for its stated reason (about 0.1 s);
- the notation page exists, is read right after the introduction, and lists every symbol of
  ``SYMBOLS`` and every term of ``TERMS``;
- the introduction's reading times are the ones ``tools/reading_times.py`` computes from the
  chapters as stored (``make reading-times`` rewrites them).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
sys.path.insert(0, str(ROOT / "tools"))
import reading_times  # noqa: E402

CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
NOTATION = BOOK / "notation.md"
INTRO = BOOK / "intro.md"
MAX_CODE_LINES = 30
MAX_WORDS = 350
HIDDEN_SOURCE = {"remove-input", "remove-cell", "hide-input"}
SUMMARY = re.compile(r"^##\s+(\d+\.\d+\s+)?Summary\b", re.MULTILINE)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def joined(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


def text(cell: dict) -> str:
    return joined(cell["source"])


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def shown_code(cell: dict) -> bool:
    return cell["cell_type"] == "code" and not tags(cell) & HIDDEN_SOURCE


# ----------------------------------------------------------------------------- cell lengths


def long_cells(path: Path) -> list[str]:
    """Every cell of ``path`` over its limit, as "chapter cell i: what (limit)"."""
    out = []
    for i, cell in enumerate(cells(path)):
        source = text(cell)
        if shown_code(cell) and len(source.splitlines()) > MAX_CODE_LINES:
            out.append(
                f"{path.name} cell {i}: shown code cell of {len(source.splitlines())} lines "
                f"(limit {MAX_CODE_LINES}; split it, or hide scaffolding with remove-input)"
            )
        if cell["cell_type"] == "markdown" and len(source.split()) > MAX_WORDS:
            out.append(
                f"{path.name} cell {i}: markdown cell of {len(source.split())} words "
                f"(limit {MAX_WORDS}; split it)"
            )
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_cells_are_short(path):
    assert long_cells(path) == []


def scaffolding(path: Path) -> list[str]:
    """Shown code cells that call check_close, or that hold nothing but asserts."""
    out = []
    for i, cell in enumerate(cells(path)):
        if not shown_code(cell):
            continue
        source = text(cell)
        if re.search(r"\bcheck_close\(", source):
            out.append(f"{path.name} cell {i}: shown code calls check_close (tag it remove-input)")
            continue
        try:
            body = ast.parse(source).body
        except SyntaxError:  # IPython magics: not plain Python, not an assert-only cell
            continue
        if body and all(isinstance(node, ast.Assert) for node in body):
            out.append(f"{path.name} cell {i}: a shown cell of asserts only (tag it remove-input)")
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_test_scaffolding_is_hidden(path):
    assert scaffolding(path) == []


def test_the_length_and_scaffolding_rules_catch_what_they_name(tmp_path):
    def cell(kind, source, *cell_tags):
        return {"cell_type": kind, "source": source, "metadata": {"tags": list(cell_tags)}}

    nb = tmp_path / "01_x.ipynb"
    long_code = "\n".join(f"x{n} = {n}" for n in range(31))
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    cell("code", long_code),
                    cell("code", long_code, "remove-input"),
                    cell("markdown", "word " * 351),
                    cell("markdown", "word " * 350),
                    cell("code", "assert 1 == 1\nassert 2 > 1"),
                    cell("code", "assert 1 == 1", "remove-input"),
                    cell("code", "y = 2\ncheck_close(y, 2, 0, 'y')"),
                    cell("code", "y = 2\nassert y == 2"),
                ]
            }
        )
    )
    assert [line.split(":")[0] for line in long_cells(nb)] == ["01_x.ipynb cell 0"] + [
        "01_x.ipynb cell 2"
    ]
    assert "31 lines (limit 30" in long_cells(nb)[0] and "351 words" in long_cells(nb)[1]
    assert [line.split(":")[0] for line in scaffolding(nb)] == [
        "01_x.ipynb cell 4",
        "01_x.ipynb cell 6",
    ]


def benchmark_plans(path: Path) -> list[str]:
    """Code cells that plan a benchmark run: one table in Chapter 14 holds them (issue 39)."""
    return [
        f"{path.name} cell {i}: plans a benchmark run (plan_benchmark); link to Chapter 14's table"
        for i, cell in enumerate(cells(path))
        if cell["cell_type"] == "code" and re.search(r"\bplan_benchmark\(", text(cell))
    ]


@pytest.mark.parametrize(
    "path", [p for p in CHAPTERS if not p.name.startswith("14_")], ids=lambda p: p.stem
)
def test_benchmark_plans_live_in_chapter_14_only(path):
    assert benchmark_plans(path) == []


# ----------------------------------------------------------------------------- summaries


@pytest.mark.parametrize(
    "path", [p for p in CHAPTERS if int(p.name[:2]) <= 15], ids=lambda p: p.stem
)
def test_every_chapter_has_a_summary(path):
    markdown = [text(c) for c in cells(path) if c["cell_type"] == "markdown"]
    assert any(SUMMARY.search(m) for m in markdown), (
        f"{path.name}: no '## Summary' (or '## N.M Summary') section"
    )


# ----------------------------------------------------------------------------- defined terms


def expansion(long: str, short: str) -> str:
    """A regex for 'long form (SHORT)' or 'SHORT (long form', emphasis and case aside."""
    words = r"[\s*_-]+".join(re.escape(w) for w in re.split(r"[\s-]+", long))
    return rf"(?i:{words})[*_]*\s*\({re.escape(short)}\)|{re.escape(short)}\s*\((?i:{words})"


@dataclass(frozen=True)
class Term:
    """A word the reader must have been told the meaning of before it is used."""

    name: str  # as the notation page lists it (its first column)
    use: str  # regex of a use, in prose, code or printed output
    defined: str  # regex of the definition or expansion, in prose


def bold(*names: str) -> str:
    return "|".join(rf"\*\*{re.escape(n)}" for n in names)


TERMS = (
    Term("Recall@$k$", r"Recall@|(?<![\w@])R@(\d|K\b|k\b|\$)", bold("Recall@")),
    Term("P@1", r"(?<![\w@])P@1\b|Precision@1", bold("P@1", "Precision@1")),
    Term("R-Precision (RP)", r"R-[Pp]recision|(?<![\w\"'])RP\b", bold("R-Precision")),
    Term("MAP@R", r"MAP@R", bold("MAP@R")),
    Term("DML", r"\bDML\b", expansion("deep metric learning", "DML")),
    Term("GPW", r"\bGPW\b", expansion("General Pair Weighting", "GPW")),
    Term("MS", r"\bMS\b", expansion("Multi-Similarity", "MS")),
    Term("LS", r"\bLS\b", expansion("lifted structure", "LS")),
    Term("NCA", r"\bNCA\b", expansion("Neighbourhood Components Analysis", "NCA")),
    Term("DRO", r"\bDRO\b", expansion("distributionally robust optimisation", "DRO")),
    Term("KL", r"\bKL\b", expansion("Kullback-Leibler", "KL")),
    Term("KKT", r"\bKKT\b", expansion("Karush-Kuhn-Tucker", "KKT")),
    Term("HAP2S", r"\bHAP2S", expansion("hard-aware point-to-set", "HAP2S")),
    Term("DWS", r"\bDWS\b", expansion("distance-weighted sampling", "DWS")),
    Term("SOP", r"\bSOP\b", expansion("Stanford Online Products", "SOP")),
    Term("Similarity-S", r"Similarity-S\b", bold("Similarity-S")),
    Term("Similarity-P", r"Similarity-P\b", bold("Similarity-P")),
    Term("Similarity-N", r"Similarity-N\b", bold("Similarity-N")),
    Term("HingeActive", r"(?<!\w)HingeActive\b", r"`(sy\.)?HingeActive"),
)


@dataclass(frozen=True)
class Place:
    """A cell in reading order: its position, the page's name and the cell's index in it."""

    order: int
    page: str
    cell: int

    def __str__(self) -> str:
        return f"{self.page} cell {self.cell}"


def code_text(cell: dict) -> str:
    """A code cell's source and the text its outputs print (not an image's placeholder)."""
    parts = [text(cell)]
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(joined(out.get("text", "")))
        elif "text/plain" in out.get("data", {}) and not any(
            key.startswith("image/") for key in out["data"]
        ):
            parts.append(joined(out["data"]["text/plain"]))
    return "\n".join(parts)


def prose(markdown: str) -> str:
    """``markdown`` without its table rows (a page's tables are where a word is looked up)."""
    return "\n".join(line for line in markdown.splitlines() if not line.startswith("|"))


def reading_order() -> list[tuple[Place, str, str]]:
    """(place, kind, text) of every cell in reading order: the introduction (one cell), the
    notation page's prose (one cell: its tables are a glossary to look a word up in, not where
    the book first tells it), then the chapters by number (1-15, 90, 91)."""
    out = [
        (Place(0, INTRO.name, 0), "markdown", INTRO.read_text()),
        (Place(1, NOTATION.name, 0), "markdown", prose(NOTATION.read_text())),
    ]
    for path in CHAPTERS:
        for i, cell in enumerate(cells(path)):
            kind = cell["cell_type"]
            body = text(cell) if kind == "markdown" else code_text(cell)
            out.append((Place(len(out), path.name, i), kind, body))
    return out


def undefined_uses(order: list[tuple[Place, str, str]], terms=TERMS) -> list[str]:
    """Terms first used before (or never) defined, each as one sentence."""
    problems = []
    for term in terms:
        use, defined = re.compile(term.use), re.compile(term.defined)
        first_use = next((p for p, _, body in order if use.search(body)), None)
        first_def = next(
            (p for p, kind, body in order if kind == "markdown" and defined.search(body)), None
        )
        if first_use is None:
            continue
        if first_def is None:
            problems.append(f"{term.name}: used in {first_use}, defined nowhere in the book")
        elif first_def.order > first_use.order:
            problems.append(
                f"{term.name}: used in {first_use} before its definition in {first_def}"
            )
    return problems


@pytest.mark.parametrize("term", TERMS, ids=[t.name for t in TERMS])
def test_terms_are_defined_before_they_are_used(term):
    assert undefined_uses(ORDER, (term,)) == []


def test_the_defined_terms_rule_catches_a_use_before_the_definition():
    p = [Place(n, "01_x.ipynb", n) for n in range(3)]
    order = [
        (p[0], "markdown", "We report MAP@R."),
        (p[1], "markdown", "**MAP@R** is the mean average precision at R."),
        (p[2], "code", "print('DML')"),
    ]
    found = undefined_uses(order, (TERMS[3], TERMS[4]))
    assert found == [
        "MAP@R: used in 01_x.ipynb cell 0 before its definition in 01_x.ipynb cell 1",
        "DML: used in 01_x.ipynb cell 2, defined nowhere in the book",
    ]
    ordered = [(p[0], "markdown", "Deep *metric learning* (DML) is ..."), (p[1], "code", "DML")]
    assert undefined_uses(ordered, (TERMS[4],)) == []


ORDER = reading_order()


# ----------------------------------------------------------------------------- notation page

#: Symbols the notation page must list (as LaTeX inside its tables' first column).
SYMBOLS = (
    "B", "C", "K", "P", "N", "n", "d", "i", "j", "k", "y_i", "x_i", "z_i", "S_{ij}",
    r"\mathbf{S}", "D_{ij}", r"\mathcal{P}_i", r"\mathcal{N}_i", r"\mathcal{I}_{ij}",
    r"\mathcal{L}", r"\mathcal{F}", "l_{ij}", "w_{ij}", "w^+_{ij}", "w^-_{ij}", "w_{ijk}",
    r"\lambda", "m", "m_1", "m_2", r"\epsilon", r"\alpha", r"\beta", r"\gamma", r"\rho",
    "p", "q", "p_{ij}", "R",
)  # fmt: skip


def first_columns(markdown: str) -> list[str]:
    """The first cell of every table row of ``markdown`` (header and rule rows left out)."""
    out = []
    for line in markdown.splitlines():
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            out.append(line.split("|")[1].strip())
    return out


def listed_symbols(markdown: str) -> set[str]:
    """Every symbol named in a first column: each ``$...$`` split at its commas and semicolons."""
    found = set()
    for cell in first_columns(markdown):
        for math in re.findall(r"\$([^$]+)\$", cell):
            found |= {part.strip() for part in re.split(r"[,;]", math)}
    return found


def test_the_notation_page_exists():
    # that the table of contents puts it right after the introduction: tests/test_book_tool.py
    assert NOTATION.is_file(), "book/notation.md is missing"


def test_the_notation_page_lists_every_symbol_and_term():
    page = NOTATION.read_text()
    missing = [s for s in SYMBOLS if s not in listed_symbols(page)]
    assert missing == [], f"notation.md lists no row for the symbols {missing}"
    names = first_columns(page)
    absent = [t.name for t in TERMS if not any(t.name in name for name in names)]
    assert absent == [], f"notation.md lists no row for {absent}"


def cited_equations(column: str) -> set[tuple[str, bool, int]]:
    """(paper, supplement?, number) of every equation a table cell cites ("Liu et al., Eq. 16-18,
    24" gives Liu's 16, 17, 18 and 24); a cell's parts are separated by semicolons."""
    found = set()
    for part in column.split(";"):
        paper = next((w for w in ("Wang", "Liu", "DRO", "Xuan", "Sun") if w in part), "?")
        numbers = part.split("Eq.", 1)[1].split("(")[0] if "Eq." in part else ""
        for lo, hi in re.findall(r"(\d+)(?:-(\d+))?", numbers):
            found |= {(paper, "supplement" in part, n) for n in range(int(lo), int(hi or lo) + 1)}
    return found


def test_the_notation_page_gives_each_loss_its_equation():
    page = NOTATION.read_text().split("## The losses and their equations")[1]
    rows = [line.split("|")[1:-1] for line in page.splitlines() if line.startswith("| ")]
    squared = next(r for r in rows if r[0].strip().startswith("squared-hinge contrastive"))
    assert squared[1].strip() == "Liu et al., Eq. 35"
    listed = set().union(*(cited_equations(r[1]) for r in rows))
    # every equation MAP.md's loss table ("A loss in one minute") names, the page names too
    table = (ROOT / "MAP.md").read_text().split("## A loss in one minute")[1].split("\n## ")[0]
    map_rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ")]
    in_map = set().union(*(cited_equations(r[1]) for r in map_rows[2:]))
    assert in_map - listed == set(), "equations MAP.md's loss table cites, not on notation.md"
    assert cited_equations("Wang Eq. 5; Liu et al., Eq. 16-18, 24") == {
        ("Wang", False, 5), ("Liu", False, 16), ("Liu", False, 17), ("Liu", False, 18),
        ("Liu", False, 24),
    }  # fmt: skip


# ----------------------------------------------------------------------------- acronyms

#: An acronym: a token of capital letters and digits with at least two capitals (DRO, HAP2S,
#: BF16), with an optional ``@`` part (MAP@R), not inside a longer word or a LaTeX command. A
#: hyphen may precede it (t-SNE, DRO-TopK-PN). R@1 or R@K (one capital before the ``@``) is a
#: metric of ``TERMS``, and a Roman numeral (Table IV, Sec. III-B6) is a number, not an acronym.
ACRONYM = re.compile(
    r"(?<![\w\\@])(?=[A-Z0-9]*[A-Z][A-Z0-9]*[A-Z])[A-Z][A-Z0-9]*(?:@[A-Z0-9]+)?(?![\w@])"
)
ROMAN = re.compile(r"^(?:X{0,3})(?:IX|IV|V?I{0,3})$")

#: Acronyms a reader meets without an expansion, each with its reason. Keep it short: a word of
#: the book's own subject always gets a row on the notation page and an expansion at first use.
ALLOWED_ACRONYMS = {
    **dict.fromkeys(
        ("CPU", "GPU", "CUDA", "API"),
        "computing words a reader who knows PyTorch uses daily (the book's prerequisite)",
    ),
    **dict.fromkeys(
        ("PNG", "JPEG", "CSV", "HTML", "YAML", "TOML", "URL", "README", "SQL"),
        "the names of file formats, files and addresses, read as words",
    ),
    **dict.fromkeys(("GB", "MB"), "units of memory"),
    **dict.fromkeys(
        ("NVIDIA", "A10G", "RTX", "SIGKILL"),
        "proper names (a company, its GPU models, a Unix signal), not abbreviations to expand",
    ),
}


def strip_markup(markdown: str) -> str:
    """Markdown's prose: without math, code, link targets and addresses (names there are
    symbols, code or paths, not words of the text)."""
    # a fenced code block (an admonition's fence, ```{note} or ````{admonition}, holds prose)
    markdown = re.sub(
        r"^[ \t]*(`{3,}|~{3,})(?!`*\{)[^\n]*\n.*?^[ \t]*\1[ \t]*$", " ", markdown, flags=re.M | re.S
    )
    markdown = re.sub(r"^[ \t]*(`{3,}|~{3,}).*$", " ", markdown, flags=re.M)  # fence lines
    for pattern in (
        r"\$\$.*?\$\$",
        r"\$[^$\n]*\$",
        r"`[^`]+`",
        r"\]\([^)\s]*\)",
        r"<https?://[^>\s]*>",
        r"https?://\S+",
        r"<!--.*?-->",
    ):
        markdown = re.sub(pattern, " ", markdown, flags=re.DOTALL)
    return markdown


def acronyms_in(markdown: str) -> set[str]:
    return {a for a in ACRONYM.findall(strip_markup(markdown)) if not ROMAN.match(a)}


def chapter_acronyms() -> dict[str, str]:
    """Every acronym of a chapter's markdown, with the first place it appears."""
    found: dict[str, str] = {}
    for path in CHAPTERS:
        for i, cell in enumerate(cells(path)):
            if cell["cell_type"] == "markdown":
                for a in sorted(acronyms_in(text(cell))):
                    found.setdefault(a, f"{path.name} cell {i}")
    return found


def glossary(markdown: str) -> dict[str, str]:
    """Acronym -> long form, from the notation page's tables: a row ``| A | long form (...) |``,
    or a first column ``long form (A)``. The long form ends at the first " (", ";" or ":"."""
    out = {}
    for line in markdown.splitlines():
        if not line.startswith("|") or re.match(r"^\|\s*-", line):
            continue
        columns = [c.strip() for c in line.split("|")[1:-1]]
        if len(columns) < 2:
            continue
        first = columns[0]
        inner = re.fullmatch(r"(.+?)\s*\(([^()]+)\)", first)
        if inner and ACRONYM.fullmatch(inner[2]):
            out[inner[2]] = inner[1]
        elif ACRONYM.fullmatch(first):
            out[first] = re.split(r"\s\(|;|:", columns[1])[0].strip()
    return out


def defines(acronym: str, long_form: str) -> re.Pattern:
    """'long form (A', "long form's (A", 'long form, A' or 'A (long form' (A possibly with a
    name's suffix, as in CUB-200-2011, or a lowercase prefix, as in t-SNE), emphasis and case
    of the long form aside."""
    words = r"[\s*_-]+".join(re.escape(w) for w in re.split(r"[\s-]+", long_form))
    a = rf"(?:[a-z]+-)?{re.escape(acronym)}(?![\w@])"
    return re.compile(
        rf"(?i:{words})[*_]*(?:'s)?\s*[(,]\s*[*_]*{a}|{a}(?:-[\w-]+)?[*_]*\s*\(\s*[*_]*(?i:{words})"
    )


def uses(acronym: str) -> re.Pattern:
    """A use of ``acronym``, delimited as :data:`ACRONYM` delimits a token."""
    return re.compile(rf"(?<![\w\\@]){re.escape(acronym)}(?![\w@])")


def acronym_problems(order, found: dict[str, str], notation: str) -> dict[str, str]:
    """Acronym -> why it breaks the rule: no row on the notation page, or first used (in prose,
    code or printed output, in reading order) before the first expansion in prose."""
    listed = glossary(notation)
    read = [(p, strip_markup(body) if kind == "markdown" else body) for p, kind, body in order]
    problems = {}
    for a, where in sorted(found.items()):
        if a in ALLOWED_ACRONYMS:
            continue
        if a not in listed:
            problems[a] = f"{a} (first in {where}) has no row on the notation page"
            continue
        use, define = uses(a), defines(a, listed[a])
        first_use = next((p for p, body in read if a in body and use.search(body)), None)
        first_def = next(
            (
                p
                for p, kind, body in order
                if kind == "markdown" and a in body and define.search(body)  # `in`: fast filter
            ),
            None,
        )
        if first_def is None:
            problems[a] = f"{a}: used in {first_use}, expanded nowhere ('{listed[a]} ({a})')"
        elif first_use is not None and first_def.order > first_use.order:
            problems[a] = f"{a}: used in {first_use} before its expansion in {first_def}"
    return problems


def test_every_acronym_is_on_the_notation_page_and_expanded_before_use():
    problems = acronym_problems(ORDER, chapter_acronyms(), NOTATION.read_text())
    assert problems == {}, "acronyms used before they are expanded:\n" + "\n".join(
        problems.values()
    )


def test_the_acronym_rule_catches_what_it_names():
    notation = (
        "| acronym | expansion |\n| --- | --- |\n"
        "| DRO | distributionally robust optimisation (Chapter 12) |\n"
        "| SNE | stochastic neighbour embedding (t-SNE) |\n"
        "| CUB | Caltech-UCSD Birds (a benchmark) |\n"
        "| metric | meaning |\n| --- | --- |\n| R-Precision (RP) | the fraction ... |\n"
    )
    assert glossary(notation) == {
        "DRO": "distributionally robust optimisation",
        "SNE": "stochastic neighbour embedding",
        "CUB": "Caltech-UCSD Birds",
        "RP": "R-Precision",
    }
    md = "We train with KKT, MAP@R and HAP2S on CUB-200-2011; $\\mathrm{KL}$ and `SGD` are not prose."
    assert acronyms_in(md + " Tables II-IV, R@1, R@K, t-SNE, DRO-TopK-PN.") == {
        "KKT", "MAP@R", "HAP2S", "CUB", "SNE", "DRO", "PN",
    }  # fmt: skip
    p = [Place(n, "01_x.ipynb", n) for n in range(4)]
    order = [
        (p[0], "markdown", "The DRO paper and a t-SNE plot."),
        (p[1], "code", "print('CUB', 'RP')"),
        (p[2], "markdown", "Distributionally robust *optimisation* (DRO) ... **R-Precision** (RP)"),
        (
            p[3],
            "markdown",
            "CUB-200-2011 (Caltech-UCSD Birds) and t-distributed stochastic neighbour embedding (t-SNE)",
        ),
    ]
    found = {a: "01_x.ipynb cell 0" for a in ("DRO", "SNE", "CUB", "RP", "GPU", "NCA")}
    assert acronym_problems(order, found, notation) == {
        "DRO": "DRO: used in 01_x.ipynb cell 0 before its expansion in 01_x.ipynb cell 2",
        "SNE": "SNE: used in 01_x.ipynb cell 0 before its expansion in 01_x.ipynb cell 3",
        "CUB": "CUB: used in 01_x.ipynb cell 1 before its expansion in 01_x.ipynb cell 3",
        "RP": "RP: used in 01_x.ipynb cell 1 before its expansion in 01_x.ipynb cell 2",
        "NCA": "NCA (first in 01_x.ipynb cell 0) has no row on the notation page",
    }
    in_order = [
        (p[0], "markdown", "Stochastic neighbour embedding (t-SNE)? then t-SNE, R-Precision (RP)")
    ]
    assert acronym_problems(in_order, {"SNE": "x", "RP": "x"}, notation) == {}
    never = [(p[0], "code", "DRO")]
    assert acronym_problems(never, {"DRO": "x"}, notation) == {
        "DRO": "DRO: used in 01_x.ipynb cell 0, expanded nowhere "
        "('distributionally robust optimisation (DRO)')"
    }


# ----------------------------------------------------------------------------- reading times


def test_the_introductions_reading_times_are_current():
    intro = INTRO.read_text()
    assert reading_times.START in intro, "book/intro.md has no generated reading-time table"
    start, end = intro.index(reading_times.START), intro.index(reading_times.END)
    stored = intro[start : end + len(reading_times.END)]
    assert stored == reading_times.table(), (
        "book/intro.md's reading times are stale: run `make reading-times` "
        "(python tools/reading_times.py --write)"
    )


def test_reading_times_count_what_the_page_shows():
    def cell(kind, source, *cell_tags, outputs=()):
        return {
            "cell_type": kind,
            "source": source,
            "metadata": {"tags": list(cell_tags)},
            "outputs": list(outputs),
        }

    figure = {"output_type": "display_data", "data": {"image/png": "", "text/plain": "<Figure>"}}
    printed = {"output_type": "stream", "name": "stdout", "text": "a\nb\n"}
    counted = reading_times.count(
        [
            cell("markdown", "one two three"),
            cell("code", "x = 1\n\ny = 2", outputs=[printed, figure]),
            cell("code", "assert x == 1", "remove-input", outputs=[printed]),
            cell("markdown", "## 1.9 Exercises"),
            cell("markdown", "**Exercise 1.1** (derive, ★★). Four words here."),
            cell("markdown", "**Exercise 1.2** (open-ended, ★★★). Left out."),
            cell("markdown", "An answer, not read.", "answer"),
        ]
    )
    assert counted == reading_times.Counts(3, 2, 4, 1, (2,))
    minutes = 3 / 150 + 2 / 12 + 4 / 20 + 1
    assert counted.reading_minutes() == pytest.approx(minutes)
    assert counted.exercise_minutes() == 20
    assert [reading_times.round5(m) for m in (0.4, 7.4, 7.5, 94)] == [5, 5, 10, 95]


def test_reading_rates_reproduce_the_calibration_measurement():
    # Chapter 13 at commit 63064a7, counted by this script (its docstring), measured at ~94 min
    chapter_13 = reading_times.Counts(5097, 525, 242, 4, ())
    measured = reading_times.CALIBRATION["measured_minutes"]
    assert abs(chapter_13.reading_minutes() - measured) < 2.5
