"""Every file path and every dotted ``dmlbook.`` name the prose mentions exists.

The prose: the docstrings of the package (and of ``tools/``, ``bench/`` and ``tests/``), the
chapters' markdown cells and ``book/intro.md``, the README, CONTRIBUTING.md, MAP.md, the pages
under ``docs/`` and the benchmark results (``bench/results/**/*.md``). In it:

- a path that starts at a folder or file of the repository (``dmlbook/``, ``tests/``, ``book/``,
  ``bench/``, ``tools/``, ``configs/``, ``coursework/``, ``docs/``, ``.ci/``, ``README.md`` ...)
  must exist; a path with ``*`` must match something; one with a placeholder (``<name>``) is a
  pattern and only its fixed start is checked;
- a markdown link to a local file must reach it from the page that holds it (a page of
  ``docs/`` links relative to ``docs/``, a chapter relative to ``book/``);
- a dotted name (``dmlbook.losses.get_loss``) must import and resolve attribute by attribute.

A failure names the place (file, and the docstring's object or the chapter's cell) and the
dangling name. Paths that name what a build or a run creates, or the layout inside the wheel,
are listed in :data:`NOT_IN_THE_TREE` with the reason.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = r"(?:dmlbook|tests|book|bench|tools|configs|coursework|docs|\.ci)/"
ROOT_FILES = r"(?:README|MAP|CONTRIBUTING)\.md|pyproject\.toml|constraints\.txt|environment\.yml"
#: A path from the repository's root: a top folder and what follows, or a root file.
PATH = re.compile(rf"(?<![\w./~$-])((?:{TOP}[\w./*<>{{}}-]*|(?:{ROOT_FILES})\b))")
#: A dotted name of the package (not a file name: ``dmlbook.egg-info``, not a path part).
DOTTED = re.compile(r"(?<![\w./-])(dmlbook(?:\.[A-Za-z_]\w*)+)(?![\w/-]|\.[a-z]{2,4}\b)")
LINK = re.compile(r"\]\(([^)\s]+)\)")

#: Paths that name no file of the source tree, by design (a pattern, and why).
NOT_IN_THE_TREE = {
    r"^dmlbook/configs/": "where the wheel carries configs/ (setup.py); tests/test_wheel.py checks it",
    r"^dmlbook/x/y\.py$|^tests/x/test_y\.py$|^dmlbook/x/__init__\.py$|^tests/test_x\.py$": (
        "the mirror layout's pattern"
    ),
    r"^book/NN_|^book/\d\d_x\.ipynb$": "a chapter's file-name pattern",
    r"^book/_build/": "what rendering writes",
}


def documents() -> list[Path]:
    """Every prose file checked here (docstrings are read from the package's sources)."""
    files = [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "MAP.md", "book/intro.md")]
    files += sorted((ROOT / "docs").glob("**/*.md"))
    files += sorted((ROOT / "bench" / "results").glob("**/*.md"))
    files += sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    return [f for f in files if f.is_file()]


def passages(path: Path) -> list[tuple[str, str]]:
    """(place, text) for each passage of prose in ``path``."""
    rel = path.relative_to(ROOT).as_posix()
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return [
            (f"{rel}, cell {i}", "".join(c["source"]))
            for i, c in enumerate(cells)
            if c["cell_type"] == "markdown"
        ]
    if path.suffix == ".py":
        out = []
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    name = getattr(node, "name", "module docstring")
                    out.append((f"{rel}, {name} (line {getattr(node, 'lineno', 1)})", doc))
        return out
    return [(rel, path.read_text())]


def python_sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def path_exists(token: str) -> bool:
    token = token.rstrip(".,:;")
    if any(re.search(pattern, token) for pattern in NOT_IN_THE_TREE):
        return True
    if "<" in token or "{" in token:  # a pattern: its fixed start must exist
        fixed = re.split(r"[<{]", token, maxsplit=1)[0]
        return (ROOT / fixed.rsplit("/", 1)[0]).exists()
    if "*" in token:
        return any(ROOT.glob(token))
    return (ROOT / token).exists()


#: Pages ``make book`` writes beside the chapters (``tools/book.py``, ``prepare``): the API reference
#: and the errata page exist only in the build, so a chapter's link to them is checked by name.
BUILT_PAGES = {"api.md", "errata.md"}


def link_exists(document: Path, target: str) -> bool:
    target = target.split("#", 1)[0]
    if not target or re.match(r"^[a-z][a-z+.-]*:", target):  # an anchor, a URL, mailto:
        return True
    if document.parent == ROOT / "book" and target in BUILT_PAGES:
        return True
    return (document.parent / target).exists()


@cache
def name_resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        prefix = ".".join(parts[: i + 1])
        if part == "__main__":  # importing it would run the command line
            return importlib.util.find_spec(prefix) is not None
        try:  # a submodule first: a package may re-export a function of the same name
            obj = importlib.import_module(prefix)
        except ImportError:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
    return True


def dangling_in(document: Path) -> list[str]:
    """``place: name`` for every path, link or dotted name of ``document`` that resolves nowhere."""
    found = []
    for place, text in passages(document):
        for token in PATH.findall(text):
            if not path_exists(token):
                found.append(f"{place}: {token}")
        if document.suffix != ".py":
            for target in LINK.findall(text):
                if not link_exists(document, target):
                    found.append(f"{place}: link ({target})")
        for dotted in DOTTED.findall(text):
            if not name_resolves(dotted.rstrip(".")):
                found.append(f"{place}: {dotted}")
    return found


DOCSTRINGS = ("dmlbook", "tools", "bench", "tests")


@pytest.mark.parametrize(
    "document",
    documents() + [pytest.param(f, id=f"{f}/ docstrings") for f in DOCSTRINGS],
    ids=lambda d: d.relative_to(ROOT).as_posix() if isinstance(d, Path) else None,
)
def test_every_path_and_dotted_name_resolves(document):
    sources = python_sources(document) if isinstance(document, str) else [document]
    dangling = [entry for path in sources for entry in dangling_in(path)]
    assert dangling == [], "names that point nowhere:\n" + "\n".join(dangling)


def test_the_scanner_finds_what_dangles(tmp_path):
    """A renamed module, a moved file, a broken link and a missing attribute are each reported;
    existing ones, URLs, patterns and what a build creates are not."""
    page = ROOT / "book" / "example.md"  # links resolve from the page's folder
    text = (
        "`dmlbook/losses/contrastive.py`, `dmlbook/losses/no_such_loss.py`, "
        "`bench/results/gone.md`, `tests/test_x.py`, `bench/results/gpu_check_<device>/`, "
        "`tests/test_map*.py`, `tests/test_nothing*.py`, [ok](../MAP.md), [bad](MAP.md), "
        "[web](https://example.org/x.md), `dmlbook.losses.get_loss`, `dmlbook.losses.no_such`, "
        "`dmlbook.no_module.x`, dmlbook.chapters.notebook.show_source(f), `build/book/x.html`."
    )
    found = []
    for token in PATH.findall(text):
        if not path_exists(token):
            found.append(token)
    found += [t for t in LINK.findall(text) if not link_exists(page, t)]
    found += [d for d in DOTTED.findall(text) if not name_resolves(d)]
    assert found == [
        "dmlbook/losses/no_such_loss.py",
        "bench/results/gone.md",
        "tests/test_nothing*.py",
        "MAP.md",
        "dmlbook.losses.no_such",
        "dmlbook.no_module.x",
    ]


def test_the_built_pages_a_chapter_may_link_are_the_ones_make_book_writes():
    source = (ROOT / "tools" / "book.py").read_text()
    assert all(f'(out / "{page}")' in source for page in BUILT_PAGES)
