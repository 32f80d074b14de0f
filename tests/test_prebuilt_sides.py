"""``tools/prebuilt_sides.py``: the mechanical rewrite that marks the ``prove_equal`` sides that
read expressions built earlier as ``prebuilt`` (issue 38), on a small synthetic notebook and
module whose expected text is written out by hand, and then executed: every proof that held
before still holds, and the marked sides are exactly those ``prove_equal`` would refuse.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import prebuilt_sides  # noqa: E402  (tools/ is not a package)

CELLS = [
    "import sympy as sp\nfrom dmlbook import symbolic as sy\n",
    's, x = sp.symbols("s x", real=True)\nL = sp.log(1 + sp.exp(s)) * x\nw = sp.diff(L, s)\n',
    "sy.prove_equal(lambda: w, lambda: x * sp.exp(s) / (1 + sp.exp(s)))\n"
    "sy.prove_equal(lambda: (s + x) ** 2, lambda: s**2 + 2 * s * x + x**2)\n"
    "sy.prove_equal(sy.derived(sp.diff(L, x)), lambda: sp.log(1 + sp.exp(s)))\n"
    "ok = [sy.prove_equal(lambda: -w, lambda: -w) for _ in range(1)]\n",
    "%time sy.prove_equal(lambda: w, lambda: w)\n",
]
EXPECTED_CELL_2 = (
    "sy.prove_equal(sy.prebuilt(lambda: w), lambda: x * sp.exp(s) / (1 + sp.exp(s)))\n"
    "sy.prove_equal(lambda: (s + x) ** 2, lambda: s**2 + 2 * s * x + x**2)\n"
    "sy.prove_equal(sy.derived(sp.diff(L, x)), lambda: sp.log(1 + sp.exp(s)))\n"
    "ok = [sy.prove_equal(sy.prebuilt(lambda: -w), sy.prebuilt(lambda: -w)) for _ in range(1)]\n"
)

MODULE = """import sympy as sp

from dmlbook.symbolic import prove_equal


def check(L, s):
    w = sp.diff(L, s)
    return prove_equal(lambda: w, lambda: w) and prove_equal(lambda: s, lambda: s)
"""
EXPECTED_MODULE = """import sympy as sp

from dmlbook.symbolic import prebuilt, prove_equal


def check(L, s):
    w = sp.diff(L, s)
    return prove_equal(prebuilt(lambda: w), prebuilt(lambda: w)) and prove_equal(
        prebuilt(lambda: s), prebuilt(lambda: s)
    )
"""


def _notebook(path: Path) -> None:
    cells = [
        {"cell_type": "code", "id": f"c{i}", "metadata": {"tags": ["t"]}, "source":
         src.splitlines(keepends=True), "outputs": [], "execution_count": None}
        for i, src in enumerate(CELLS)
    ]  # fmt: skip
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def test_a_synthetic_notebook_is_rewritten_and_its_proofs_still_hold(tmp_path, capsys):
    nb_path = tmp_path / "nb.ipynb"
    _notebook(nb_path)
    assert prebuilt_sides.main([str(nb_path)]) == 1  # the magic cell is left for the lead
    out = capsys.readouterr().out
    assert (
        "wrapped in prebuilt (unchecked for cancellations; rewrite with derived by hand): 3" in out
    )
    assert "derived(value): the old unchecked form" in out and "sy.derived(sp.diff(L, x))" in out
    assert "cell 3: has IPython magics" in out
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    got = ["".join(c["source"]) for c in nb["cells"]]
    assert got[2] == EXPECTED_CELL_2 and got[:2] == CELLS[:2] and got[3] == CELLS[3]
    assert [c["id"] for c in nb["cells"]] == ["c0", "c1", "c2", "c3"]
    assert all(c["metadata"] == {"tags": ["t"]} for c in nb["cells"])
    # run the converted cells: each proof holds, and each unconverted lambda: w is refused
    scope: dict = {}
    for src in got[:2]:
        exec(src, scope)  # noqa: S102 (the synthetic notebook's own cells)
    exec(got[2].replace("sy.prove_equal(", "assert sy.prove_equal(", 3), scope)  # noqa: S102
    assert scope["ok"] == [True]
    with pytest.raises(TypeError, match="reads w"):
        exec(CELLS[2].splitlines()[0], scope)  # noqa: S102


def test_a_module_gets_prebuilt_imported_and_check_writes_nothing(tmp_path, capsys):
    path = tmp_path / "mod.py"
    path.write_text(MODULE, encoding="utf-8")
    assert prebuilt_sides.main(["--check", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == MODULE
    assert prebuilt_sides.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == EXPECTED_MODULE
    assert "wrapped in prebuilt" in capsys.readouterr().out
    scope: dict = {}
    exec(path.read_text(encoding="utf-8"), scope)  # noqa: S102
    import sympy as sp

    s = sp.Symbol("s", real=True)
    assert scope["check"](sp.exp(s) * s, s) is True


def test_a_side_it_cannot_wrap_is_printed_for_the_lead(tmp_path, capsys):
    path = tmp_path / "mod.py"
    path.write_text(
        "from dmlbook.symbolic import prove_equal\n\n\ndef f(sides):\n"
        "    return prove_equal(*sides)\n",
        encoding="utf-8",
    )
    assert prebuilt_sides.main([str(path)]) == 1
    assert "unpacked: by hand" in capsys.readouterr().out


def test_a_module_marked_skip_is_left_alone(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(f"{prebuilt_sides.SKIP}\n{MODULE}", encoding="utf-8")
    assert prebuilt_sides.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == f"{prebuilt_sides.SKIP}\n{MODULE}"
