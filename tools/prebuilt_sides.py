"""Mark the sides of ``prove_equal`` that read expressions built earlier as ``prebuilt`` (issue 38).

``prove_equal`` now refuses (``TypeError``) a callable side that reads a SymPy expression built
before the call (``lambda: w4``, ``lambda: w[s]``): SymPy may have cancelled a factor while
building it (``s*x/s`` is ``x``), so a proof of it may be false where that factor vanishes
(:mod:`dmlbook.symbolic.sides`). A statement about such a value is still allowed, but only when
the call says so: ``sy.prebuilt(lambda: w4)``. This script makes that change mechanically in
chapters (``.ipynb``) and modules (``.py``): every ``lambda`` side of a ``prove_equal`` call
that reads a name it cannot show to be a symbol, a module or an imported function is wrapped in
``prebuilt(...)`` (``sy.prebuilt`` where the call is ``sy.prove_equal``; a bare ``prove_equal``
gets ``prebuilt`` added to the import it came from). Wrapping a side that did not need it
changes nothing: the proof is the one it was before the rule.

Each wrapped side is printed (it is a statement whose cancellations are unchecked: rewrite it
by hand as ``sy.derived(sp.diff, lambda: <definition as typed>, s)`` or built inside the
lambda), and so is every call site it cannot convert (a side passed as a variable, a cell it
cannot parse, a ``prove_equal`` with no import to extend): the lead fixes those by hand.

Usage: ``python tools/prebuilt_sides.py [--check] PATH...`` (``--check`` prints, writes
nothing; the exit status is 1 when a site could not be converted). A module with the line
``# prebuilt_sides: skip`` is left alone (the tests of the refusal itself, sides converted by
hand), so that the script may be run on the whole tree.
Tests: ``tests/test_prebuilt_sides.py``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: A module holding this line is left as it is (its sides are meant as written: the tests of the
#: refusal itself, and sides already converted by hand), so the script may run on a whole tree.
SKIP = "# prebuilt_sides: skip"

#: Calls whose result is a symbol (or a tuple of symbols): a name bound only by them is safe.
SYMBOL_MAKERS = {"symbols", "Symbol", "Dummy", "IndexedBase", "Idx"}


@dataclass
class Report:
    wrapped: list[str] = field(default_factory=list)
    by_hand: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # derived(value): the old unchecked form


def _is_symbol_maker(value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    return name in SYMBOL_MAKERS


def _targets(t: ast.expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Tuple | ast.List):
        return [n for e in t.elts for n in _targets(e)]
    if isinstance(t, ast.Starred):
        return _targets(t.value)
    return []


def safe_names(trees: list[ast.AST]) -> set[str]:
    """Names bound only by imports or symbol constructions anywhere in ``trees`` (a module, or
    a notebook's cells): reading one cannot bring in an expression built earlier."""
    good: set[str] = set(dir(builtins))
    bad: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                good |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n for t in targets for n in _targets(t)]
                (good if node.value is not None and _is_symbol_maker(node.value) else bad).update(
                    names
                )
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bad.add(node.name)  # it may read (or return) an expression built earlier
                if not isinstance(node, ast.ClassDef):
                    bad |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            elif isinstance(node, ast.For | ast.comprehension | ast.AugAssign | ast.NamedExpr):
                bad |= set(_targets(node.target))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bad |= set(_targets(node.optional_vars))
            elif isinstance(node, ast.Lambda):
                bad |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    return good - bad


def _reads(lam: ast.Lambda) -> set[str]:
    """Names ``lam``'s body loads from outside (comprehension variables inside it excluded)."""
    inner = {
        n
        for c in ast.walk(lam.body)
        if isinstance(c, ast.comprehension)
        for n in _targets(c.target)
    }
    inner |= {a.arg for c in ast.walk(lam.body) if isinstance(c, ast.Lambda) for a in ast.walk(c.args) if isinstance(a, ast.arg)}  # fmt: skip
    loads = {
        n.id for n in ast.walk(lam.body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return loads - inner


def _is_prove_equal(call: ast.Call) -> str | None:
    """``'sy.'`` for ``sy.prove_equal(...)``, ``''`` for ``prove_equal(...)``, else None."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "prove_equal" and isinstance(f.value, ast.Name):
        return f.value.id + "."
    if isinstance(f, ast.Name) and f.id == "prove_equal":
        return ""
    return None


def _plain_integers(node: ast.expr) -> bool:
    """A Python int, or a list, tuple or dict literal of them: ``prove_equal`` takes it as is."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    items = list(value.values()) if isinstance(value, dict) else value
    items = items if isinstance(items, list | tuple) else [items]
    return all(isinstance(v, int) and not isinstance(v, bool) for v in items)


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset of (1-based line, utf-8 byte column) in the joined source."""
    before = sum(len(x) for x in lines[: lineno - 1])
    return before + len(lines[lineno - 1].encode()[:col].decode())


def convert_source(src: str, where: str, safe: set[str], report: Report) -> tuple[str, bool]:
    """``src`` with its ``prove_equal`` lambda sides wrapped; True if ``prebuilt`` must be
    imported next to a bare ``prove_equal``."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    needs_import = False
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        if (isinstance(f, ast.Attribute) and f.attr == "derived") or (
            isinstance(f, ast.Name) and f.id == "derived"
        ):
            if len(call.args) == 1 and not call.keywords:
                report.unchecked.append(f"{where}:{call.lineno}: {ast.unparse(call)[:100]}")
            continue
        prefix = _is_prove_equal(call)
        if prefix is None:
            continue
        sides = list(call.args[:2]) + [k.value for k in call.keywords if k.arg in ("a", "b")]
        for side in sides:
            text = ast.unparse(side)[:100]
            if isinstance(side, ast.Lambda):
                takes_args = side.args.args or side.args.defaults or side.args.kwonlyargs
                if not takes_args and _reads(side) <= safe:
                    continue
                a = _offset(lines, side.lineno, side.col_offset)
                b = _offset(lines, side.end_lineno, side.end_col_offset)
                edits.append((a, b, f"{prefix}prebuilt("))
                needs_import |= prefix == ""
                report.wrapped.append(f"{where}:{side.lineno}: {text}")
            elif _plain_integers(side) or (
                isinstance(side, ast.Call)
                and (getattr(side.func, "attr", None) or getattr(side.func, "id", None))
                in ("derived", "prebuilt")
            ):
                continue
            elif isinstance(side, ast.Starred):
                report.by_hand.append(f"{where}:{side.lineno}: side {text} (unpacked: by hand)")
            else:  # a variable holding a callable, or a value: unchecked either way
                a = _offset(lines, side.lineno, side.col_offset)
                b = _offset(lines, side.end_lineno, side.end_col_offset)
                edits.append((a, b, f"{prefix}prebuilt("))
                needs_import |= prefix == ""
                report.wrapped.append(f"{where}:{side.lineno}: {text}")
    out = "".join(lines)
    for a, b, head in sorted(edits, reverse=True):
        out = out[:a] + head + out[a:b] + ")" + out[b:]
    return out, needs_import


def _add_import(src: str) -> tuple[str, bool]:
    """``prebuilt`` added to the ``from ... import ..., prove_equal`` that imports it."""
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "prove_equal" for a in node.names):
            names = sorted({a.name for a in node.names} | {"prebuilt"})
            lines = src.splitlines(keepends=True)
            a = _offset(lines, node.lineno, node.col_offset)
            b = _offset(lines, node.end_lineno, node.end_col_offset)
            new = f"from {'.' * node.level}{node.module or ''} import {', '.join(names)}"
            if len(new) > 99:
                new = f"from {'.' * node.level}{node.module or ''} import (\n"
                new += "".join(f"    {n},\n" for n in names) + ")"
            return src[:a] + new + src[b:], True
    return src, False


def _cell_source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def _parsable(src: str) -> str:
    """IPython magics and shell lines blanked, so that ``ast`` can read the cell."""
    return "".join(
        "\n" if line.lstrip().startswith(("%", "!")) else line
        for line in src.splitlines(keepends=True)
    )


def convert_notebook(path: Path, report: Report, write: bool) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    trees = []
    for c in cells:
        try:
            trees.append(ast.parse(_parsable(_cell_source(c))))
        except SyntaxError:
            continue
    safe = safe_names(trees)
    changed = needs_any = False
    for n, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or "prove_equal" not in _cell_source(cell):
            continue
        src = _cell_source(cell)
        where = f"{path}:cell {n}"
        if _parsable(src) != src:
            report.by_hand.append(f"{where}: has IPython magics; convert by hand")
            continue
        try:
            out, needs_import = convert_source(src, where, safe, report)
        except SyntaxError as e:
            report.by_hand.append(f"{where}: cannot parse ({e.msg})")
            continue
        needs_any |= needs_import
        if out != src:
            cell["source"] = out.splitlines(keepends=True)
            changed = True
    if needs_any and not _add_notebook_import(cells):
        report.by_hand.append(f"{path}: no cell imports prove_equal to add prebuilt to")
    if changed and write:
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8")


def _add_notebook_import(cells: list[dict]) -> bool:
    for cell in cells:
        src = _cell_source(cell)
        if "prove_equal" in src and "import" in src and _parsable(src) == src:
            out, added = _add_import(src)
            if added:
                cell["source"] = out.splitlines(keepends=True)
                return True
    return False


def convert_module(path: Path, report: Report, write: bool) -> bool:
    """Convert one module; True if it was rewritten."""
    src = path.read_text(encoding="utf-8")
    if SKIP in src:  # a module whose sides are as intended (tests of the refusal itself)
        return False
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        report.by_hand.append(f"{path}: cannot parse ({e.msg})")
        return False
    out, needs_import = convert_source(src, str(path), safe_names([tree]), report)
    if needs_import:
        out, added = _add_import(out)
        if not added:
            report.by_hand.append(f"{path}: no 'from ... import prove_equal' to add prebuilt to")
    if out != src and write:
        path.write_text(out, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="print only, write nothing")
    args = parser.parse_args(argv)
    report = Report()
    modules = []
    for path in args.paths:
        if path.suffix == ".ipynb":
            convert_notebook(path, report, not args.check)
        elif path.suffix == ".py":
            modules += [path] if convert_module(path, report, not args.check) else []
        else:
            report.by_hand.append(f"{path}: neither .ipynb nor .py")
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if modules and Path(ruff).exists():  # a wrapped side may pass the line length
        subprocess.run([ruff, "format", "-q", *map(str, modules)], check=False)
    for title, rows in (
        ("wrapped in prebuilt (unchecked for cancellations; rewrite with derived by hand)",
         report.wrapped),
        ("derived(value): the old unchecked form (rewrite as derived(op, lambda: ..., *args))",
         report.unchecked),
        ("NOT converted: fix by hand", report.by_hand),
    ):  # fmt: skip
        print(f"{title}: {len(rows)}")
        for row in rows:
            print(f"  {row}")
    return 1 if report.by_hand else 0


if __name__ == "__main__":
    sys.exit(main())
