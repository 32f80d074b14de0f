"""The assignments' rules as checks (dmlbook.exercises.assignment_rules, issue 28).

A call into a forbidden module is seen however the function was imported or renamed, calls that
the package makes internally are not, and a forbidden import or use is found in cells' code.
"""

from __future__ import annotations

import pytest
import torch

import dmlbook.evaluate as evaluate
from dmlbook.evaluate import recall_at_k as renamed
from dmlbook.exercises.assignment_rules import (
    RuleBroken,
    calls_into,
    forbidden_imports,
    obeying,
    parse_cell,
)


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(12, 3, generator=g), torch.arange(4).repeat(3)


def own_recall(x, y):
    """A student's own Recall@1 (a loop over the queries), calling nothing of dmlbook."""
    u = torch.nn.functional.normalize(x, dim=1)
    s = u @ u.T
    hits = []
    for i in range(len(y)):
        others = [j for j in range(len(y)) if j != i]
        nearest = max(others, key=lambda j: float(s[i, j]))
        hits.append(bool(y[nearest] == y[i]))
    return {1: sum(hits) / len(hits)}


@pytest.mark.parametrize(
    "answer",
    [
        lambda x, y: renamed(x, y, (1,)),
        lambda x, y: evaluate.recall_at_k(x, y, (1,)),
        lambda x, y: __import__("dmlbook.evaluate").evaluate.recall_at_k(x, y, 1),
    ],
    ids=["renamed", "module attribute", "imported inside"],
)
def test_a_call_into_the_forbidden_module_is_seen_however_it_is_spelled(answer):
    x, y = _data()
    with calls_into("dmlbook.evaluate") as called:
        answer(x, y)
    assert called == ["dmlbook.evaluate.recall_at_k"], (
        "the package's own inner calls are not listed"
    )
    with pytest.raises(
        RuleBroken, match="calls dmlbook.evaluate.recall_at_k.*forbid dmlbook.evaluate"
    ):
        obeying(answer, "dmlbook.evaluate")(x, y)


def test_an_answer_of_its_own_passes_and_returns_its_value():
    x, y = _data()
    with calls_into("dmlbook.evaluate", "dmlbook.losses") as called:
        value = own_recall(x, y)
    assert called == []
    assert obeying(own_recall, "dmlbook.evaluate")(x, y) == value
    assert abs(value[1] - evaluate.recall_at_k(x, y, 1)[1]) < 1e-12  # and it is right


def test_a_module_rule_is_not_a_package_rule():
    """``dmlbook.core.similarity`` (a module) does not forbid ``dmlbook.evaluate`` (another one)."""
    x, y = _data()
    with calls_into("dmlbook.core.similarity") as called:
        renamed(x, y, (1,))
    assert called == []


def test_forbidden_imports_in_cells():
    cells = [
        "import torch\nfrom dmlbook.models import embed",
        "from dmlbook import evaluate",
        "r = dmlbook.evaluate.recall_at_k(x, y)",
        "%time x = 1",
        "def f(:",  # a syntax error in a cell is skipped, not raised
    ]
    assert forbidden_imports(cells, "dmlbook.evaluate") == [
        "dmlbook.evaluate",
        "dmlbook.evaluate.recall_at_k",
    ]
    assert forbidden_imports(cells[:1], "dmlbook.evaluate") == []
    assert forbidden_imports(["import dmlbook.evaluation_tools"], "dmlbook.evaluate") == []


def test_cells_and_doctests_parse_as_the_code_they_run():
    doctest = "%time x = 1\n!pip list\n>>> import torch\n>>> for i in []:\n...     pass"
    assert [type(n).__name__ for n in parse_cell(doctest, doctest=True).body] == ["Import", "For"]
    assert parse_cell("def f(:") is None
    # a prompt in a student's docstring stays text: the cell's forbidden import is still seen
    cell = 'from dmlbook.evaluate import recall_at_k\ndef f():\n    """\n    >>> (\n    """'
    assert forbidden_imports([cell], "dmlbook.evaluate") == [
        "dmlbook.evaluate",
        "dmlbook.evaluate.recall_at_k",
    ]
