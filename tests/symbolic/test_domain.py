"""Where an expression is defined (:mod:`dmlbook.symbolic.domain`), and the named traps
(``tests/symbolic/traps.py``) that ``prove_equal`` must refuse without their condition.

Each trap's bad point is checked by substitution (``tests/symbolic/pointwise.py``, no code of
the module under test): there a side is undefined or the sides differ.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import sympy as sp

from dmlbook import symbolic as sy
from dmlbook.symbolic.conditions import build_as_written, unguarded
from dmlbook.symbolic.domain import refusals, requirements

from .pointwise import differ, value_at
from .traps import PREBUILT, TRAPS, k, m, n, s, x

p = sp.Symbol("p", positive=True)


@pytest.mark.parametrize("trap", TRAPS, ids=[t.name for t in TRAPS])
def test_every_trap_is_refused_and_proved_only_with_its_condition(trap):
    a, b = build_as_written(trap.a), build_as_written(trap.b)
    at_bad = value_at(a, trap.bad), value_at(b, trap.bad)
    assert None in at_bad or differ(*at_bad), "the trap's bad point shows nothing"
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert sy.prove_equal(trap.a, trap.b) is False
    assert "refused" in shown.getvalue() or "not proved" in shown.getvalue()
    if trap.where is not None:
        assert sy.prove_equal(trap.a, trap.b, where=trap.where) is True


@pytest.mark.parametrize("name", PREBUILT)
def test_prebuilt_traps_reach_prove_equal_already_cancelled(name):
    """What the rule in prove_equal's docstring is about: SymPy's construction leaves no trace
    of the cancelled factor, so the verdict is about the received statement (true), and the
    statement as typed is the callable trap of the same name, which is refused."""
    a, b = PREBUILT[name]
    assert a == b
    (typed,) = [t for t in TRAPS if t.name.startswith(name)][:1]
    assert callable(typed.a) and sy.prove_equal(typed.a, typed.b, verbose=False) is False


@pytest.mark.parametrize(
    ("expr", "needed"),
    [
        (s**x, [s]),  # x may be negative
        (s**p + sp.exp(-s), []),  # p > 0: no division
        (s**n, [s]),
        (s**2 + 1 / (s**2 + 1), [s**2 + 1]),
        (sp.log(x - 1), [x - 1]),
        (sp.tan(s) + sp.sec(x), [sp.cos(s), sp.cos(x)]),
        (sp.cot(s) + sp.csc(x), [sp.sin(s), sp.sin(x)]),
        (sp.coth(s) + sp.tanh(x), [sp.sinh(s), sp.cosh(x)]),
        (sp.Sum(k, (k, 1, m)), [m]),
        (sp.Sum(k, (k, 1, p)), []),
    ],
)
def test_requirements_name_every_point_where_an_expression_may_be_undefined(expr, needed):
    got = {r.quantity for r in requirements(expr)}
    assert got == set(needed)


def test_a_sum_term_undefined_inside_the_range_is_a_requirement():
    (r,) = requirements(sp.Sum(1 / k, (k, 0, 3)))
    assert r.quantity == k and r.bound == ((k, 0, 3),)
    assert unguarded(sp.Sum(1 / k, (k, 0, 3))) == [k]
    assert unguarded(sp.Sum(1 / k, (k, 1, m)), [m >= 0]) == []  # k = 1 + t never 0
    assert unguarded(sp.Sum(1 / (k - 5), (k, 1, 3))) == []  # k = 3 - t never 5


def test_the_conditions_that_make_a_sum_range_empty_at_most():
    assert unguarded(sp.Sum(1, (k, 1, m))) == [m]
    assert unguarded(sp.Sum(1, (k, 1, m)), [m >= 0]) == []
    assert unguarded(sp.Sum(1, (k, 1, m)), [m > -1]) == []
    assert unguarded(sp.Sum(1, (k, 1, m)), [m >= -1]) == [m]  # m = -1 reverses 1..-1


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        (sp.Limit(x**s, s, 0, "+"), "parameter"),
        (sp.Limit(sp.sin(s) / s, s, x), "parameter"),
        (sp.Sum(1 / k**2, (k, 1, sp.oo)), "infinity"),
        (sp.Piecewise((1, s > 0)), "default"),
        (sp.gamma(s), "gamma"),
        (sp.Integral(s, (s, 0, x)), "integral"),
        (sp.zoo * s, "zoo"),
    ],
)
def test_constructions_no_condition_can_rescue_are_refused(expr, says):
    (why,) = refusals(expr)
    assert says in why
    assert sy.prove_equal(expr, expr + 0 * s, where=[s > 0], verbose=False) is False


def test_what_is_defined_everywhere_needs_nothing():
    f = sp.Function("f", real=True)(s)
    total = sp.exp(s) + sy.Hinge(x) + sp.Abs(s) + sp.Max(s, x) + sp.sqrt(s**2 + 1) + f
    total += sp.Piecewise((s, s > 0), (0, True)) + sp.Limit(sp.sin(s) / s, s, 0)
    assert requirements(total) == [] and refusals(total) == []
    assert sy.prove_equal(lambda: sp.exp(s) * sp.exp(-s), 1)


def test_a_refusal_names_the_condition_to_state():
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        sy.prove_equal(lambda: sp.exp(sp.log(s)), s)
    assert "s != 0" in shown.getvalue() and "log(s)" in shown.getvalue()
    assert "where=[sp.Ne(s, 0)]" in shown.getvalue()
