"""Where a proof holds: the quantities it divides by, and the conditions that keep them nonzero.

SymPy simplifies while an expression is being built: ``Hinge(s) * x / Hinge(s)`` *is* ``x`` by
the time any function sees it, and ``(exp(s) - 1) / (exp(s) - 1)`` is ``1``, although both are
undefined where the cancelled factor vanishes (``s <= 0``, ``s = 0``). A proof of ``x == x``
then "proves" a statement that is false at those points. Two tools keep the division visible:

* :func:`as_written` is a context manager (SymPy's ``evaluate(False)``) inside which the two
  sides of a statement keep every factor as typed; :func:`~dmlbook.symbolic.proofs.prove_equal`
  takes the sides as zero-argument callables and builds them that way itself (or as a
  definition and the values derived from it, with its conditions: :mod:`.sides`);
* :func:`divisors` lists the bases of the powers whose exponent may be negative (what an
  expression may divide by); :func:`unmet` keeps, of every point where an expression may be
  undefined (:func:`~dmlbook.symbolic.domain.requirements`: divisions, logs, poles, sum
  ranges), those that neither the symbols' assumptions nor the conditions the caller states
  (``where=``) exclude, and :func:`unguarded` names their quantities.

A statement whose denominators may vanish is proved only together with its condition:
``prove_equal(a, b, where=[sp.Ne(d, 0)])`` or ``where=[s > 0]``. Without one,
``prove_equal`` refuses it and names the denominator. Tests: ``tests/symbolic/test_conditions.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import sympy as sp

from .domain import Requirement, requirements

__all__ = [
    "as_written",
    "build_as_written",
    "describe",
    "divisors",
    "evaluated",
    "unguarded",
    "unmet",
    "unmet_requirements",
]


@contextmanager
def as_written() -> Iterator[None]:
    """Build expressions without SymPy's automatic simplification (no factor is cancelled).

    >>> import sympy as sp
    >>> s = sp.Symbol("s", real=True)
    >>> with as_written():
    ...     ratio = (sp.exp(s) - 1) / (sp.exp(s) - 1)
    >>> divisors(ratio)
    [exp(s) - 1]
    """
    with sp.evaluate(False):
        yield


def build_as_written(side: object) -> object:
    """``side()`` built inside :func:`as_written` when ``side`` is callable, else ``side``."""
    if callable(side) and not isinstance(side, sp.Basic):
        with as_written():
            return side()
    return side


def divisors(expr: sp.Basic) -> list[sp.Expr]:
    """The bases of the powers in ``expr`` whose exponent may be negative: what it may divide by.

    ``1/d`` and ``d**(-1/2)`` contribute ``d``, and so does ``d**x`` for an exponent ``x`` not
    known to be ``>= 0`` (at ``x = -1`` it is ``1/d``); ``d**a`` with ``a >= 0`` does not.
    """
    found = {
        evaluated(r.quantity) for r in requirements(expr) if r.source == "power" and not r.bound
    }
    return sorted(found, key=sp.default_sort_key)


def _substitution(condition: sp.Basic) -> dict[sp.Symbol, sp.Expr]:
    """A relation on one symbol, ``s > c``, ``s < c``, ``s >= 0``, ``Ne(s, 0)``..., as a
    replacement of ``s`` by an expression that satisfies it by its assumptions."""
    if not isinstance(condition, sp.core.relational.Relational):
        return {}
    lhs, rhs = condition.lhs, condition.rhs
    if isinstance(rhs, sp.Symbol) and not isinstance(lhs, sp.Symbol):
        condition = condition.reversed
        lhs, rhs = condition.lhs, condition.rhs
    if not isinstance(lhs, sp.Symbol) or not rhs.is_number:
        return {}
    integer = {"integer": True} if lhs.is_integer and rhs.is_integer else {}
    if isinstance(condition, sp.Ne) and rhs == 0:
        return {lhs: sp.Dummy(lhs.name, real=True, nonzero=True, **integer)}
    # s > c: s = c + t (t > 0); s >= c: t >= 0; s < c: s = c - t (t > 0); s <= c: t >= 0
    sides = {
        sp.StrictGreaterThan: (1, "positive"),
        sp.GreaterThan: (1, "nonnegative"),
        sp.StrictLessThan: (-1, "positive"),
        sp.LessThan: (-1, "nonnegative"),
    }
    if type(condition) not in sides:
        return {}
    sign, assumption = sides[type(condition)]
    return {lhs: rhs + sign * sp.Dummy(lhs.name, **{assumption: True}, **integer)}


def _nonzero_facts(where: Iterable[sp.Basic]) -> list[sp.Expr]:
    return [c.lhs - c.rhs for c in where if isinstance(c, sp.Ne)]


def _known_nonzero(d: sp.Expr, facts: Sequence[sp.Expr], subs: dict) -> bool:
    if d.xreplace(subs).is_zero is False:
        return True
    if any(sp.simplify(d - f) == 0 or sp.simplify(d + f) == 0 for f in facts):
        return True
    if isinstance(d, sp.Mul):
        return all(_known_nonzero(a, facts, subs) for a in d.args)
    if isinstance(d, sp.Pow) and d.exp.is_positive:
        return _known_nonzero(d.base, facts, subs)
    return False


def _known_nonnegative(n: sp.Expr, where: Sequence[sp.Basic], subs: dict) -> bool:
    if n.xreplace(subs).is_nonnegative:
        return True
    lower = [c.lhs - c.rhs for c in where if isinstance(c, sp.GreaterThan | sp.StrictGreaterThan)]
    lower += [c.rhs - c.lhs for c in where if isinstance(c, sp.LessThan | sp.StrictLessThan)]
    return any(sp.simplify(n - f).is_nonnegative for f in lower)


def _range_cases(bound: Sequence[tuple]) -> list[dict]:
    """Ways to write the summation indices ``k`` in ``low..high``: ``low + t`` and ``high - t``
    (``t >= 0`` an integer); a requirement holds on the range if it holds in either form."""
    cases: list[dict] = [{}]
    for k, lo, hi in bound:
        t = sp.Dummy(f"{k}_offset", integer=True, nonnegative=True)
        cases = [c | {k: e.xreplace(c)} for c in cases for e in (lo + t, hi - t)]
    return cases


def _met(r: Requirement, where: Sequence[sp.Basic], facts: list, subs: dict) -> bool:
    try:
        return _met_in_some_case(r, where, facts, subs)
    except (ArithmeticError, TypeError, ValueError, RecursionError):
        return False  # SymPy could not decide (evaluation at a pole, ...): not established


def _met_in_some_case(r: Requirement, where: Sequence, facts: list, subs: dict) -> bool:
    for case in _range_cases(r.bound):
        q = r.quantity.xreplace(case) if case else r.quantity
        if r.kind == "nonzero" and _known_nonzero(q, facts, subs):
            return True
        if r.kind == "nonnegative" and _known_nonnegative(q, where, subs):
            return True
        if r.kind == "real" and q.xreplace(subs).is_real:
            return True
    return False


def unmet(expr: sp.Basic, where: Sequence[sp.Basic] = ()) -> list[Requirement]:
    """The :func:`~dmlbook.symbolic.domain.requirements` of ``expr`` that neither the symbols'
    assumptions nor the conditions ``where`` (as for :func:`unguarded`) establish."""
    return unmet_requirements(requirements(expr), where)


def unmet_requirements(
    reqs: Sequence[Requirement], where: Sequence[sp.Basic] = ()
) -> list[Requirement]:
    """Those of ``reqs`` that neither the symbols' assumptions nor ``where`` establish (for the
    conditions a :func:`~dmlbook.symbolic.sides.derived` side carries from its definition)."""
    where = [sp.sympify(c) for c in where]
    subs: dict = {}
    for c in where:
        subs |= _substitution(c)
    facts = _nonzero_facts(where)
    return [r for r in reqs if not _met(r, where, facts, subs)]


def unguarded(expr: sp.Basic, where: Sequence[sp.Basic] = ()) -> list[sp.Expr]:
    """The quantities that may be 0 (or a summation range that may be reversed) for the
    symbols' assumptions and ``where``: each point where ``expr`` may be undefined.

    Parameters
    ----------
    expr : Expr
        Built as written (:func:`as_written`) where a cancellation would hide a division.
    where : sequence of relations
        The conditions the statement is claimed under: ``sp.Ne(d, 0)`` for a quantity ``d``
        (covers ``d``, ``-d``, its powers and products of covered factors), or a relation of
        one symbol with a number (``s > 0``, ``s < 1``, ``s >= 0``, ``sp.Ne(s, 0)``), which is
        applied as an assumption on that symbol (``m >= 0`` also makes ``Sum(f, (k, 1, m))``'s
        range at least empty, never reversed).
    """
    return list(dict.fromkeys(evaluated(r.quantity) for r in unmet(expr, where)))


def evaluated(expr: sp.Basic) -> sp.Basic:
    """``expr`` rebuilt with SymPy's usual evaluation (undo :func:`as_written`)."""
    if not isinstance(expr, sp.Basic) or not expr.args:
        return expr
    try:
        return expr.func(*[evaluated(a) for a in expr.args])
    except (TypeError, ValueError):
        return expr


def describe(denominators: Sequence[sp.Expr]) -> str:
    """``'d1 != 0, d2 != 0'`` for a message."""
    return ", ".join(f"{sp.sstr(d)} != 0" for d in denominators)
