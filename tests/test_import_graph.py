"""The package's import graph has no cycle: every import of one dmlbook module by another,
module-level, under ``TYPE_CHECKING`` or inside a function, read with the stdlib ``ast`` and
checked with the stdlib ``graphlib`` (issue 33: ``dro``, ``dro_closed_form`` and ``dro_grouped``
imported each other)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dmlbook"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """``{module: the dmlbook modules it imports}``; ``from pkg import name`` counts as an import
    of ``pkg.name`` when that is a module, else of ``pkg``."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "dmlbook"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                elif (node.module or "").split(".")[0] == "dmlbook":
                    base = node.module
                else:
                    continue
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert len(graph) > 100
    assert "dmlbook.mining.multi_similarity" in graph["dmlbook.losses.multi_similarity"]
    assert "dmlbook.pairs" in graph["dmlbook.losses.base"]  # through "from ..pairs import ..."


def test_no_import_cycle_anywhere_in_the_package():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


def test_a_cycle_would_be_found():
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"c"}, "c": {"a"}}).prepare()
