"""The generated parts of MAP.md and CONTRIBUTING.md: the layers, which package modules each
chapter uses, and each module's tests.

``make map`` (``python tools/map_tables.py``) rewrites them in place, between their markers::

    <!-- BEGIN generated: layers ... -->     ...   <!-- END generated: layers -->      (MAP.md)
    <!-- BEGIN generated: chapters ... -->   ...   <!-- END generated: chapters -->
    <!-- BEGIN generated: modules ... -->    ...   <!-- END generated: modules -->
    <!-- BEGIN generated: layer list ... --> ...   <!-- END generated: layer list -->  (CONTRIBUTING.md)

and ``python tools/map_tables.py --check`` (what ``tests/test_map.py`` runs) says which table is
stale without writing. The layers come from their one declaration, ``tools/layers.py`` (each
folder of ``dmlbook/``, bottom up, and its modules as they are on disk). Everything else in
MAP.md (the loss table) and CONTRIBUTING.md is written by hand.

The tables are computed from the sources, statically (``ast``; nothing is imported, so the tool
needs only the standard library):

- a chapter uses the package modules its code cells import names from, each name resolved to the
  module that defines it, through a package's re-exports (``from dmlbook.losses import
  ContrastiveLoss`` counts for ``dmlbook/losses/contrastive.py``) and through aliases
  (``import dmlbook.symbolic as sy`` then ``sy.prove_equal``);
- a module's tests are its mirror test (``dmlbook/x/y.py`` -> ``tests/x/test_y.py``; a package's
  ``dmlbook/x/__init__.py`` -> ``tests/test_x.py``) when that file uses it, then every test file
  that mirrors no module (``tests/losses/test_all_losses.py``, the cross-checks, the book's
  claims) and uses it. A mirror test that also imports another module is listed only under its
  own module: the rows say where a module's tests live, not every file that touches it.

The resolution functions are the ones ``tests/test_map.py`` checks the hand-written tables with.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import textwrap
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from layers import LAYERS, folder_of, layer_of  # noqa: E402  (tools/ is not a package)

MAP = ROOT / "MAP.md"
COMMAND = "make map"
BEGIN = "<!-- BEGIN generated: {name} by `make map` (tools/map_tables.py); do not edit -->"
END = "<!-- END generated: {name} -->"
TABLES = ("layers", "chapters", "modules")  # in MAP.md
#: Where each generated block lives.
FILES = {
    "layers": "MAP.md",
    "chapters": "MAP.md",
    "modules": "MAP.md",
    "layer list": "CONTRIBUTING.md",
}


@cache
def package_modules(root: Path = ROOT) -> tuple[str, ...]:
    """Every module file, and every package ``__init__.py`` that defines a function or class."""
    found = []
    for path in (root / "dmlbook").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py" and not any(
            isinstance(node, (ast.FunctionDef, ast.ClassDef))
            for node in ast.parse(path.read_text()).body
        ):
            continue
        found.append(path.relative_to(root).as_posix())
    return tuple(sorted(found))


@cache
def top_level_names(path: str, root: Path = ROOT) -> frozenset[str]:
    """Names a module defines at top level (functions, classes, assignments)."""
    names = set()
    for node in ast.parse((root / path).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


@cache
def reexports(path: str, root: Path = ROOT) -> dict[str, str]:
    """Names a module imports from a sibling package module: name -> dotted origin module."""
    package = path.removesuffix(".py").replace("/", ".").rsplit(".", 1)[0]
    if path.endswith("__init__.py"):
        package = path.removesuffix("/__init__.py").replace("/", ".")
    found = {}
    for node in ast.parse((root / path).read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin = node.module
            if node.level:
                parts = package.split(".")
                origin = ".".join(parts[: len(parts) - node.level + 1] + [node.module])
            if origin.startswith("dmlbook"):
                found.update({a.asname or a.name: origin for a in node.names})
    return found


def resolve(dotted: str, name: str | None, depth: int = 0, root: Path = ROOT) -> set[str]:
    """The package module(s) that ``from dotted import name`` (or ``dotted.name``) reaches,
    following re-exports to the module that defines the name."""
    base = root / dotted.replace(".", "/")
    if name is not None and (base / f"{name}.py").is_file():
        return {(base / f"{name}.py").relative_to(root).as_posix()}
    if base.with_suffix(".py").is_file():
        module = base.with_suffix(".py").relative_to(root).as_posix()
        origin = reexports(module, root).get(name) if name else None
        if origin and depth < 5:
            return {module} | resolve(origin, name, depth + 1, root)
        return {module}
    if not base.is_dir() or name is None:
        return set()
    prefix = base.relative_to(root).as_posix() + "/"
    return {
        m
        for m in package_modules(root)
        if m.startswith(prefix) and name in top_level_names(m, root)
    }


@cache
def modules_used(source: str, root: Path = ROOT) -> frozenset[str]:
    """Package modules that Python ``source`` imports names from (or uses through an alias)."""
    used: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dmlbook"):
            for alias in node.names:
                used |= resolve(node.module, alias.name, root=root)
                if (root / node.module.replace(".", "/") / alias.name).is_dir():
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dmlbook"):
                    used |= resolve(alias.name, None, root=root)
                    aliases[alias.asname or alias.name] = alias.name
    for alias, dotted in aliases.items():
        for attr in re.findall(rf"\b{re.escape(alias)}\.(\w+)", source):
            used |= resolve(dotted, attr, root=root)
    return frozenset(used)


def chapter_stems(root: Path = ROOT) -> list[str]:
    """The chapters and appendices of ``book/`` (``NN_name``), in reading order."""
    return sorted(p.stem for p in (root / "book").glob("[0-9][0-9]_*.ipynb"))


def chapter_source(stem: str, root: Path = ROOT) -> str:
    """A chapter's code cells as one Python source (IPython magics and shell escapes left out)."""
    nb = json.loads((root / "book" / f"{stem}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    return "\n".join(
        line
        for cell in cells
        for line in cell.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    )


def mirror_test(module: str) -> str:
    """``tests/x/test_y.py`` for ``dmlbook/x/y.py``; ``tests/test_x.py`` for ``dmlbook/x/__init__.py``."""
    rel = Path(module).relative_to("dmlbook")
    if rel.name == "__init__.py":
        if rel.parent == Path("."):
            return "tests/test_dmlbook.py"
        rel = rel.parent.with_suffix(".py")
    return (Path("tests") / rel.parent / f"test_{rel.name}").as_posix()


def test_files(root: Path = ROOT) -> dict[str, set[str]]:
    """Every test file that imports from the package -> the package modules it uses."""
    found = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        if "__pycache__" in path.parts:
            continue
        used = modules_used(path.read_text(), root)
        if used:
            found[path.relative_to(root).as_posix()] = used
    return found


def module_tests(root: Path = ROOT) -> dict[str, list[str]]:
    """Each package module -> its tests (its mirror first, then the cross-cutting test files)."""
    modules = package_modules(root)
    tests = test_files(root)
    mirrors = {mirror_test(m) for m in modules}
    rows = {}
    for module in modules:
        own = mirror_test(module)
        listed = [own] if module in tests.get(own, ()) else []
        listed += [t for t, used in tests.items() if t not in mirrors and module in used]
        rows[module] = listed
    return rows


def _codes(paths) -> str:
    return ", ".join(f"`{p}`" for p in paths) or "-"


def chapters_table(root: Path = ROOT) -> str:
    lines = ["| chapter | modules |", "| --- | --- |"]
    for stem in chapter_stems(root):
        used = sorted(modules_used(chapter_source(stem, root), root))
        lines.append(f"| [{stem}](book/{stem}.ipynb) | {_codes(used)} |")
    return "\n".join(lines)


def modules_table(root: Path = ROOT) -> str:
    lines = ["| module | tests |", "| --- | --- |"]
    for module, tests in module_tests(root).items():
        lines.append(f"| `{module}` | {_codes(tests)} |")
    return "\n".join(lines)


def _layer_modules(root: Path) -> dict[str, list[str]]:
    """Each layer's package -> the dotted names of its modules (``package_modules``)."""
    found: dict[str, list[str]] = {layer.package: [] for layer in LAYERS}
    for module in package_modules(root):
        name = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        found[LAYERS[layer_of(name)].package].append(name)
    return found


def layers_table(root: Path = ROOT) -> str:
    """MAP.md's layer table: each folder bottom up, its modules, what it holds."""
    lines = ["| layer | folder | modules | contents |", "| --- | --- | --- | --- |"]
    for layer, (package, modules) in zip(LAYERS, _layer_modules(root).items(), strict=True):
        folder = f"`{folder_of(package)}/`"
        lines.append(f"| {layer.title} | {folder} | {_codes(modules)} | {layer.contents} |")
    return "\n".join(lines)


def layer_list(root: Path = ROOT) -> str:
    """CONTRIBUTING.md's numbered list of the layers, bottom up."""
    return "\n".join(
        textwrap.fill(
            f"{n}. `{folder_of(layer.package)}/` {layer.title}: {layer.contents}.",
            width=100,
            subsequent_indent="   " if n < 10 else "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        for n, layer in enumerate(LAYERS, 1)
    )


GENERATORS = {
    "layers": layers_table,
    "chapters": chapters_table,
    "modules": modules_table,
    "layer list": layer_list,
}


def block(name: str, root: Path = ROOT) -> str:
    """A generated table with its markers, as it stands in MAP.md."""
    return f"{BEGIN.format(name=name)}\n{GENERATORS[name](root)}\n{END.format(name=name)}"


def _span(text: str, name: str, file: str = "MAP.md") -> tuple[int, int]:
    begin = text.find(BEGIN.format(name=name))
    end = text.find(END.format(name=name))
    if begin < 0 or end < begin:
        raise ValueError(
            f"{file}: the markers of the generated {name} table are missing; put the lines\n"
            f"{BEGIN.format(name=name)}\n{END.format(name=name)}\nwhere the table belongs, "
            f"then run `{COMMAND}`"
        )
    return begin, end + len(END.format(name=name))


def stale(root: Path = ROOT) -> list[str]:
    """The generated blocks (MAP.md's tables, CONTRIBUTING.md's layer list) that differ from
    what the sources give."""
    out = []
    for name, file in FILES.items():
        text = (root / file).read_text()
        begin, end = _span(text, name, file)
        if text[begin:end] != block(name, root):
            out.append(name)
    return out


def write(root: Path = ROOT) -> list[str]:
    """Rewrite the generated blocks in place; the names of those that changed."""
    changed = []
    for file in dict.fromkeys(FILES.values()):
        path = root / file
        text = path.read_text()
        before = text
        for name in [n for n, f in FILES.items() if f == file]:
            begin, end = _span(text, name, file)
            new = block(name, root)
            if text[begin:end] != new:
                changed.append(name)
                text = text[:begin] + new + text[end:]
        if text != before:
            path.write_text(text)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="say what is stale, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"{FILES[name]}: the {name} table is stale; run `{COMMAND}`")
        return 1 if names else 0
    changed = write()
    tables = " and ".join(changed) + (" tables" if len(changed) > 1 else " table")
    print(f"rewrote the {tables}" if changed else "MAP.md and CONTRIBUTING.md: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
