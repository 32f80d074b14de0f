"""MAP.md, the chapter -> module -> test map, is kept from drifting.

Two tables: which package modules each chapter uses (exactly: computed from the chapter's own
imports, resolved to the module that defines each imported name), and which test files check each
module (each listed test must use the module; every test file and every module has a place). A
module, chapter or test added, renamed or removed without the map fails here, with the row to write.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "MAP.md"
CHAPTER_ROW = re.compile(r"^\|\s*\[`?(\d\d_\w+)`?\]\([^)]*\)\s*\|(.*)\|\s*$")
MODULE_ROW = re.compile(r"^\|\s*`(dmlbook/[\w/]+\.py)`\s*\|(.*)\|\s*$")
PATHS = re.compile(r"`((?:dmlbook|tests)/[\w/]+\.py)`")


def read_map() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(chapter -> modules, module -> tests) as written in MAP.md."""
    chapters: dict[str, set[str]] = {}
    modules: dict[str, set[str]] = {}
    for line in MAP.read_text().splitlines():
        if match := CHAPTER_ROW.match(line):
            assert match[1] not in chapters, f"MAP.md lists chapter {match[1]} twice"
            chapters[match[1]] = set(PATHS.findall(match[2]))
        elif match := MODULE_ROW.match(line):
            assert match[1] not in modules, f"MAP.md lists {match[1]} twice"
            modules[match[1]] = set(PATHS.findall(match[2]))
    return chapters, modules


@cache
def package_modules() -> tuple[str, ...]:
    """Every module file, and every package ``__init__.py`` that defines a function or class."""
    found = []
    for path in (ROOT / "dmlbook").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py" and not any(
            isinstance(node, (ast.FunctionDef, ast.ClassDef))
            for node in ast.parse(path.read_text()).body
        ):
            continue
        found.append(path.relative_to(ROOT).as_posix())
    return tuple(sorted(found))


@cache
def top_level_names(path: str) -> frozenset[str]:
    """Names a module defines at top level (functions, classes, assignments)."""
    names = set()
    for node in ast.parse((ROOT / path).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


@cache
def reexports(path: str) -> dict[str, str]:
    """Names a module imports from a sibling package module: name -> dotted origin module."""
    package = path.removesuffix(".py").replace("/", ".").rsplit(".", 1)[0]
    if path.endswith("__init__.py"):
        package = path.removesuffix("/__init__.py").replace("/", ".")
    found = {}
    for node in ast.parse((ROOT / path).read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin = node.module
            if node.level:
                parts = package.split(".")
                origin = ".".join(parts[: len(parts) - node.level + 1] + [node.module])
            if origin.startswith("dmlbook"):
                found.update({a.asname or a.name: origin for a in node.names})
    return found


def resolve(dotted: str, name: str | None, depth: int = 0) -> set[str]:
    """The package module(s) that ``from dotted import name`` (or ``dotted.name``) reaches,
    following re-exports to the module that defines the name."""
    base = ROOT / dotted.replace(".", "/")
    if name is not None and (base / f"{name}.py").is_file():
        return {(base / f"{name}.py").relative_to(ROOT).as_posix()}
    if base.with_suffix(".py").is_file():
        module = base.with_suffix(".py").relative_to(ROOT).as_posix()
        origin = reexports(module).get(name) if name else None
        if origin and depth < 5:
            return {module} | resolve(origin, name, depth + 1)
        return {module}
    if not base.is_dir() or name is None:
        return set()
    prefix = base.relative_to(ROOT).as_posix() + "/"
    return {m for m in package_modules() if m.startswith(prefix) and name in top_level_names(m)}


def modules_used(source: str) -> set[str]:
    """Package modules that Python ``source`` imports names from (or uses through an alias)."""
    used: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dmlbook"):
            for alias in node.names:
                found = resolve(node.module, alias.name)
                used |= found
                if (ROOT / node.module.replace(".", "/") / alias.name).is_dir():
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dmlbook"):
                    used |= resolve(alias.name, None)
                    aliases[alias.asname or alias.name] = alias.name
    for alias, dotted in aliases.items():
        for attr in re.findall(rf"\b{re.escape(alias)}\.(\w+)", source):
            used |= resolve(dotted, attr)
    return used


def chapter_source(stem: str) -> str:
    nb = json.loads((ROOT / "book" / f"{stem}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    # IPython magics and shell escapes are not Python
    return "\n".join(
        line
        for cell in cells
        for line in cell.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    )


def test_every_chapter_row_lists_exactly_the_modules_the_chapter_uses():
    chapters, _ = read_map()
    on_disk = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(chapters) == on_disk, "MAP.md must have one row per chapter of book/"
    for stem, listed in chapters.items():
        used = modules_used(chapter_source(stem))
        assert listed == used, (
            f"{stem}: MAP.md lists {sorted(listed - used)} it does not use and misses "
            f"{sorted(used - listed)}"
        )


def test_every_module_has_a_row_and_its_tests_use_it():
    _, modules = read_map()
    assert sorted(modules) == list(package_modules()), "MAP.md must have one row per package module"
    # every test file that imports from the package (tests of tools/ and of this page do not)
    tests = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if "__pycache__" not in p.parts and modules_used(p.read_text())
    )
    listed = {t for ts in modules.values() for t in ts}
    assert sorted(set(tests) - listed) == [], "test files that MAP.md does not list"
    assert sorted(listed - set(tests)) == [], "MAP.md lists test files that do not exist"
    for module, module_tests in modules.items():
        for test in module_tests:
            assert module in modules_used((ROOT / test).read_text()), (
                f"MAP.md lists {test} for {module}, but the test imports nothing from it"
            )


LOSS_ROW = re.compile(r"^\|(?:[^|]+\|){2}\s*\[(\d\d_\w+)\]\(book/\1\.ipynb\)[^|]*\|(.*)\|\s*$")
SECTION = re.compile(r"\](\([^)]*\))\s+(\d+\.\d+)")
NAMES = re.compile(r"`(\w+)`")


def loss_rows() -> list[list[str]]:
    """The loss table's rows as their cells: loss, equations, chapter section, module, weights
    function, proof, reference loop, tests."""
    rows = []
    for line in MAP.read_text().splitlines():
        if LOSS_ROW.match(line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_every_loss_row_points_at_files_that_point_back():
    rows = loss_rows()
    assert len(rows) >= 10, "MAP.md's loss table is missing"
    for loss, _, section, module, weights, proof, reference, tests in rows:
        chapter = LOSS_ROW.match(f"| a | b | {section} | x |")[1]
        assert SECTION.search(section), f"{loss}: name the chapter's section ({section})"
        assert (ROOT / "book" / f"{chapter}.ipynb").is_file(), chapter
        (module,) = PATHS.findall(module)
        doc = ast.get_docstring(ast.parse((ROOT / module).read_text())) or ""
        assert f"{chapter}.ipynb" in doc, f"{module}'s docstring must name book/{chapter}.ipynb"
        defined = top_level_names(module) | set(reexports(module))
        for name in NAMES.findall(weights):  # a weights function named must be the module's
            if "." not in name and not name.startswith(("T", "dmlbook")):
                assert name in defined or name in _package_names(), f"{loss}: no {name}"
        for path in PATHS.findall(proof):
            assert (ROOT / path).is_file(), f"{loss}: proof {path} does not exist"
        (reference,) = PATHS.findall(reference)
        assert reference.startswith("dmlbook/reference/"), reference
        for test in PATHS.findall(tests):
            used = modules_used((ROOT / test).read_text())
            assert module in used or reference in used, (
                f"{test} uses neither {module} nor {reference}"
            )


@cache
def _package_names() -> frozenset[str]:
    """Every name ``dmlbook.losses`` exports."""
    return frozenset(
        name for m in package_modules() if m.startswith("dmlbook/losses/") for name in
        top_level_names(m)
    )  # fmt: skip


def test_the_loss_table_covers_every_registered_loss():
    from dmlbook.losses import available_losses

    named = {name for row in loss_rows() for name in NAMES.findall(row[0])}
    assert sorted(set(available_losses()) - named) == [], "registered losses MAP.md's table misses"
    assert sorted(named - set(available_losses())) == [], "MAP.md names losses not registered"


def test_resolution_follows_package_reexports_and_aliases():
    source = (
        "import dmlbook.symbolic as sy\nfrom dmlbook.losses import ContrastiveLoss\n"
        "from dmlbook import pairs\nsy.prove_equal(1, 1)\npairs.masked_logsumexp\n"
    )
    used = modules_used(source)
    assert "dmlbook/losses/contrastive.py" in used
    assert "dmlbook/pairs.py" in used
    assert any(m.startswith("dmlbook/symbolic/") for m in used)
    assert "dmlbook/losses/triplet.py" not in used


def test_layer_table_lists_every_module():
    text = MAP.read_text()
    dotted = [
        m.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for m in package_modules()
    ]
    missing = [name for name in dotted if f"`{name}`" not in text]
    assert missing == [], "MAP.md's layer table must list every module"


def mirror_test(module: str) -> str:
    """``tests/x/test_y.py`` for ``dmlbook/x/y.py`` (the layout the conventions ask for)."""
    rel = Path(module).relative_to("dmlbook")
    return (Path("tests") / rel.parent / f"test_{rel.name}").as_posix()


def test_every_module_has_a_mirror_test_that_uses_it():
    modules = [m for m in package_modules() if not m.endswith(("__init__.py", "__main__.py"))]
    missing = [m for m in modules if not (ROOT / mirror_test(m)).is_file()]
    assert missing == [], f"modules without their mirror test file: {missing}"
    unused = [m for m in modules if m not in modules_used((ROOT / mirror_test(m)).read_text())]
    assert unused == [], f"mirror test files that import nothing from their module: {unused}"
