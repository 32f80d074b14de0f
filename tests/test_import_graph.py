"""The package's import graph: no cycle, and no import up a layer.

The layers are declared once, in ``tools/layers.py``: every folder of ``dmlbook/`` is one layer,
bottom up, and a module may import its own layer and the layers before it. Every import of one
dmlbook module by another is read with the stdlib ``ast``: at module level, under
``TYPE_CHECKING``, inside a function, at the end of a package face (``losses/__init__.py`` once
imported ``surgery/loss.py`` last, which imported ``losses.base``: a loop through a face), and
the lazy imports of a face (``importlib.import_module`` of a literal, the ``_LAZY`` table of PEP
562 names). The graph is checked with the stdlib ``graphlib`` for cycles (issue 33) and against
the declared order at package level (issue 37): a folder that is no declared layer fails too.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dmlbook"
sys.path.insert(0, str(ROOT / "tools"))
from layers import LAYERS, PACKAGES, layer_of  # noqa: E402  (tools/ is not a package)


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _relative(here: str, level: int, module: str | None) -> str:
    base = ".".join(here.split(".")[: len(here.split(".")) - level + 1])
    return f"{base}.{module}" if module else base


def _lazy_targets(tree: ast.Module, here: str) -> set[str]:
    """Modules a face loads on first use: ``import_module("x")`` / ``import_module(".x",
    __name__)`` of a literal, and the values of a ``_LAZY = {name: ".module"}`` table."""
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called == "import_module" and isinstance(node.args[0].value, str):
                names.append(node.args[0].value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                names += [v.value for v in node.value.values if isinstance(v, ast.Constant)]
        for name in names:
            level = len(name) - len(name.lstrip("."))
            found.add(_relative(here, level, name[level:] or None) if level else name)
    return found


@functools.cache
def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the dmlbook modules it imports}``; ``from pkg import name`` counts as an import
    of ``pkg.name`` when that is a module, else of ``pkg``."""
    modules = {
        _module_name(p, package): p for p in package.rglob("*.py") if "__pycache__" not in p.parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        edges: set[str] = _lazy_targets(tree, here)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "dmlbook"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = _relative(here, node.level, node.module)
                elif (node.module or "").split(".")[0] == "dmlbook":
                    base = node.module
                else:
                    continue
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``"a (layer) -> b (higher layer)"`` for every import up a layer."""
    found = []
    for module in sorted(graph):
        low = layer_of(module)
        for target in sorted(graph[module]):
            high = layer_of(target)
            if high > low:
                found.append(f"{module} ({PACKAGES[low]}) -> {target} ({PACKAGES[high]})")
    return found


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert len(graph) > 100
    assert "dmlbook.mining.multi_similarity" in graph["dmlbook.losses.multi_similarity"]
    assert "dmlbook.core.pairs" in graph["dmlbook.losses.base"]  # "from ..core.pairs import"
    assert "dmlbook.chapters.notebook" in graph["dmlbook"]  # the face's _LAZY table
    assert "dmlbook.data.cache.image_cache" in graph["dmlbook.data"]  # under TYPE_CHECKING


def test_no_import_cycle_anywhere_in_the_package():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


def test_a_cycle_would_be_found():
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"c"}, "c": {"a"}}).prepare()


def test_every_folder_is_one_declared_layer():
    folders = sorted(
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in p.parts
    )
    assert folders == sorted(PACKAGES), "tools/layers.py must declare each folder, once"
    assert len(set(PACKAGES)) == len(PACKAGES)
    for layer in LAYERS:  # a layer's folder comes after the folders inside it
        inner = [p for p in PACKAGES if p.startswith(layer.package + ".")]
        assert all(PACKAGES.index(p) < PACKAGES.index(layer.package) for p in inner), layer


def test_no_import_goes_up_a_layer():
    graph = import_graph()
    assert "dmlbook.training.loop" in graph["dmlbook.engine.run_loop"]  # the engine builds on it
    assert "dmlbook.engine.trainer" in graph["dmlbook.studies.benchmark"]
    violations = layer_violations(graph)
    assert not violations, "a module imports from a layer above its own:\n" + "\n".join(violations)


def test_an_import_up_a_layer_would_be_found():
    """The loop issue 37 found: the losses' face imported gradient surgery's module last, which
    imported the losses' base (a module of the surgery layer importing the losses)."""
    graph = {
        "dmlbook.losses": {"dmlbook.losses.base", "dmlbook.surgery.loss"},
        "dmlbook.losses.base": {"dmlbook.core.pairs"},
        "dmlbook.surgery.loss": {"dmlbook.losses.base", "dmlbook.surgery.gradient"},
        "dmlbook.surgery.gradient": set(),
        "dmlbook.core.pairs": set(),
        "dmlbook.data.cache.image_cache": {"dmlbook.data"},  # a sub-layer importing its face
        "dmlbook.data": {"dmlbook.data.cache.image_cache"},
    }
    assert layer_violations(graph) == [
        "dmlbook.data.cache.image_cache (dmlbook.data.cache) -> dmlbook.data (dmlbook.data)",
        "dmlbook.surgery.loss (dmlbook.surgery) -> dmlbook.losses.base (dmlbook.losses)",
    ]


def test_imports_in_functions_faces_and_lazy_tables_count(tmp_path):
    """A function's import, a face's last line and a ``_LAZY`` table are all edges."""
    pkg = tmp_path / "dmlbook"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text('_LAZY = {"x": ".low.a"}\n')
    (pkg / "low" / "__init__.py").write_text("from . import a\nfrom ..high import b  # last\n")
    (pkg / "low" / "a.py").write_text("def f():\n    from dmlbook.high.b import g\n")
    (pkg / "high").mkdir()
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "high" / "b.py").write_text("import importlib\nimportlib.import_module('dmlbook.low')\n")
    graph = import_graph.__wrapped__(pkg)
    assert graph["dmlbook"] == {"dmlbook.low.a"}
    assert graph["dmlbook.low"] == {"dmlbook.low.a", "dmlbook.high.b"}
    assert graph["dmlbook.low.a"] == {"dmlbook.high.b"}
    assert graph["dmlbook.high.b"] == {"dmlbook.low"}


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
