"""Where an expression is defined (:mod:`dmlbook.symbolic.domain`), and the named traps
(``tests/symbolic/traps.py``) that ``prove_equal`` must refuse without their condition.

Each trap's bad point is checked by substitution (``tests/symbolic/pointwise.py``, no code of
the module under test): there a side is undefined or the sides differ.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import sympy as sp

from dmlbook import symbolic as sy
from dmlbook.symbolic.conditions import build_as_written, unguarded
from dmlbook.symbolic.domain import refusals, requirements

from .pointwise import differ, value_at
from .traps import PREBUILT, TRAPS, k, m, n, s, x

p = sp.Symbol("p", positive=True)


def _typed(trap):
    """The trap's sides as prove_equal takes them: a pre-built trap side (an unevaluated
    construction, or a limit or sum SymPy keeps as typed) is passed as ``sy.prebuilt``: a callable
    returning it would read an expression built before the call, which prove_equal refuses."""
    return [side if callable(side) else sy.prebuilt(side) for side in (trap.a, trap.b)]


@pytest.mark.parametrize("trap", TRAPS, ids=[t.name for t in TRAPS])
def test_every_trap_is_refused_and_proved_only_with_its_condition(trap):
    a, b = build_as_written(trap.a), build_as_written(trap.b)
    at_bad = value_at(a, trap.bad), value_at(b, trap.bad)
    assert None in at_bad or differ(*at_bad), "the trap's bad point shows nothing"
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert sy.prove_equal(*_typed(trap)) is False
    assert "refused" in shown.getvalue() or "not proved" in shown.getvalue()
    if trap.where is not None:
        assert sy.prove_equal(*_typed(trap), where=trap.where) is True


@pytest.mark.parametrize("name", PREBUILT)
def test_prebuilt_traps_are_refused_and_say_how_to_pass_the_side(name):
    """Issue 38: SymPy cancels while it builds (``s*x/s`` is already ``x``), so a pre-built side
    cannot show what was typed; prove_equal refuses it and says to pass ``lambda: ...``. The
    statement as typed (the callable trap of the same name) is refused too."""
    a, b = PREBUILT[name]
    for sides in ((a, b), (lambda: a, b), (a, lambda: b)):
        with pytest.raises(TypeError, match=r"built before the call.*lambda: <|reads"):
            sy.prove_equal(*sides)
    (typed,) = [t for t in TRAPS if t.name.startswith(name)][:1]
    assert callable(typed.a) and sy.prove_equal(*_typed(typed), verbose=False) is False


def test_python_integers_and_callables_are_the_sides_it_accepts():
    assert sy.prove_equal(lambda: (s + 1) ** 2, lambda: s**2 + 2 * s + 1)
    assert sy.prove_equal(
        lambda: sp.Matrix([s - s, 2 * s / 2]) - sp.Matrix([0, s]), lambda: sp.zeros(2, 1)
    )
    assert sy.prove_equal(lambda: [s - s, 2 * s / 2], lambda: [0, s])
    assert sy.prove_equal(lambda: s - s, 0) and sy.prove_equal(lambda: {"w": s + 1 - s}, {"w": 1})
    assert sy.prove_equal(lambda: {"w": s / s}, {"w": 1}, verbose=False) is False  # s = 0
    # numpy integers are integers (issue 38): numpy.int64(0) is passed as 0 is
    assert sy.prove_equal(lambda: s - s, np.int64(0)) and sy.prove_equal(
        lambda: [s / s], [np.uint8(1)], where=[s > 0]
    )
    for built in (sp.S.One, s, sp.Matrix([s]), [s], {"w": s}, True, np.bool_(True), 1.0):
        with pytest.raises(TypeError, match="lambda"):
            sy.prove_equal(lambda: s, built)


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
    assert (
        sy.prove_equal(
            sy.prebuilt(lambda: expr),
            sy.prebuilt(lambda: expr + 0 * s),
            where=[s > 0],
            verbose=False,
        )
        is False
    )


def test_what_is_defined_everywhere_needs_nothing():
    f = sp.Function("f", real=True)(s)
    total = sp.exp(s) + sy.Hinge(x) + sp.Abs(s) + sp.Max(s, x) + sp.sqrt(s**2 + 1) + f
    total += sp.Piecewise((s, s > 0), (0, True)) + sp.Limit(sp.sin(s) / s, s, 0)
    assert requirements(total) == [] and refusals(total) == []
    assert sy.prove_equal(lambda: sp.exp(s) * sp.exp(-s), 1)


def test_a_refusal_names_the_condition_to_state():
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        sy.prove_equal(lambda: sp.exp(sp.log(s)), lambda: s)
    assert "s != 0" in shown.getvalue() and "log(s)" in shown.getvalue()
    assert "where=[sp.Ne(s, 0)]" in shown.getvalue()
