"""The package's import graph: no cycle, and the training layers in order.

Every import of one dmlbook module by another, module-level, under ``TYPE_CHECKING`` or inside a
function, is read with the stdlib ``ast``; the graph is checked with the stdlib ``graphlib``
(issue 33: ``dro``, ``dro_closed_form`` and ``dro_grouped`` imported each other). The training
layers (issue 33) are ``dmlbook.training`` < ``dmlbook.engine`` < ``dmlbook.studies``: nothing a
layer imports, directly or through other modules, belongs to a layer above it."""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dmlbook"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
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


#: The training layers, lowest first: each may import the ones before it, never one after it.
LAYERS = ("dmlbook.training", "dmlbook.engine", "dmlbook.studies")


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """``"a -> b -> c"`` for every path from a module of a layer to a module of a higher one."""
    found = []
    for low, package in enumerate(layers):
        above = layers[low + 1 :]
        for start in sorted(m for m in graph if _in(m, package)):
            paths, queue = {start: [start]}, [start]  # breadth first: the shortest path
            while queue:
                module = queue.pop(0)
                for target in sorted(graph.get(module, ())):
                    if target in paths:
                        continue
                    paths[target] = [*paths[module], target]
                    if any(_in(target, high) for high in above):
                        found.append(" -> ".join(paths[target]))
                    else:
                        queue.append(target)
    return found


def test_training_is_below_the_engine_and_the_engine_below_the_studies():
    graph = import_graph()
    assert "dmlbook.training.loop" in graph["dmlbook.engine.run_loop"]  # the engine builds on it
    assert "dmlbook.engine.trainer" in graph["dmlbook.studies.benchmark"]
    assert "dmlbook.training.in_memory" in graph["dmlbook.studies.loss_grid"]
    violations = layer_violations(graph)
    assert not violations, "a layer imports one above it:\n" + "\n".join(violations)


def test_a_layer_violation_would_be_found():
    graph = {
        "dmlbook.training.in_memory": {"dmlbook.data"},
        "dmlbook.data": {"dmlbook.engine.config"},  # through another module counts too
        "dmlbook.engine.config": set(),
        "dmlbook.engine.trainer": {"dmlbook.studies"},
        "dmlbook.studies": set(),
    }
    assert layer_violations(graph) == [
        "dmlbook.training.in_memory -> dmlbook.data -> dmlbook.engine.config",
        "dmlbook.engine.trainer -> dmlbook.studies",
    ]


def test_the_studies_face_loads_each_study_only_when_asked():
    """``dmlbook.studies`` imports its modules only under TYPE_CHECKING (PEP 562 does the rest),
    so ``from dmlbook.studies import three_similarities`` loads neither the engine nor fit; and
    each public name is the function or class itself, from the module the face names."""
    import dmlbook.studies as studies

    tree = ast.parse((PACKAGE / "studies" / "__init__.py").read_text())
    type_checking = [n for n in tree.body if isinstance(n, ast.If)]
    run_time = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level]  # from .x
    assert not run_time and len(type_checking) == 1
    assert sorted(studies.__all__) == sorted(studies._LAZY)
    for name, module in studies._LAZY.items():
        value = getattr(studies, name)
        assert callable(value) and value.__module__ == f"dmlbook.studies{module}", name
