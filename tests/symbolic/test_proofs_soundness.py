"""A property test of ``prove_equal``'s soundness: random statements from the book's vocabulary
(hinge, exp, log, tan/cot, powers with symbolic or negative exponents, products and quotients,
sums with a symbolic bound, limits), each checked at exact points (rationals, 0, pi/2, reversed
sum ranges) by substitution (``tests/symbolic/pointwise.py``). Whenever ``prove_equal`` says
True, both sides must be defined and equal at every point its ``where`` allows.

Statements are drawn so that many are true where defined (a side against SymPy's
simplification of it, a factor cancelled, an inverse function undone, a sum against SymPy's
closed form, a limit against its value), passed as typed (callables) or pre-built (which
``prove_equal`` must refuse: issue 38), with or without conditions.
``DMLBOOK_SOUNDNESS_EXAMPLES`` sets how many statements (default 1,500: 16-20 s of CPU; 5,000 took
53 s, with 0 false "proved"); ``make soundness`` draws 10,000.
"""

from __future__ import annotations

import itertools
import os
import random

import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy
from dmlbook.symbolic.conditions import as_written, evaluated, unmet

from .pointwise import differ, value_at

S, X = sp.symbols("s x", real=True)
P = sp.Symbol("p", positive=True)
M = sp.Symbol("m", integer=True)
K, T = sp.Symbol("k", integer=True), sp.Symbol("t", positive=True)
LEAVES = [S, X, P, sp.S.Zero, sp.S.One, sp.S.NegativeOne, sp.Integer(2), sp.S.Half]
EXPONENTS = [X, S, M, sp.S.NegativeOne, sp.Integer(2), -sp.S.Half]
VALUES = {
    S: [0, 1, -1, sp.S.Half, -2, sp.pi / 2, sp.pi, 3],
    X: [0, 1, -1, sp.S.Half, -2, sp.pi / 2, 3],
    P: [sp.S.Half, 1, 3],
    M: [-3, -2, -1, 0, 1, 2],
}
UNARY = {"exp": sp.exp, "log": sp.log, "hinge": sy.Hinge, "tan": sp.tan, "cot": sp.cot}


@st.composite
def trees(draw, depth=2):
    """A recipe (nested tuples) for an expression, built later as written."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("leaf", draw(st.sampled_from(LEAVES)))
    kind = draw(st.sampled_from(["add", "mul", "div", "pow", "neg", *UNARY]))
    if kind in ("add", "mul", "div"):
        return (kind, draw(trees(depth - 1)), draw(trees(depth - 1)))
    if kind == "pow":
        return (kind, draw(trees(depth - 1)), draw(st.sampled_from(EXPONENTS)))
    return (kind, draw(trees(depth - 1)))


def build(t):
    kind, *args = t
    if kind == "leaf":
        return args[0]
    if kind == "sum":
        return sp.Sum(build(args[0]), (K, args[1], M))
    if kind == "limit":
        return sp.Limit(build(args[0]), T, 0, "+")
    parts = [build(a) if isinstance(a, tuple) else a for a in args]
    if kind == "add":
        return sp.Add(*parts)
    if kind == "mul":
        return sp.Mul(*parts)
    if kind == "div":
        return sp.Mul(parts[0], sp.Pow(parts[1], -1))
    if kind == "pow":
        return sp.Pow(*parts)
    if kind == "neg":
        return sp.Mul(-1, parts[0])
    if kind == "prod_inv":  # u * v / v
        return sp.Mul(parts[0], parts[1], sp.Pow(parts[1], -1))
    return UNARY[kind](*parts)


SUM_TERMS = [("leaf", sp.S.One), ("leaf", K), ("pow", ("leaf", sp.Integer(2)), K),
             ("pow", ("leaf", K), sp.S.NegativeOne), ("mul", ("leaf", S), ("leaf", K))]  # fmt: skip
LIMIT_BODIES = [("pow", ("leaf", X), T), ("mul", ("leaf", T), ("leaf", X)),
                ("exp", ("mul", ("leaf", T), ("leaf", X))),
                ("div", ("leaf", T), ("add", ("leaf", T), ("leaf", X)))]  # fmt: skip


def _as_written(t):
    with as_written():
        return build(t)


@st.composite
def statements(draw):
    """(a, b, where) with a, b callables or pre-built expressions."""
    how = draw(st.sampled_from(["simplify", "cancel", "inverse", "other", "sum", "limit"]))
    event(f"kind: {how}")
    t = draw(trees())
    if how == "simplify":
        try:
            a, b = t, ("leaf", sp.simplify(evaluated(_as_written(t))))
        except (ArithmeticError, KeyError, TypeError, ValueError, RecursionError):
            assume(False)  # SymPy's simplify crashed building the statement (KeyError: zoo)
    elif how == "cancel":
        a, b = ("prod_inv", t, draw(trees(1))), t
    elif how == "inverse":
        a, b = draw(st.sampled_from([(("exp", ("log", t)), t), (("log", ("exp", t)), t),
                                      (("add", ("log", t), ("neg", ("log", t))), ("leaf", 0)),
                                      (("mul", ("tan", t), ("cot", t)), ("leaf", 1)),
                                      (("mul", ("pow", t, X), ("pow", t, ("neg", ("leaf", X)))),
                                       ("leaf", 1))]))  # fmt: skip
    elif how == "other":
        a, b = t, draw(trees())
    elif how == "sum":
        a = ("sum", draw(st.sampled_from(SUM_TERMS)), draw(st.sampled_from([0, 1])))
        closed = sp.summation(evaluated(_as_written(a[1])), (K, a[2], M))
        b = ("leaf", closed)
    else:
        a = ("limit", draw(st.sampled_from(LIMIT_BODIES)))
        b = ("leaf", sp.limit(evaluated(_as_written(a[1])), T, 0, "+"))
    sides = []
    for side in (a, b):
        if draw(st.integers(0, 7)):  # one side in 8 pre-built (refused at once)
            sides.append(lambda side=side: build(side))
        else:
            sides.append(evaluated(_as_written(side)))
    where = draw(st.sampled_from(["none", "needed", "relation"]))
    if where == "needed":  # exactly the conditions prove_equal would ask for
        conds = []
        for side in (a, b):
            for r in unmet(_as_written(side)):
                if not r.bound:
                    q = evaluated(r.quantity)
                    try:
                        conds.append(sp.Ne(q, 0) if r.kind == "nonzero" else sp.Ge(q, 0))
                    except TypeError:  # q is nan or zoo as SymPy evaluates it: no condition
                        assume(False)
        where = conds
    elif where == "relation":
        where = [draw(st.sampled_from([S > 0, sp.Ne(S, 0), M >= 0, X < 1, sp.Ne(X, 0)]))]
    else:
        where = []
    return sides[0], sides[1], where


def _holds(condition, point) -> bool:
    if isinstance(condition, sp.logic.boolalg.BooleanAtom):
        return bool(condition)
    with_values = value_at(condition.lhs - condition.rhs, point)
    if with_values is None or not with_values.is_real:
        return False
    try:
        return bool(condition.func(with_values, 0))
    except TypeError:  # undecidable at this point: not a point the condition allows
        return False


def _points(expr_symbols, seed):
    symbols = sorted(expr_symbols & set(VALUES), key=sp.default_sort_key)
    grid = list(itertools.product(*(VALUES[v] for v in symbols)))
    random.Random(seed).shuffle(grid)
    return [dict(zip(symbols, values, strict=True)) for values in grid[:120]]


def check_sound(a, b, where) -> None:
    """Fail when prove_equal says True and a point its where allows shows otherwise."""
    if any(isinstance(x, sp.Basic) for x in (a, b)):
        with pytest.raises(TypeError, match="built before the call"):  # issue 38: refused
            sy.prove_equal(a, b, where=where, verbose=False)
        event("pre-built side: refused")
        return
    # the statement's sides are built from recipes holding SymPy leaves (a closed form SymPy
    # computed), so they are passed as prebuilt: built as written, every division checked, but
    # allowed to read those leaves (the rule on reads is tested in test_sides.py)
    a, b = (sy.prebuilt(x) for x in (a, b))
    if sy.prove_equal(a, b, where=where, verbose=False) is not True:
        event("not proved")
        return
    event("proved, checked at points")
    built = [sp.sympify(_as_written_side(x.side)) for x in (a, b)]
    free = set().union(*(e.free_symbols for e in built))
    for point in _points(free, seed=sp.srepr(built[0])):
        if not all(_holds(c, point) for c in where):
            continue
        va, vb = (value_at(e, point) for e in built)
        assert va is not None and vb is not None and not differ(va, vb), (
            f"prove_equal proved {built[0]} == {built[1]} (where={where}), but at {point} the "
            f"sides are {va} and {vb}"
        )


def _as_written_side(side):
    if callable(side) and not isinstance(side, sp.Basic):
        with as_written():
            return side()
    return side


EXAMPLES = int(os.environ.get("DMLBOOK_SOUNDNESS_EXAMPLES", "1500"))


#: The suite's run draws the same statements every time (no flaky CI); ``make soundness`` and any
#: ``DMLBOOK_SOUNDNESS_EXAMPLES`` draw new ones.
DERANDOMIZE = "DMLBOOK_SOUNDNESS_EXAMPLES" not in os.environ


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=DERANDOMIZE,
)
@given(statement=statements())
def test_prove_equal_never_proves_a_statement_false_or_undefined_somewhere(statement):
    check_sound(*statement)
