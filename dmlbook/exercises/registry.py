"""Self-checks for the book's exercises: ``check("4.2", my_answer)`` says right or wrong.

Chapter: every chapter's last section ("Exercises"); the exercises with a self-check end with the
call to make, e.g. ``check("2.3", w)``. Tests: ``tests/exercises/test_registry.py``,
``tests/exercises/test_basics.py``, ``tests/exercises/test_advanced.py`` (a right and a wrong
answer for every entry, the expected values worked by hand from the statements).

One entry per exercise whose answer is a number, an expression or a function
(:mod:`dmlbook.exercises.basics` for Chapters 1-9, :mod:`dmlbook.exercises.advanced` for
10-15 and the appendix). Each entry holds what the statement asks for (the form of the answer),
the section to re-read, and a *test*: a function that recomputes what it needs from the
statement's data and the package (a loss, the papers' table, SymPy), so that no printed number
stands in the source for most answers. What a student sees is only "right" or "not yet, re-read
Section ...": never the expected value. Numbers are compared with a tolerance suited to a hand
calculation; expressions are proved equal with :func:`dmlbook.symbolic.prove_equal` under the
exercise's assumptions (``False`` there means "not proved", so a correct but unusual form can be
reported wrong: the message says so); functions are called on random batches and compared with
the package.

Limits, stated honestly: this is feedback, not grading. A determined student can read this
package's source (or call the test function) and work an expected value out of it; the checks
keep answers out of sight, not out of reach. They run offline and in the student's own kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from tokenize import TokenError

import numpy as np
import sympy as sp
import torch

from ..symbolic import prebuilt, prove_equal
from ..symbolic.sides import Derived


class WrongForm(ValueError):
    """The answer is not of the form the exercise asks for (shape, type, symbols)."""


@dataclass(frozen=True)
class Exercise:
    """One self-check: the exercise's number, the answer's form, where to re-read, the test."""

    number: str
    expects: str
    reread: str
    test: Callable[[object], bool]


EXERCISES: dict[str, Exercise] = {}


def exercise(number: str, expects: str, reread: str) -> Callable:
    """Register the decorated ``test(answer) -> bool`` as the self-check of ``number``."""

    def register(test: Callable[[object], bool]) -> Callable[[object], bool]:
        if number in EXERCISES:
            raise ValueError(f"exercise {number} has two self-checks")
        EXERCISES[number] = Exercise(number, expects, reread, test)
        return test

    return register


def check(number: str, answer: object, *, quiet: bool = False) -> bool:
    """Check ``answer`` to exercise ``number``; print right or wrong (with where to re-read).

    Parameters
    ----------
    number : str
        The exercise, as the book numbers it: ``"4.2"``.
    answer : object
        What the exercise's statement asks for (its last sentence names the form).
    quiet : bool
        Return the verdict without printing it.

    Returns
    -------
    bool
        ``True`` when the answer is right.
    """
    entry = EXERCISES.get(str(number))
    if entry is None:
        known = ", ".join(sorted(EXERCISES, key=_order))
        raise ValueError(f"no self-check for exercise {number!r}; exercises with one: {known}")
    try:
        right = bool(entry.test(answer))
        why = "" if right else f" Re-read {entry.reread}."
    except WrongForm as e:
        right, why = False, f" Expected {entry.expects}: {e}."
    if not quiet:
        verdict = "right." if right else "not yet."
        print(f"Exercise {entry.number}: {verdict}{why}")
    return right


def _order(number: str) -> tuple[int, int]:
    chapter, k = number.split(".")
    return int(chapter), int(k)


# ---- helpers the entries share ------------------------------------------------------------


def numbers(answer: object, n: int) -> list[float]:
    """``answer`` as ``n`` floats (a number, a sequence, an array or a tensor)."""
    try:
        flat = np.asarray(
            answer.detach().cpu() if isinstance(answer, torch.Tensor) else answer, dtype=float
        ).ravel()
    except (TypeError, ValueError):
        raise WrongForm(f"got {type(answer).__name__}, not numbers") from None
    if flat.size != n:
        raise WrongForm(f"got {flat.size} number(s), not {n}")
    return [float(v) for v in flat]


def close(got: Iterable[float], want: Iterable[float], tol: float) -> bool:
    """Every ``got`` within ``tol`` of ``want`` (relative for large values), infinities equal."""
    for g, w in zip(got, want, strict=True):
        if math.isinf(w) or math.isinf(g):
            if g != w:
                return False
        elif not abs(g - w) <= tol * max(1.0, abs(w)):
            return False
    return True


def matrix(answer: object, shape: tuple[int, ...]) -> torch.Tensor:
    """``answer`` as a float64 tensor of ``shape``."""
    try:
        if isinstance(answer, torch.Tensor):
            t = answer.detach().cpu().to(torch.float64)
        else:
            t = torch.as_tensor(np.asarray(answer, dtype=float), dtype=torch.float64)
    except (TypeError, ValueError):
        raise WrongForm(f"got {type(answer).__name__}, not numbers") from None
    if tuple(t.shape) != shape:
        raise WrongForm(f"got shape {tuple(t.shape)}, not {shape}")
    return t


def expression(answer: object, symbols: Mapping[str, sp.Symbol]) -> sp.Expr:
    """``answer`` (a SymPy expression, a string or a number) on the exercise's own symbols.

    Symbols are matched by name (``lam`` also stands for ``lambda``), so a student's
    ``sp.Symbol("m")`` becomes the exercise's ``m`` with its assumptions; floats become exact
    rationals (``0.5`` is ``1/2``), as :func:`prove_equal` requires.
    """
    names = dict(symbols)
    if "lambda" in names:
        names.setdefault("lam", names["lambda"])
    if isinstance(answer, str):
        try:
            expr = sp.parse_expr(answer.replace("lambda", "lam"), local_dict=names)
        except (SyntaxError, TypeError, sp.SympifyError, TokenError) as e:
            raise WrongForm(f"cannot read {answer!r} as an expression ({e})") from None
    else:
        try:
            expr = sp.sympify(answer)
        except (sp.SympifyError, TypeError):
            raise WrongForm(f"got {type(answer).__name__}, not an expression") from None
    unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in names)
    if unknown:
        raise WrongForm(f"unknown symbol(s) {', '.join(unknown)}; use {', '.join(symbols)}")
    expr = expr.subs({s: names[str(s)] for s in expr.free_symbols}, simultaneous=True)
    return sp.nsimplify(expr, rational=True)


def proved(a: sp.Expr, b: object, where: Iterable[sp.Basic] = ()) -> bool:
    """:func:`prove_equal`, quietly; a refusal (a ``Float`` left, a division) is ``False``.

    ``a`` is the student's answer (or what the check computed from it); ``b`` the reference, a
    side of :func:`prove_equal` (``lambda: <as typed>``, or a value
    :func:`~dmlbook.symbolic.sides.derived` from a definition), so that its divisions stay
    visible: a reference given as a value is refused (``TypeError``, an error of the exercise's
    author, raised before any answer is judged).
    """
    if not (callable(b) or isinstance(b, Derived)):
        raise TypeError(
            f"proved: the reference {b!r} is a value built before the check; pass it as typed "
            "(lambda: <expression>) or derived from its definition (derived(sp.diff, lambda: "
            "<definition>, s))."
        )
    # The student's answer is prebuilt (unchecked for cancellations), on purpose: it is a value
    # the student's code built before the check (or parsed from a string, which SymPy
    # evaluates), so no definition of it exists to derive it from; the check is about that value.
    try:
        return prove_equal(prebuilt(lambda: a), b, where=tuple(where), verbose=False)
    except (ValueError, TypeError):
        return False


def call(fn: object, *args: object) -> object:
    """Call the student's function; its failure is reported as a wrong form."""
    if not callable(fn):
        raise WrongForm(f"got {type(fn).__name__}, not a function")
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 (whatever it raised, the student is told)
        raise WrongForm(f"your function raised {type(e).__name__}: {e}") from None


def triples(answer: object) -> set[tuple[int, int, int]]:
    """``answer`` as a set of integer triples."""
    try:
        found = {tuple(int(v) for v in t) for t in answer}
    except (TypeError, ValueError):
        raise WrongForm("not a list of (anchor, positive, negative) triples") from None
    if any(len(t) != 3 for t in found):
        raise WrongForm("every item must be an (anchor, positive, negative) triple")
    return found
