"""``tools/mutation_remap.py``: the equivalent-mutant list carried over a renumbering commit.

Two versions of a small module are written out here: the old one writes ``S``, ``labels`` and
``reduction`` out (annotation and default, positional and keyword-only), the new one writes them
bare, as ``declared`` functions do since the frame is declared once; ``g``'s body changes too.
mutmut generates both versions' mutants, and the mapping is checked against the mutated
functions' text (``ast.unparse`` of each body, not the tool's AST comparison): every old mutant
of ``f`` but the three that mutate a default now declared (``labels``, ``reduction`` twice) maps to
the new mutant with the same body and the same ``k`` default, each new mutant of ``f`` exactly
once, and no mutant of the changed ``g`` maps. The renaming of the list's text is checked on
entries written out by hand. About 1.5 s (mutmut's generation of two small files; no test run).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import mutation_remap  # noqa: E402  (tools/ is not a package)

OLD = """
def f(S: float, labels: int = 0, k: int = 3, *, reduction: str = "mean"):
    if reduction == "sum":
        return S + k
    return S - k


def g(a):
    return a * 2
"""

NEW = """
def f(S, labels, k: int = 3, *, reduction):
    if reduction == "sum":
        return S + k
    return S - k


def g(a):
    return a * 3
"""


def _mutants(tmp_path: Path, name: str, source: str) -> dict[str, ast.FunctionDef]:
    work = tmp_path / name
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "m.py").write_text(source)
    (work / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["pkg"]\n')
    return mutation_remap.generated_mutants(work, ["pkg/m.py"])


def _k_default(function: ast.FunctionDef) -> str:
    return ast.unparse(function.args.defaults[-1])


def test_each_old_mutant_maps_to_the_new_one_with_the_same_edit(tmp_path):
    old, new = _mutants(tmp_path, "old", OLD), _mutants(tmp_path, "new", NEW)
    mutants = [n for n in old if not n.endswith("__mutmut_orig")]
    mapping = mutation_remap.remap(old, new, mutants)

    in_f = [n for n in mutants if n.startswith("pkg.m.x_f__")]
    f = old["pkg.m.x_f__mutmut_orig"]
    # the edits of what the new f writes bare: same body, same k, another signature
    declared = [
        n
        for n in in_f
        if ast.unparse(old[n].body) == ast.unparse(f.body) and _k_default(old[n]) == _k_default(f)
    ]
    assert len(declared) == 3  # labels=1, reduction="XXmeanXX" and "MEAN"
    images = []
    for name in in_f:
        image, why = mapping[name]
        if name in declared:
            assert image is None and "now declared" in why, name
            continue
        assert image is not None, (name, why)
        assert ast.unparse(old[name].body) == ast.unparse(new[image].body)
        assert _k_default(old[name]) == _k_default(new[image])
        images.append(image)
    new_f = [n for n in new if n.startswith("pkg.m.x_f__") and not n.endswith("orig")]
    assert sorted(images) == sorted(new_f)  # each new mutant of f once
    assert len(new_f) == len(in_f) - 3
    assert any(image != name for name, (image, _) in mapping.items() if image)  # renumbered

    in_g = [n for n in mutants if n.startswith("pkg.m.x_g__")]
    assert in_g and all(mapping[n][0] is None for n in in_g)
    assert {mapping[n][1] for n in in_g} == {
        "its function changed beyond the parameters now declared"
    }
    unknown = "pkg.m.x_f__mutmut_999"
    assert mutation_remap.remap(old, new, [unknown])[unknown] == (
        None,
        "not a mutant of the old commit",
    )


TEXT = """\
Prose naming `m.x_f__mutmut_7` is left alone.

- `m.x_f__mutmut_4`: default `reduction="XXmeanXX"`.
- `m.x_f__mutmut_5`: as mutmut_4, `"MEAN"`.
- `m.x_f__mutmut_7`: `!=` for `==`.
- `m.x_f__mutmut_9`: as mutmut_7, the other branch; unlike mining's f mutmut_7.
- `m.x_g__mutmut_7`: as f mutmut_9 (and as mutmut_7 of g itself).
- `m.x_g__mutmut_8`: as f mutmut_4.
"""

RENAMED = """\
Prose naming `m.x_f__mutmut_7` is left alone.

- `m.x_f__mutmut_4`: default `reduction="XXmeanXX"`.
- `m.x_f__mutmut_5`: as mutmut_4, `"MEAN"`.
- `m.x_f__mutmut_5`: `!=` for `==`.
- `m.x_f__mutmut_7`: as mutmut_5, the other branch; unlike mining's f mutmut_7.
- `m.x_g__mutmut_7`: as f mutmut_7 (and as mutmut_7 of g itself).
- `m.x_g__mutmut_6`: as f mutmut_4.
"""


def test_entries_and_their_references_are_renamed_at_once():
    renames = {
        "m.x_f__mutmut_4": None,
        "m.x_f__mutmut_5": None,
        "m.x_f__mutmut_7": "m.x_f__mutmut_5",
        "m.x_f__mutmut_9": "m.x_f__mutmut_7",
        "m.x_g__mutmut_7": "m.x_g__mutmut_7",
        "m.x_g__mutmut_8": "m.x_g__mutmut_6",
    }
    text, dangling = mutation_remap.rename_entries(TEXT, renames)
    assert text == RENAMED
    # the removed entries' references to each other are not reported; g's to a removed one is
    assert dangling == ["m.x_g__mutmut_8 refers to m.x_f__mutmut_4"]
