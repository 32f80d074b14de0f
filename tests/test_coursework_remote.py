"""The grading channel (issue 43): plain data only, tests on the grader's side, forbidden code absent.

Checked here without a kernel (a few seconds of CPU): the codec of ``coursework_channel`` round
trips the values answers are made of and refuses everything else (a pickle, a class that is not
SymPy's, a handle where plain data is expected); the grader's stand-in for a student's function
(``coursework_remote``), talking to ``coursework_answer`` in this process, gives the same
values, the same in-place changes and the same gradients as calling the function directly
(autograd of the direct call is the reference); the names a test takes from the submission and
the modules its rules forbid are read from the tests; the sandbox's copy of the package has
stubs where the forbidden modules were, and no bytecode. The hostile submissions themselves are
graded end to end by ``tests/test_coursework.py``.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework_answer as answer  # noqa: E402  (tools/ is not a package)
import coursework_channel as channel  # noqa: E402
import coursework_remote as remote  # noqa: E402
import coursework_sandbox as sandbox  # noqa: E402


def test_plain_values_round_trip_with_their_types():
    x = torch.tensor([[1.5, -2.0], [0.25, float("nan")]], dtype=torch.float64)
    values = {
        1: 0.5,
        "k": (True, None, float("inf")),
        2.5: [x, torch.tensor([True, False]), np.arange(3, dtype=np.int32)],
    }
    back = channel.loads(channel.dumps(values))
    assert list(back) == [1, "k", 2.5] and back["k"] == (True, None, float("inf"))
    tensor, mask, array = back[2.5]
    assert tensor.dtype == torch.float64 and torch.equal(tensor[0], x[0]) and tensor[1, 1].isnan()
    assert mask.dtype == torch.bool and array.dtype == np.int32 and array.tolist() == [0, 1, 2]
    leaf = channel.loads(channel.dumps(torch.ones(2, requires_grad=True)))
    assert leaf.requires_grad and leaf.is_leaf


def test_sympy_values_round_trip_equal():
    s = sp.Symbol("s", real=True)
    alpha, n = sp.Symbol("alpha", positive=True), sp.Symbol("N", positive=True, integer=True)
    expr = sp.log(1 + sp.exp(alpha * (sp.Rational(1, 2) - s))) / n + sp.pi * sp.Float("0.1")
    matrix = sp.Matrix([[s, alpha], [sp.sqrt(n), 2 * s]])
    back = channel.loads(channel.dumps([expr, matrix, sp.oo]))
    assert back[0] == expr and back[1] == matrix and back[2] is sp.oo
    assert back[0].free_symbols == {s, alpha, n}


@pytest.mark.parametrize(
    "data",
    [
        {"$": "pickle", "data": "gASV"},
        {"$": "sympy", "tree": {"s": "sympify", "args": []}},
        {"$": "sympy", "tree": {"s": "os", "args": []}},
        {"$": "tensor", "dtype": "object", "shape": [1], "data": ""},
        {"$": "handle", "id": 1},
        {"$": "float", "v": "__import__('os')"},
    ],
)
def test_anything_else_is_refused(data):
    with pytest.raises(ValueError):
        channel.loads(json.dumps(data))


def test_an_object_is_a_handle_on_the_kernel_side_only():
    with pytest.raises(channel.Unencodable):
        channel.encode(object())
    assert channel.encode(object(), lambda obj: 7)["$"] == "handle"


class _InProcess(remote.Channel):
    """The kernel's answering module, called in this process on a namespace of our own."""

    def __init__(self, namespace: dict, monkeypatch) -> None:
        super().__init__(None, None, math.inf)
        monkeypatch.setattr(answer, "_namespace", lambda: namespace)

    def ask(self, request: dict) -> dict:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            answer.serve(json.dumps(request))
        (line,) = [x for x in buffer.getvalue().split("\n") if x.startswith(answer.MARK)]
        reply = json.loads(line[len(answer.MARK) :])
        if not reply["ok"]:
            raise remote.AnswerFailed(reply["error"])
        return reply


def _student(losses, gamma):
    losses.mul_(1.0)  # an in-place no-op: nothing changes
    return {"p": torch.softmax(losses / gamma, dim=0), "n": losses.shape[0]}


def _mutating(x):
    x.add_(1)
    return x.sum()


def test_a_remote_function_gives_the_direct_values_and_gradients(monkeypatch):
    def value(losses, gamma):
        return gamma * torch.logsumexp(losses / gamma, dim=0) - gamma * math.log(len(losses))

    chan = _InProcess({"value": value, "student": _student, "mutating": _mutating}, monkeypatch)
    found = remote.answers(chan, ["value", "student", "mutating", "absent"])
    assert sorted(found) == ["mutating", "student", "value"]
    base = torch.tensor([0.5, 1.5, 0.2, 0.9], dtype=torch.float64)
    direct, through = base.clone().requires_grad_(), base.clone().requires_grad_()
    want = value(direct, 0.4)
    got = found["value"](through, 0.4)
    assert got.requires_grad and torch.equal(got.detach(), want.detach())
    want.backward()
    got.backward()
    assert torch.allclose(through.grad, direct.grad, atol=1e-15)
    # a non-leaf input: torch.autograd.grad reaches the leaf behind it
    S = torch.rand(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    S.requires_grad_()
    (want,) = torch.autograd.grad(value(S[0, 1:], 0.7), S)
    (got,) = torch.autograd.grad(found["value"](S[0, 1:], 0.7), S)
    assert torch.allclose(got, want, atol=1e-15)
    out = found["student"](base, 2.0)
    assert out["n"] == 4 and not out["p"].requires_grad and torch.equal(base, base.clone())
    x = torch.zeros(3)
    assert float(found["mutating"](x)) == 3.0 and x.tolist() == [1.0, 1.0, 1.0]


def test_a_raising_answer_fails_its_test_with_the_error(monkeypatch):
    def broken(x):
        raise ValueError("no")

    chan = _InProcess({"broken": broken}, monkeypatch)
    with pytest.raises(remote.AnswerFailed, match="ValueError: no"):
        remote.answers(chan, ["broken"])["broken"](1)


TEST = """OK_FORMAT = True
test = {'name': 'q1', 'points': [1], 'suites': [{'cases': [{'code': '''>>> from dmlbook.exercises.assignment_rules import obeying
>>> _f = obeying(f, "dmlbook.losses", "dmlbook.core.gpw")
>>> _x = torch.ones(2)
>>> assert not forbidden_imports(In, "dmlbook.evaluate")
>>> assert abs(float(_f(_x)) - w_pos) < 1e-9 and all(y > 0 for y in [1])''',
'hidden': False, 'locked': False}], 'scored': True, 'setup': '', 'teardown': '', 'type': 'doctest'}]}
"""


def test_the_tests_free_names_and_forbidden_modules():
    assert remote.free_names([TEST]) == ["f", "forbidden_imports", "w_pos"]
    forbidden = ["dmlbook.evaluate", "dmlbook.core.gpw", "dmlbook.losses"]
    assert remote.forbidden_modules([TEST]) == sorted(forbidden)


def test_the_sandbox_package_has_stubs_for_forbidden_modules(tmp_path):
    package, grading = sandbox.answer_files(tmp_path, ["dmlbook.evaluate", "dmlbook.core.gpw"])
    assert not list(package.rglob("*.pyc")) and (grading / "coursework_answer.py").is_file()
    assert "def recall_at_k" not in (package / "evaluate" / "__init__.py").read_text()
    assert "def ranked_metrics" not in (package / "evaluate" / "ranking.py").read_text()
    assert "def recall_at_k" in (sandbox._package_dir() / "evaluate" / "__init__.py").read_text()
    code = (
        "import dmlbook.training, dmlbook.evaluate.ranking as r\n"
        "from dmlbook.core.gpw import gpw_weights\n"
        "try:\n    r.ranked_metrics(1, 2)\nexcept PermissionError as e:\n    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dmlbook.evaluate.ranking.ranked_metrics: the rules of this assignment forbid" in (
        proc.stdout
    )
