"""The rules an assignment states, as checks its hidden tests can run.

An assignment says, for instance, "do not call ``dmlbook.evaluate`` in your answers": the
graders compare a student's function with the book's, so a submission that calls the book's
function would pass every comparison. Two checks enforce such a rule:

* ``calls_into(*modules)``: a context manager that records every call made from outside
  ``dmlbook`` into a function defined in one of ``modules`` (a package counts with its
  submodules), while a test calls the student's function inside it. It sees a call however the
  function was imported or renamed (it reads the called code's file, through
  ``sys.setprofile``), and ignores the calls that the package makes internally.
  ``obeying(function, *modules)`` wraps a student's function so that a call reaching one of
  ``modules`` raises ``RuleBroken``: every test of a question calls the student's function
  through it, so a question answered by calling the book scores nothing.
* ``forbidden_imports(sources, *modules)``: the forbidden modules that cells import or name
  (``import``, ``from ... import``, ``dmlbook.evaluate.<name>``), for answers that are not functions
  (a cell of an experiment); the tests pass the kernel's input history, ``In``. It reads each
  cell through ``parse_cell`` (magics removed), which the coursework tools also use
  (with doctest prompts removed) to list what the tests import.

Used by the tests of ``coursework/`` (book/91_instructors.ipynb lists the rules); tested by
``tests/exercises/test_assignment_rules.py``. When a submission is graded, these checks are not what
enforces a rule: the tests run in the grader's process while the student's function runs in its
sandbox, whose copy of ``dmlbook`` has stubs in place of the modules the tests name here
(``obeying(f, "dmlbook.losses")``: the grader reads the names from the tests), so the forbidden
code is absent there, beyond reach of ``sys.setprofile(None)`` or a computed import. In a
public check that a student runs in their own kernel, they still work as described, as advice.
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

__all__ = ["RuleBroken", "calls_into", "forbidden_imports", "obeying", "parse_cell"]

_PACKAGE = os.path.realpath(Path(__file__).parents[1]) + os.sep


def _where(module: str) -> str:
    """The file (a module) or folder (a package, with a trailing separator) of ``module``."""
    mod = importlib.import_module(module)
    path = os.path.realpath(mod.__file__)
    if Path(path).name == "__init__.py":
        return str(Path(path).parent) + os.sep
    return path


@contextmanager
def calls_into(*modules: str) -> Iterator[list[str]]:
    """Record calls into ``modules`` made from outside dmlbook; yields the list of their names.

    >>> from dmlbook.core.similarity import l2_normalize
    >>> with calls_into("dmlbook.core.similarity") as called:
    ...     _ = l2_normalize(__import__("torch").ones(2, 3))
    >>> called
    ['dmlbook.core.similarity.l2_normalize']
    """
    places = tuple(_where(m) for m in modules)
    called: list[str] = []
    own: dict[str, bool] = {}

    def inside(filename: str, prefixes: tuple[str, ...]) -> bool:
        key = filename + "|" + prefixes[0]
        if key not in own:
            real = os.path.realpath(filename)
            own[key] = any(
                real == p or (p.endswith(os.sep) and real.startswith(p)) for p in prefixes
            )
        return own[key]

    def profile(frame, event, arg):
        if event != "call" or not inside(frame.f_code.co_filename, places):
            return
        caller = frame.f_back
        if caller is not None and inside(caller.f_code.co_filename, (_PACKAGE,)):
            return  # the package calling itself
        called.append(f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_name}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)
        threading.setprofile(None)


class RuleBroken(AssertionError):
    """A student's answer did what the assignment's rules forbid."""


def obeying(function: Callable[..., T], *modules: str) -> Callable[..., T]:
    """``function``, raising ``RuleBroken`` when a call to it reaches one of ``modules``.

    >>> import torch
    >>> from dmlbook.core.similarity import l2_normalize
    >>> obeying(lambda x: l2_normalize(x), "dmlbook.core.similarity")(torch.ones(1, 2))
    Traceback (most recent call last):
    ...
    dmlbook.exercises.assignment_rules.RuleBroken: the answer calls dmlbook.core.similarity.l2_normalize: the rules forbid dmlbook.core.similarity in answers
    """

    @functools.wraps(function)
    def checked(*args: object, **kwargs: object) -> T:
        with calls_into(*modules) as called:
            out = function(*args, **kwargs)
        if called:
            raise RuleBroken(
                f"the answer calls {called[0]}: the rules forbid {', '.join(modules)} in answers"
            )
        return out

    return checked


def _dotted(node: ast.AST) -> str | None:
    """``'dmlbook.evaluate.recall_at_k'`` for the attribute chain of names ``node`` is, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def parse_cell(source: str, doctest: bool = False) -> ast.Module | None:
    """A cell's (or, ``doctest=True``, a doctest's) Python as a syntax tree; None if not Python.

    IPython's magics and shell lines (``%``, ``!``) are left out, and with ``doctest=True`` the
    prompts (``>>> ``, ``... ``) are removed, so that a notebook cell or an otter test reads as
    the code it runs. Never ``doctest=True`` on a student's cell: a prompt inside a docstring
    would turn into code and could make a valid cell unreadable.

    >>> [type(n).__name__ for n in parse_cell("%time x = 1\\n>>> import torch", True).body]
    ['Import']
    """
    code = "\n".join(
        line.strip()[4:] if doctest and line.strip().startswith((">>> ", "... ")) else line
        for line in source.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    )
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def forbidden_imports(sources: Iterable[str], *modules: str) -> list[str]:
    """The names in ``sources`` (cells' code) that import or use one of ``modules``.

    >>> forbidden_imports(["from dmlbook import evaluate", "import torch"], "dmlbook.evaluate")
    ['dmlbook.evaluate']
    """

    def banned(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in modules)

    found = []
    for source in sources:
        tree = parse_cell(str(source))
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute):
                names = [_dotted(node) or ""]
            else:
                continue
            found += [n for n in names if banned(n)]
    return sorted(set(found))
