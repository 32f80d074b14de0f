"""Move the package into its layers (issue 37, item 2): ``python tools/relayout.py --apply``.

The old -> new module mapping is declared once, here (:data:`MOVES`); the layers themselves, in
order, are declared in ``tools/layers.py``. ``--apply``

1. refuses to start, listing them, while a module under ``dmlbook/`` is placed by neither
   :data:`MOVES` (as an old or a new path) nor :data:`STAY` (a folder that stays where it is),
   or while a mapped module is at neither of its two paths: extend the mapping, then run again;
2. rewrites every reference in the tracked text files of the repository, each file read where it
   is now: Python imports (absolute and relative, ``from . import x`` too, inside functions too;
   a relative import stays relative, re-expressed from the file's new folder), the relative
   module strings of a lazy package face (``_LAZY = {"setup": ".notebook"}``), dotted names
   (``dmlbook.core.pairs``) in any text (code, docstrings, notebook sources and stored outputs, Markdown,
   TOML, YAML, CSV, bench results), and the paths (``dmlbook/core/pairs.py``, ``tests/core/test_pairs.py``);
3. moves the modules with ``git mv``, and their mirror tests with them (``dmlbook/x/y.py`` is
   tested in ``tests/x/test_y.py``), writes each new folder's ``__init__.py`` (its layer's line
   of ``tools/layers.py``; an empty one beside the tests), applies the few edits a move needs
   inside a module (:data:`FIXUPS`: a path computed from ``__file__``);
4. sorts the imports it rewrote and formats the Python files it touched (``ruff``).

It is idempotent: run again, it changes nothing. ``--check`` prints the plan and writes nothing.
Notebooks keep their JSON format (indent, key order, ``ensure_ascii``, final newline): a
notebook whose text does not round-trip through ``json`` is refused, not reformatted. Afterwards
run ``make map`` (MAP.md's and CONTRIBUTING.md's generated tables).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from layers import LAYERS, folder_of  # noqa: E402

#: Old module file -> new module file; one line per module that moves.
MOVES: dict[str, str] = {
    # core: pair algebra and the basics every layer shares
    "dmlbook/similarity.py": "dmlbook/core/similarity.py",
    "dmlbook/pairs.py": "dmlbook/core/pairs.py",
    "dmlbook/pair_lists.py": "dmlbook/core/pair_lists.py",
    "dmlbook/validation.py": "dmlbook/core/validation.py",
    "dmlbook/gpw.py": "dmlbook/core/gpw.py",
    "dmlbook/reproducibility.py": "dmlbook/core/reproducibility.py",
    "dmlbook/progress.py": "dmlbook/core/progress.py",
    # gradient surgery's trainable module joins the losses (surgery no longer imports them)
    "dmlbook/surgery/loss.py": "dmlbook/losses/gradient_surgery.py",
    # data, split by what it does
    "dmlbook/data/dataset.py": "dmlbook/data/base/dataset.py",
    "dmlbook/data/errors.py": "dmlbook/data/base/errors.py",
    "dmlbook/data/files.py": "dmlbook/data/base/files.py",
    "dmlbook/data/locations.py": "dmlbook/data/base/locations.py",
    "dmlbook/data/atomic.py": "dmlbook/data/base/atomic.py",
    "dmlbook/data/sampler.py": "dmlbook/data/batches/sampler.py",
    "dmlbook/data/random_sampler.py": "dmlbook/data/batches/random_sampler.py",
    "dmlbook/data/augment.py": "dmlbook/data/batches/augment.py",
    "dmlbook/data/normalization.py": "dmlbook/data/batches/normalization.py",
    "dmlbook/data/affine.py": "dmlbook/data/batches/affine.py",
    "dmlbook/data/image_decode.py": "dmlbook/data/cache/image_decode.py",
    "dmlbook/data/image_cache_file.py": "dmlbook/data/cache/image_cache_file.py",
    "dmlbook/data/cached_dataset.py": "dmlbook/data/cache/cached_dataset.py",
    "dmlbook/data/image_cache.py": "dmlbook/data/cache/image_cache.py",
    "dmlbook/data/benchmark.py": "dmlbook/data/benchmarks/benchmark.py",
    "dmlbook/data/image_folder.py": "dmlbook/data/benchmarks/image_folder.py",
    "dmlbook/data/cub.py": "dmlbook/data/benchmarks/cub.py",
    "dmlbook/data/cars.py": "dmlbook/data/benchmarks/cars.py",
    "dmlbook/data/sop.py": "dmlbook/data/benchmarks/sop.py",
    "dmlbook/data/inshop.py": "dmlbook/data/benchmarks/inshop.py",
    "dmlbook/data/transfer.py": "dmlbook/data/fetch/transfer.py",
    "dmlbook/data/archive.py": "dmlbook/data/fetch/archive.py",
    "dmlbook/data/download.py": "dmlbook/data/fetch/download.py",
    "dmlbook/data/omniglot.py": "dmlbook/data/handwritten/omniglot.py",
    "dmlbook/data/omniglot_layout.py": "dmlbook/data/handwritten/omniglot_layout.py",
    "dmlbook/data/digits.py": "dmlbook/data/handwritten/digits.py",
    "dmlbook/data/synthetic.py": "dmlbook/data/generated/synthetic.py",
    "dmlbook/data/synthetic_classes.py": "dmlbook/data/generated/synthetic_classes.py",
    "dmlbook/data/synthetic_render.py": "dmlbook/data/generated/synthetic_render.py",
    # evaluation
    "dmlbook/oneshot.py": "dmlbook/evaluate/oneshot.py",
    # the papers
    "dmlbook/paper_results.py": "dmlbook/papers/paper_results.py",
    "dmlbook/errata.py": "dmlbook/papers/errata.py",
    # the chapters' helpers
    "dmlbook/notebook.py": "dmlbook/chapters/notebook.py",
    "dmlbook/profile.py": "dmlbook/chapters/profile.py",
    "dmlbook/openmp.py": "dmlbook/chapters/openmp.py",
    "dmlbook/palette.py": "dmlbook/chapters/palette.py",
    "dmlbook/plots.py": "dmlbook/chapters/plots.py",
    "dmlbook/curves.py": "dmlbook/chapters/curves.py",
    "dmlbook/explorer.py": "dmlbook/chapters/explorer.py",
    "dmlbook/explorer_html.py": "dmlbook/chapters/explorer_html.py",
    "dmlbook/explorer_widget.py": "dmlbook/chapters/explorer_widget.py",
    # exercises and coursework
    "dmlbook/assignment_rules.py": "dmlbook/exercises/assignment_rules.py",
}

#: Folders whose modules stay where they are (new modules there are placed too), and single files.
STAY_FOLDERS: tuple[str, ...] = (
    "dmlbook/mining",
    "dmlbook/surgery",
    "dmlbook/losses",
    "dmlbook/reference",
    "dmlbook/symbolic",
    "dmlbook/models",
    "dmlbook/evaluate",
    "dmlbook/training",
    "dmlbook/engine",
    "dmlbook/studies",
    "dmlbook/exercises",
)
STAY_FILES: tuple[str, ...] = (
    "dmlbook/__init__.py",
    "dmlbook/__main__.py",
    "dmlbook/cli.py",
    "dmlbook/data/__init__.py",
    "dmlbook/data/registry.py",
    # modules written after the move, in their layer's folder from the start
    "dmlbook/chapters/pair_figures.py",
    "dmlbook/core/declaration.py",
)

#: The edits a move needs inside a module, by its new path: (text before, text after). A path
#: computed from ``__file__`` that pointed at the package root (or at ``dmlbook/data``) from the
#: old folder, one level up.
FIXUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "dmlbook/papers/paper_results.py": (
        (
            'DATA = Path(__file__).resolve().parent / "data"',
            'DATA = Path(__file__).resolve().parents[1] / "data"',
        ),
    ),
    "dmlbook/exercises/assignment_rules.py": (
        (
            "_PACKAGE = os.path.realpath(Path(__file__).parent) + os.sep",
            "_PACKAGE = os.path.realpath(Path(__file__).parents[1]) + os.sep",
        ),
    ),
}

#: Prose a move makes wrong, by new path: (text before, text after), applied where still found
#: (an owner may have reworded it already; nothing fails if it is gone).
REWORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "dmlbook/losses/gradient_surgery.py": (
        (
            "It lives beside the parts it trains rather than among the losses (it is a designed"
            " gradient,\nnot the gradient of a loss) and registers itself,",
            "It lives among the losses, on the parts of :mod:`dmlbook.surgery` that it trains (it"
            " is a\ndesigned gradient, not the gradient of a loss), and registers itself,",
        ),
    ),
    "dmlbook/losses/__init__.py": (
        (
            "# Last: the designed-gradient module lives in dmlbook.surgery and registers itself on"
            " import.",
            "# Last: the designed-gradient module (gradient_surgery.py, built on dmlbook.surgery)"
            " registers itself on import.",
        ),
    ),
}

#: Files never rewritten: this script and its test hold the old names on purpose, the layers'
#: declaration and the import-graph test are written for the new layout already.
SKIP = (
    "tools/relayout.py",
    "tests/test_relayout.py",
    "tools/layers.py",
    "tests/test_import_graph.py",
)
BINARY = (".npz", ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".zip", ".gz", ".tar", ".pt", ".pth")


# ---------------------------------------------------------------------------------------------
# The mapping, derived


def mirror_test(module: str) -> str:
    """``tests/x/test_y.py`` for ``dmlbook/x/y.py`` (as ``tests/test_map.py`` demands)."""
    parts = module.split("/")[1:]
    return "/".join(["tests", *parts[:-1], f"test_{parts[-1]}"])


def dotted(path: str) -> str:
    """``dmlbook.data.cache`` for ``dmlbook/data/cache/__init__.py`` or ``.../cache.py``."""
    name = path.removesuffix(".py").removesuffix("/__init__")
    return name.replace("/", ".")


def file_moves(moves: dict[str, str] = MOVES, root: Path = ROOT) -> dict[str, str]:
    """Every file that moves: the modules, and the mirror test of each where it exists (at its
    old or its new path)."""
    out = dict(moves)
    for old, new in moves.items():
        old_test, new_test = mirror_test(old), mirror_test(new)
        if (root / old_test).exists() or (root / new_test).exists():
            out[old_test] = new_test
    return out


def check_mapping(moves: dict[str, str]) -> None:
    """No new name may begin with an old one (a second run would move it again), no two old
    names may meet in one new name, and each move keeps a module a module."""
    olds = {dotted(o) for o in moves}
    news = [dotted(n) for n in moves.values()]
    assert len(set(news)) == len(news), "two modules move to the same place"
    for new in news:
        for old in olds:
            assert not (new == old or new.startswith(old + ".")), f"{new} begins with {old}"
    for old, new in moves.items():
        assert old.endswith(".py") and new.endswith(".py"), (old, new)


def unplaced(
    moves: dict[str, str] = MOVES,
    stay_folders: tuple[str, ...] = STAY_FOLDERS,
    stay_files: tuple[str, ...] = STAY_FILES,
    root: Path = ROOT,
    layers: tuple = LAYERS,
) -> tuple[list[str], list[str]]:
    """(modules under ``dmlbook/`` that the mapping does not place, mapped modules found at
    neither of their paths)."""
    new_inits = {f"{folder_of(layer.package)}/__init__.py" for layer in layers}
    placed = set(moves) | set(moves.values()) | set(stay_files) | new_inits
    lost = []
    for path in sorted((root / "dmlbook").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        if rel in placed or rel.rsplit("/", 1)[0] in stay_folders:
            continue
        lost.append(rel)
    missing = [
        f"{old} -> {new}"
        for old, new in moves.items()
        if not (root / old).exists() and not (root / new).exists()
    ]
    return lost, missing


# ---------------------------------------------------------------------------------------------
# Rewriting one text


class Rewriter:
    """Rewrites the references of one repository's files, given its file moves."""

    def __init__(self, files: dict[str, str], modules: set[str]):
        self.files = files  # old path -> new path (modules and tests)
        self.names = {dotted(o): dotted(n) for o, n in files.items() if o.startswith("dmlbook/")}
        self.modules = modules  # dotted names of every module and package there is now
        self.path_re = re.compile(
            r"(?<![\w.-])(" + "|".join(re.escape(p) for p in sorted(files, key=len)[::-1]) + r")"
            r"(?![\w/])"
        )
        self.dotted_re = re.compile(r"(?<![\w.])dmlbook(?:\.\w+)+")
        self.escaped_re = re.compile(r"(?<![\w.\\])dmlbook(?:\\\.\w+)+")  # in a regex
        inner = {o[len("dmlbook/") :]: n[len("dmlbook/") :] for o, n in files.items()}
        self.inner = {o: n for o, n in inner.items() if "/" in o and not o.startswith("tests/")}
        self.inner_re = re.compile(
            r"""(["'])(""" + "|".join(re.escape(p) for p in self.inner) + r")\1"
        )

    # -- names and paths in any text

    def name(self, name: str) -> str:
        """The new dotted name of ``name`` (a module, or a module and attributes)."""
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            head = ".".join(parts[:cut])
            if head in self.names:
                return ".".join([self.names[head], *parts[cut:]])
        return name

    def text(self, text: str) -> str:
        """Dotted names and file paths rewritten (any kind of text)."""
        text = self.dotted_re.sub(lambda m: self.name(m.group(0)), text)
        text = self.escaped_re.sub(
            lambda m: self.name(m.group(0).replace("\\.", ".")).replace(".", "\\."), text
        )
        return self.path_re.sub(lambda m: self.files[m.group(1)], text)

    # -- Python

    @staticmethod
    def _package(path: str) -> list[str]:
        """The package a file's relative imports start from, as path parts."""
        return path.removesuffix(".py").split("/")[:-1]

    def _express(self, target: list[str], here: list[str], relative: bool) -> str:
        """The ``from`` part that names ``target`` (path parts) from package ``here``."""
        if not relative:
            return ".".join(target)
        common = 0
        while common < min(len(target), len(here)) and target[common] == here[common]:
            common += 1
        if target[0] == "tests" and common <= 1:
            # tests/ is no package: a helper of another test folder is imported from the root
            # pytest puts on the path (``from surgery.strategies import ...``)
            return ".".join(target[1:])
        return "." * (len(here) - common + 1) + ".".join(target[common:])

    def _is_module(self, parts: list[str]) -> bool:
        return ".".join(parts) in self.modules

    def _new_parts(self, parts: list[str]) -> list[str]:
        key = "/".join(parts)
        for candidate in (key + ".py", key + "/__init__.py"):
            if candidate in self.files:
                return (
                    self.files[candidate].removesuffix(".py").removesuffix("/__init__").split("/")
                )
        return parts

    def _import_from(self, node: ast.ImportFrom, old: str, new: str, segment: str) -> str | None:
        here_old, here_new = self._package(old), self._package(new)
        if node.level:
            cut = len(here_old) - node.level + 1
            if cut < 1:
                return None
            base = here_old[:cut] + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == "dmlbook":
            base = node.module.split(".")
        else:
            return None
        groups: dict[tuple[str, ...], list[str]] = {}
        renamed = False  # an imported module's own name changes, or the names part
        for alias in node.names:
            full = [*base, alias.name]
            if alias.name != "*" and self._is_module(full):
                target = self._new_parts(full)
                where, name = tuple(target[:-1]), target[-1]
                asname = alias.asname or (alias.name if name != alias.name else None)
                renamed |= name != alias.name or list(where) != base
            else:
                where, name, asname = tuple(self._new_parts(base)), alias.name, alias.asname
            groups.setdefault(where, []).append(f"{name} as {asname}" if asname else name)
        relative = bool(node.level)
        old_module = "." * node.level + (node.module or "")
        if len(groups) == 1 and not renamed:
            ((where, _),) = groups.items()
            module = self._express(list(where), here_new, relative)
            if module == old_module:
                return None
            # only the module changes: keep the statement as written (comments, wrapping)
            head = re.match(r"from\s+(\S+)\s+import", segment)
            if head and head.group(1) == old_module:
                return segment[: head.start(1)] + module + segment[head.end(1) :]
        lines = []
        for where, names in groups.items():
            module = self._express(list(where), here_new, relative)
            lines.append(f"from {module} import {', '.join(names)}")
        return "\n".join(lines)

    def _import(self, node: ast.Import) -> str | None:
        names = []
        changed = False
        for alias in node.names:
            new = self.name(alias.name) if alias.name.split(".")[0] == "dmlbook" else alias.name
            changed |= new != alias.name
            names.append(f"{new} as {alias.asname}" if alias.asname else new)
        return f"import {', '.join(names)}" if changed else None

    def _lazy_string(self, node: ast.Constant, old: str, new: str) -> str | None:
        """A relative module string (``".notebook"``) of a file under ``dmlbook/``."""
        value = node.value
        if not re.fullmatch(r"\.+[A-Za-z_][\w.]*", value):
            return None
        level = len(value) - len(value.lstrip("."))
        here_old = self._package(old)
        cut = len(here_old) - level + 1
        if cut < 1:
            return None
        parts = here_old[:cut] + value[level:].split(".")
        if not self._is_module(parts):
            return None
        target = self._new_parts(parts)
        expressed = self._express(target, self._package(new), True)
        return expressed if expressed != value else None

    def python(self, source: str, old: str, new: str) -> str:
        """Imports of a Python source at ``old`` rewritten for ``new``, then names and paths."""
        masked = "\n".join(
            "#" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
        )
        try:
            tree = ast.parse(masked)
        except SyntaxError:
            return self.text(source)
        lines = source.split("\n")
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)

        def span(node: ast.AST) -> tuple[int, int]:
            start = offsets[node.lineno - 1] + len(
                lines[node.lineno - 1].encode()[: node.col_offset].decode()
            )
            end = offsets[node.end_lineno - 1] + len(
                lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode()
            )
            return start, end

        edits = []
        for node in ast.walk(tree):
            replacement = None
            if isinstance(node, ast.ImportFrom):
                start, end = span(node)
                replacement = self._import_from(node, old, new, source[start:end])
                if replacement is not None and "\n" in replacement:
                    indent = " " * node.col_offset
                    replacement = replacement.replace("\n", "\n" + indent)
            elif isinstance(node, ast.Import):
                replacement = self._import(node)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and old.startswith("dmlbook/")
            ):
                found = self._lazy_string(node, old, new)
                if found is not None:
                    start, end = span(node)
                    quote = source[start]
                    replacement = quote + found + quote
            if replacement is not None:
                edits.append((*span(node), replacement))
        for start, end, replacement in sorted(edits, reverse=True):
            source = source[:start] + replacement + source[end:]
        source = _above(source, new.count("/") - old.count("/"))
        if self.inner:  # a path inside the package, quoted: "data/locations.py"
            source = self.inner_re.sub(lambda m: m[1] + self.inner[m[2]] + m[1], source)
        return self.text(source)

    # -- notebooks

    def notebook(self, text: str, old: str, new: str) -> str:
        """A notebook's code cells rewritten as Python, everything else (markdown, outputs, the
        cells' and the notebook's metadata) as text, in the file's own JSON format."""
        nb = json.loads(text)
        fmt = _json_format(text, nb)
        if fmt is None:
            raise SystemExit(f"{old}: its JSON does not round-trip; refusing to rewrite it")
        for cell in nb.get("cells", []):
            source = cell.get("source", "")
            source = source if isinstance(source, str) else "".join(source)
            if cell.get("cell_type") == "code":
                rewritten = self.python(source, old, new)
            else:
                rewritten = self.text(source)
            if rewritten != source:
                cell["source"] = rewritten.splitlines(keepends=True)
            for key in ("outputs", "metadata"):  # metadata: e.g. the tests otter embeds
                if cell.get(key):
                    cell[key] = json.loads(self.text(json.dumps(cell[key])))
        if nb.get("metadata"):
            nb["metadata"] = json.loads(self.text(json.dumps(nb["metadata"])))
        sort_keys, ensure_ascii, end = fmt
        return json.dumps(nb, indent=1, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + end

    def file(self, text: str, old: str, new: str) -> str:
        if old.endswith(".py"):
            return self.python(text, old, new)
        if old.endswith(".ipynb"):
            return self.notebook(text, old, new)
        return self.text(text)


_ABOVE = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent){2,}|\.parents\[(\d+)\])")


def _above(source: str, deeper: int) -> str:
    """A path computed from ``__file__`` that climbs above the file's own folder
    (``.parent.parent``, ``.parents[1]``) climbs ``deeper`` more levels in a file moved down.
    (``Path(__file__).parent``, the file's own folder, is left alone: see :data:`FIXUPS`.)"""

    def climb(match: re.Match) -> str:
        levels = int(match.group(3)) + 1 if match.group(3) else match.group(2).count(".parent")
        if levels < 2:
            return match.group(0)
        return f"{match.group(1)}.parents[{levels + deeper - 1}]"

    return _ABOVE.sub(climb, source) if deeper else source


def _json_format(text: str, nb: dict) -> tuple[bool, bool, str] | None:
    for sort_keys in (True, False):
        for ensure_ascii in (False, True):
            dumped = json.dumps(nb, indent=1, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
            for end in ("\n", ""):
                if dumped + end == text:
                    return sort_keys, ensure_ascii, end
    return None


# ---------------------------------------------------------------------------------------------
# The repository


def tracked(root: Path = ROOT) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return sorted(p for p in out.split("\0") if p and (root / p).is_file())


def current_modules(root: Path = ROOT) -> set[str]:
    """Dotted names of every module and package (``dmlbook`` and ``tests``) on disk now."""
    found = set()
    for top in ("dmlbook", "tests"):
        for path in (root / top).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.add(dotted(path.relative_to(root).as_posix()))
    return found


def plan(
    root: Path = ROOT,
    moves: dict[str, str] = MOVES,
    stay_folders: tuple[str, ...] = STAY_FOLDERS,
    stay_files: tuple[str, ...] = STAY_FILES,
    layers: tuple = LAYERS,
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(file moves still to do, rewritten text of each file that changes, new ``__init__.py``
    files to write)."""
    check_mapping(moves)
    lost, missing = unplaced(moves, stay_folders, stay_files, root, layers)
    if lost or missing:
        lines = ["tools/relayout.py: the mapping is incomplete; extend MOVES or STAY_FOLDERS:"]
        lines += [f"  not placed: {p}" for p in lost]
        lines += [f"  at neither path: {m}" for m in missing]
        raise SystemExit("\n".join(lines))
    files = file_moves(moves, root)
    todo = {}
    for old, new in files.items():
        if (root / old).exists():
            if (root / new).exists():
                raise SystemExit(f"{old} and {new} both exist: move by hand, then run again")
            todo[old] = new
    rewriter = Rewriter(files, current_modules(root))
    changes = {}
    for path in tracked(root):
        if path in SKIP or path.endswith(BINARY):
            continue
        try:
            text = (root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewriter.file(text, path, todo.get(path, path))
        if new != text:
            changes[path] = new
    inits = []
    for layer in layers[:-1]:  # the last is dmlbook itself
        folder = folder_of(layer.package)
        if not (root / folder / "__init__.py").exists():
            inits.append(f"{folder}/__init__.py")
    for test in todo.values():
        folder = test.rsplit("/", 1)[0]
        while folder.startswith("tests/") and not (root / folder / "__init__.py").exists():
            if f"{folder}/__init__.py" not in inits:
                inits.append(f"{folder}/__init__.py")
            folder = folder.rsplit("/", 1)[0]
    return todo, changes, inits


def init_text(init: str, layers: tuple = LAYERS) -> str:
    """A new folder's ``__init__.py``: its layer's line (an empty file beside the tests)."""
    if init.startswith("tests/"):
        return ""
    package = dotted(init)
    (layer,) = [layer for layer in layers if layer.package == package]
    title = layer.title[0].upper() + layer.title[1:]
    words = f"{title}: {layer.contents}."
    lines, line = [], '"""'
    for word in words.split():
        if len(line) + len(word) + 1 > 96:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line != '"""' else f'"""{word}'
    lines.append(line + '"""')
    return "\n".join(lines) + "\n"


def fixups(root: Path = ROOT, edits_by_path: dict = FIXUPS, rewords: dict = REWORDS) -> list[str]:
    """Apply :data:`FIXUPS` where still needed, and :data:`REWORDS` where found; the files
    changed."""
    changed = []
    for path in dict.fromkeys([*edits_by_path, *rewords]):
        edits = edits_by_path.get(path, ())
        file = root / path
        if not file.exists():
            if not edits:
                continue
            raise SystemExit(f"FIXUPS names {path}, which does not exist after the moves")
        text = file.read_text()
        new = text
        for before, after in rewords.get(path, ()):
            new = new.replace(before, after)
        for before, after in edits:
            if before in new:
                new = new.replace(before, after)
            elif after not in new:
                raise SystemExit(
                    f"{path}: neither {before!r} nor {after!r} is there; update FIXUPS"
                )
        if new != text:
            file.write_text(new)
            changed.append(path)
    return changed


def apply(root: Path = ROOT, fixup: dict = FIXUPS, **layout) -> list[str]:
    """Do it; the paths (after the moves) of every file written. ``layout``: :func:`plan`'s."""
    layers = layout.get("layers", LAYERS)
    todo, changes, inits = plan(root, **{k: v for k, v in layout.items() if k != "rewords"})
    for path, text in changes.items():
        (root / path).write_text(text, encoding="utf-8")
    for old, new in todo.items():
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", old, new], cwd=root, check=True)
    for init in inits:
        (root / init).parent.mkdir(parents=True, exist_ok=True)
        (root / init).write_text(init_text(init, layers))
        subprocess.run(["git", "add", init], cwd=root, check=True)
    written = sorted({todo.get(p, p) for p in changes} | set(todo.values()) | set(inits))
    written += fixups(root, fixup, layout.get("rewords", REWORDS))
    python = [p for p in written if p.endswith((".py", ".ipynb")) and (root / p).exists()]
    if python:
        ruff = [sys.executable, "-m", "ruff"]
        subprocess.run([*ruff, "check", "-q", "--select", "I", "--fix", *python], cwd=root)
        subprocess.run([*ruff, "format", "-q", *[p for p in python if p.endswith(".py")]], cwd=root)
    return sorted(set(written))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check", action="store_true", help="print the plan, write nothing")
    group.add_argument("--apply", action="store_true", help="move, rewrite, format")
    args = parser.parse_args(argv)
    if args.check:
        todo, changes, inits = plan()
        for old, new in todo.items():
            print(f"git mv {old} {new}")
        for init in inits:
            print(f"write {init}")
        for path in changes:
            print(f"rewrite {path}")
        print(
            f"{len(MOVES)} modules in the mapping; {len(todo)} files to move, "
            f"{len(changes)} to rewrite, {len(inits)} __init__.py to write"
        )
        return 0
    written = apply()
    print(f"tools/relayout.py: {len(written)} files written or moved" if written else "no change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
