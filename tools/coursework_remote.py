"""The grader's side of grading: run the tests here, with the submission's answers as plain data.

The tests, their expected values and their comparisons run in the grader's driver process
(``coursework_grade``), never in the kernel that ran the submission. A test's free names (what
it uses without defining or importing it: ``dro_kl_weights``, ``recall_before``, ``model``) are
the submission's answers. The grader asks the kernel what each one is (``describe``):

* a function becomes a ``RemoteFunction``: calling it sends the arguments (tensors, numbers,
  lists as plain data, ``coursework_channel``) to the kernel, which calls the student's
  function and sends back the result and whatever arguments the call changed in place (copied
  into the test's tensors). When the result is differentiable and the test's inputs require
  gradients, the result is joined to the inputs by ``_RemoteGrad``, an autograd function whose
  backward asks the kernel for the vector-Jacobian product: ``.backward()``,
  ``torch.autograd.grad`` and ``.requires_grad`` in a test reach through the student's code;
* a value (a float, a tensor, a SymPy expression) is copied here as plain data;
* anything else (a model) is a ``RemoteObject``: its attributes and methods are asked for
  (``model.state_dict()`` comes back as a dict of tensors).

A reply is only ever the submission's answer: replacing ``torch.allclose`` or ``abs`` in the
kernel, printing a forged reply or hooking IPython changes nothing here. The names a test
takes from the grader itself (``GRADER_NAMES``: ``torch``, ``np``, ``sp``, ``math``, ``In``,
the submission's code cells that ran so far) are never the submission's. Tested by
``tests/test_coursework_remote.py``.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import doctest
import io
import json
import re
import textwrap
import time
from pathlib import Path

import coursework_channel as channel
from coursework_answer import MARK, tensors_in

from dmlbook.exercises.assignment_rules import parse_cell

_CHECK = re.compile(r"""grader\.check\(\s*["'](\w+)["']\s*\)""")
# The cells otter writes into a release (its set-up and the public checks): not run when
# grading (the public checks are the student's own business; the graded run needs no otter).
_OTTER_CELL = re.compile(
    r"""(# Initialize Otter\s+import otter\s+grader = otter\.Notebook\(["'][\w.-]+["']\))"""
    r"""|(grader\.check\(\s*["']\w+["']\s*\))"""
)


def is_otter_cell(source: str) -> bool:
    """Whether a cell is one otter wrote (``grader = otter.Notebook(...)``, ``grader.check``)."""
    return _OTTER_CELL.fullmatch(source.strip()) is not None


def questions_of(tests: dict[str, str]) -> dict[str, dict[str, str]]:
    """The tests grouped by question (``q1.py`` -> ``q1``), in order."""
    out: dict[str, dict[str, str]] = {}
    for name, source in tests.items():
        out.setdefault(Path(name).stem, {})[name] = source
    return out


def boundaries(nb, questions) -> dict[str, int]:
    """The cell after which each question is graded: its ``grader.check("qN")`` cell.

    A question whose check cell is missing is graded after the last cell.
    """
    where: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for m in _CHECK.finditer(cell.source):
                if m[1] in questions:
                    where.setdefault(m[1], index)
    return where


class KernelGone(Exception):
    """The kernel died or the time ran out while a test called into it (``why``: the stop)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class AnswerFailed(Exception):
    """The submission's answer raised, or sent back something that is not plain data."""


def grader_names(history: list[str]) -> dict:
    """What a test may use without importing it, all of the grader's own making."""
    import math

    import numpy as np
    import sympy as sp
    import torch

    return {"torch": torch, "np": np, "sp": sp, "math": math, "In": ["", *history]}


GRADER_NAMES = frozenset({"torch", "np", "sp", "math", "In"})


def cases_of(source: str, path: str = "test") -> list[tuple[str, str]]:
    """An otter test file's cases, ``(name, doctest)``, named as otter names them (``q1 - 2``).

    Read here, without otter (which the Gradescope environment does not install): one suite
    of doctests, as ``otter.test_files.ok_test.OKTestFile.from_spec`` reads it.
    """
    spec: dict = {}
    exec(compile(source, path, "exec"), spec)  # the instructor's own test file
    test = spec["test"]
    (suite,) = test["suites"]
    return [
        (case.get("name", f"{test['name']} - {i + 1}"), textwrap.dedent(case["code"]))
        for i, case in enumerate(suite["cases"])
    ]


def run_case(name: str, body: str, env: dict) -> tuple[bool, str]:
    """Run one doctest case in ``env`` (as otter's ``run_doctest``): ``(passed, report)``."""
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(verbose=True)
    examples = [e for e in parser.parse(body, name) if isinstance(e, doctest.Example)]
    test = doctest.DocTest(examples, env, name, None, None, body)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        result = runner.run(test, clear_globs=False)
    if result.failed == 0:
        return True, "Test case passed"
    return False, "Test case failed\n" + buffer.getvalue()


def free_names(test_sources: list[str]) -> list[str]:
    """Names the tests' cases load without binding or importing them (not builtins, not ours)."""
    loaded, bound = [], set()
    for source in test_sources:
        for _, body in cases_of(source):
            tree = parse_cell(body, doctest=True)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Name):
                    (loaded.append if isinstance(node.ctx, ast.Load) else bound.add)(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda)):
                    bound.add(getattr(node, "name", ""))
                    bound.update(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    skip = bound | GRADER_NAMES | set(dir(builtins))
    return list(dict.fromkeys(n for n in loaded if n not in skip))


def forbidden_modules(test_sources: list[str]) -> list[str]:
    """The modules the tests' rules forbid: the string arguments of ``obeying(f, ...)`` and
    ``forbidden_imports(In, ...)``; the sandbox lacks them (``coursework_sandbox``)."""
    found: set[str] = set()
    for source in test_sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                tree = parse_cell(node.value, doctest=True)
                for call in ast.walk(tree) if tree is not None else ():
                    if isinstance(call, ast.Call) and getattr(call.func, "id", "") in (
                        "obeying",
                        "forbidden_imports",
                    ):
                        found |= {
                            a.value
                            for a in call.args[1:]
                            if isinstance(a, ast.Constant) and isinstance(a.value, str)
                        }
    return sorted(m for m in found if m.startswith("dmlbook."))


class Channel:
    """Requests to the submission's kernel, one cell each, through an nbclient client."""

    def __init__(self, client, nb, deadline: float) -> None:
        self.client, self.nb, self.deadline = client, nb, deadline
        self.dead: str | None = None
        self.calls = 0

    def ask(self, request: dict) -> dict:
        """Send ``request``; its reply (a dict, ``ok`` true) or ``AnswerFailed``/``KernelGone``."""
        import nbformat
        from nbclient.exceptions import CellTimeoutError, DeadKernelError

        if self.dead:
            raise KernelGone(self.dead)
        text = json.dumps(request, allow_nan=False)
        cell = nbformat.v4.new_code_cell(f"__import__('coursework_answer').serve({text!r})")
        self.nb.cells.append(cell)
        self.calls += 1
        try:
            self.client.timeout = max(1, int(self.deadline - time.monotonic()))
            self.client.execute_cell(cell, len(self.nb.cells) - 1, store_history=False)
        except CellTimeoutError:
            self.dead = "timeout: while the tests called the answers"
        except DeadKernelError:
            self.dead = "crashed: while the tests called the answers"
        finally:
            self.nb.cells.pop()
        if self.dead:
            raise KernelGone(self.dead)
        out = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        lines = [line for line in out.split("\n") if line.startswith(MARK)]  # MARK: \x1e
        if not lines:
            errors = [f"{o['ename']}: {o['evalue'][:300]}" for o in cell.outputs if "ename" in o]
            raise AnswerFailed("no answer came back from the kernel " + "; ".join(errors))
        try:
            reply = json.loads(lines[-1][len(MARK) :])
        except ValueError as err:
            raise AnswerFailed(f"the kernel's reply is not plain data ({err})") from None
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            error = reply.get("error", "?") if isinstance(reply, dict) else "?"
            trace = reply.get("traceback", "") if isinstance(reply, dict) else ""
            raise AnswerFailed(f"{error}\n{trace}".strip())
        return reply

    def decode(self, data):
        try:
            return channel.decode(data, lambda key, kind: RemoteObject(self, key, kind))
        except (ValueError, TypeError, KeyError) as err:
            raise AnswerFailed(f"the answer is not plain data ({err})") from None


def _encode_arg(value):
    def handle(obj):
        if isinstance(obj, RemoteObject):
            return obj._key
        raise channel.Unencodable(f"a test passed a {type(obj).__name__} to the answer")

    return channel.encode(value, handle)


def _grad_function():
    import torch

    class _RemoteGrad(torch.autograd.Function):
        """Outputs computed in the kernel, joined to the grader's inputs for autograd."""

        @staticmethod
        def forward(ctx, link, n_out, *tensors):
            ctx.link, ctx.n_out = link, n_out
            ctx.dtypes = [t.dtype for t in tensors[n_out:]]
            return tuple(t.clone() for t in tensors[:n_out])

        @staticmethod
        def backward(ctx, *grads):
            channel_, call = ctx.link
            reply = channel_.ask(
                {"op": "vjp", "call": call, "grads": [channel.encode(g) for g in grads]}
            )
            got = [None if g is None else channel_.decode(g) for g in reply["grads"]]
            if len(got) != len(ctx.dtypes):
                raise AnswerFailed("the kernel sent gradients for other inputs")
            got = [None if g is None else g.to(d) for g, d in zip(got, ctx.dtypes, strict=True)]
            return (None, None, *([None] * ctx.n_out), *got)

    return _RemoteGrad


def _replace(value, swap: dict):
    """``value`` with each tensor ``t`` for which ``id(t)`` is in ``swap`` replaced."""
    if id(value) in swap:
        return swap[id(value)]
    if isinstance(value, list):
        return [_replace(v, swap) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace(v, swap) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, swap) for k, v in value.items()}
    return value


def _remote_call(chan: Channel, target: dict, args: tuple, kwargs: dict):
    import torch

    try:
        request = {"op": "call", "target": target, "args": _encode_arg(args)}
        request["kwargs"] = _encode_arg(kwargs)
    except channel.Unencodable as err:
        raise TypeError(str(err)) from None
    request["grad"] = torch.is_grad_enabled()
    request["inference"] = torch.is_inference_mode_enabled()
    reply = chan.ask(request)
    inputs = tensors_in([args, kwargs])
    for index, data in reply.get("changed", []):
        new = chan.decode(data)
        with torch.no_grad():
            old = inputs[int(index)]
            if isinstance(new, torch.Tensor) and new.shape == old.shape:
                old.copy_(new.to(old.dtype))
            else:
                old.data = new
    result = chan.decode(reply["value"])
    outputs = [t for t in tensors_in(result) if t.requires_grad]
    ins = [t for t in inputs if t.requires_grad]
    if outputs and ins and torch.is_grad_enabled():
        joined = _grad_function().apply(
            (chan, reply["call"]), len(outputs), *[o.detach() for o in outputs], *ins
        )
        result = _replace(result, {id(o): j for o, j in zip(outputs, joined, strict=True)})
    return result


class RemoteFunction:
    """A function the submission defines; calling it calls it in the kernel (module docstring)."""

    def __init__(self, chan: Channel, name: str) -> None:
        self._chan, self.__name__, self.__qualname__ = chan, name, name
        self.__doc__ = f"the submission's {name} (runs in its sandbox)"

    def __call__(self, *args, **kwargs):
        return _remote_call(self._chan, {"name": self.__name__}, args, kwargs)

    def __repr__(self) -> str:
        return f"<the submission's function {self.__name__}>"


class RemoteObject:
    """An object that stays in the kernel: attributes and calls are asked for."""

    def __init__(self, chan: Channel, key: int, kind: str) -> None:
        object.__setattr__(self, "_chan", chan)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        reply = self._chan.ask({"op": "getattr", "handle": self._key, "name": name})
        return self._chan.decode(reply["value"])

    def __call__(self, *args, **kwargs):
        return _remote_call(self._chan, {"handle": self._key}, args, kwargs)

    def __repr__(self) -> str:
        return f"<the submission's {self._kind} object>"


def answers(chan: Channel, names: list[str]) -> dict:
    """The submission's answers for ``names`` (missing ones left out: the test's NameError)."""
    if not names:
        return {}
    reply = chan.ask({"op": "describe", "names": names})
    out = {}
    for name in names:
        found = reply["names"].get(name, {}) if isinstance(reply.get("names"), dict) else {}
        kind = found.get("kind") if isinstance(found, dict) else None
        if kind == "function":
            out[name] = RemoteFunction(chan, name)
        elif kind == "value":
            out[name] = chan.decode(found.get("value"))
    return out


def run_question(chan: Channel, tests: dict[str, str], history: list[str]) -> dict:
    """Run ``tests`` (file name -> source) here: ``{case name: [passed, message]}``."""
    results: dict[str, list] = {}
    try:
        found = answers(chan, free_names(list(tests.values())))
    except AnswerFailed as err:
        found = {}
        failure = str(err)
    else:
        failure = ""
    for name, source in tests.items():
        env = grader_names(history) | found  # one namespace per test file, as otter's
        for case, body in cases_of(source, name):
            passed, message = run_case(case, body, env)
            message = message[-4000:]
            if failure and not passed:
                message = f"{message}\n(the answers could not be read: {failure[:500]})"
            results[case] = [passed, message]
    return results
