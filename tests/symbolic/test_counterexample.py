"""Tests of ``dmlbook.symbolic.counterexample``: the evidence for "these two forms differ".

Every expected value is computed here independently (by hand, with ``math`` or ``fractions``),
never taken from the function under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy

X = sp.Symbol("x", real=True)
LAM = sp.Symbol("lambda", positive=True)


def test_polynomials_differing_by_a_rational_give_an_exact_certificate():
    c = sy.counterexample(X**2, X * X + sp.Rational(1, 3))
    assert c is not None and c.exact
    x = Fraction(str(c.point[X]))
    assert c.lhs == sp.Rational(x * x) and c.rhs == sp.Rational(x * x + Fraction(1, 3))
    assert c.difference == sp.Rational(-1, 3)
    assert (
        str(c) == f"at x = {c.point[X]}: a = {c.lhs}, b = {c.rhs}, a - b = -1/3 (nonzero exactly)"
    )


def test_transcendental_difference_is_reported_numerically_with_exact_values():
    c = sy.counterexample(sp.exp(X), 1 + X)
    assert c is not None and not c.exact
    x = float(c.point[X])
    assert x != 0  # exp(x) = 1 + x only at x = 0
    assert float(c.lhs) == pytest.approx(math.exp(x), rel=1e-15)
    assert float(c.numeric_difference) == pytest.approx(math.exp(x) - 1 - x, rel=1e-12)
    assert str(c).endswith("(nonzero numerically)") and f"x = {c.point[X]}:" in str(c)


@pytest.mark.parametrize(
    "a, b",
    [
        ((X + 1) ** 2, X**2 + 2 * X + 1),
        (sp.log(sp.exp(X)), X),
        (sy.hinge(X - LAM) - sy.hinge(LAM - X), X - LAM),
        (sp.exp(X) / (sp.exp(X) + 1), 1 / (1 + sp.exp(-X))),
    ],
)
def test_equal_forms_have_no_counterexample(a, b):
    assert sy.counterexample(a, b) is None


def test_a_hinge_differs_from_its_argument_only_where_it_is_inactive():
    c = sy.counterexample(sy.hinge(X - LAM), X - LAM)
    assert c is not None and c.exact
    assert c.point[X] <= c.point[LAM]  # the only place where [x - lam]_+ != x - lam
    assert c.lhs == 0 and c.rhs == c.point[X] - c.point[LAM]
    inside = sy.counterexample(sy.hinge(X - LAM), X - LAM, ranges={X: (2, 3), LAM: (0.1, 1)})
    assert inside is None  # active everywhere in that box


def test_undefined_points_are_skipped():
    c = sy.counterexample(sp.log(X), sp.log(X) + 1)  # log of x <= 0 is not real
    assert c is not None and c.point[X] > 0 and c.difference == -1


def test_entrywise_comparison_names_the_differing_entry():
    y = sp.Symbol("y", real=True)
    assert sy.counterexample({X: X, y: y}, {X: X, y: y + 1}).entry == y
    assert sy.counterexample([X, y], [X, 2 * y]).entry == 1
    assert sy.counterexample(sp.Matrix([X, y]), sp.Matrix([X + 1, y])).entry == 0


def test_fixed_and_integer_symbols_come_from_ranges():
    n = sp.Symbol("n", integer=True, positive=True)
    with pytest.raises(ValueError, match="integer symbol n"):
        sy.counterexample(n * X, X)
    c = sy.counterexample(n * X, X, ranges={n: (2, 2), X: (0.5, 0.5)})
    assert c.point == {n: 2, X: sp.Rational(1, 2)} or c.point == {X: sp.Rational(1, 2), n: 2}
    assert c.lhs == 1 and c.rhs == sp.Rational(1, 2)


def test_bad_inputs_are_refused():
    g = sy.indexed_anchor()
    with pytest.raises(ValueError, match="plain symbols"):
        sy.counterexample(g.pos[g.j], g.pos[g.j] + 1)
    with pytest.raises(ValueError, match="refuses floating-point"):
        sy.counterexample(0.5 * X, X / 2)
    with pytest.raises(ValueError, match="nothing to compare"):
        sy.counterexample([], [])
    with pytest.raises(ValueError, match="unknown functions"):
        sy.counterexample(sp.Function("f")(X), X)


def test_a_side_made_for_prove_equal_is_refused_with_what_to_pass():
    """A derived, defined, prebuilt or callable side is not a value: the error says w.value."""
    w = sy.derived(sp.diff, lambda: X**3, X)
    for side in (w, sy.define(lambda: X**2), sy.prebuilt(lambda: X), lambda: X**2):
        with pytest.raises(TypeError, match=r"w\.value"):
            sy.counterexample(side, X)
        with pytest.raises(TypeError, match="side b"):
            sy.counterexample(X, side)
    assert sy.counterexample(w.value, 3 * X**2) is None  # the value is taken
    assert sy.counterexample(w.value, 2 * X**2) is not None


@settings(max_examples=30, deadline=None)
@given(
    coeffs=st.lists(st.integers(-5, 5), min_size=1, max_size=4),
    c=st.fractions(min_value=-3, max_value=3).filter(lambda f: f != 0),
    power=st.integers(0, 3),
)
def test_a_rational_change_of_a_polynomial_is_always_found_exactly(coeffs, c, power):
    a = sum(k * X**i for i, k in enumerate(coeffs))
    cs = sp.Rational(c.numerator, c.denominator)
    found = sy.counterexample(a, a + cs * X**power)
    assert found is not None and found.exact
    x = Fraction(str(found.point.get(X, 1)))  # no symbol at all when both sides are constants
    assert found.difference == sp.Rational(-c * x**power)
    assert x != 0 or power == 0


def test_points_respect_the_symbols_assumptions():
    """A counterexample at a value the symbol cannot take is no evidence: a non-negative margin
    is drawn from [0, 3], never below 0 (Liu et al.'s m_1 = 0 is its edge)."""
    (m,) = sy.hyperparameters("m")
    x = sp.Symbol("x", real=True)
    found = sy.counterexample(sp.Abs(m) + x, m + x)  # equal for every m >= 0
    assert found is None
    assert sy.counterexample(sp.Abs(x), x) is not None  # x real: x < 0 is allowed
    lo, hi = sy.symbols.default_range(m)
    assert (lo, hi) == (0, 3)
    neg = sp.Symbol("n", negative=True)
    assert sy.symbols.default_range(neg) == (-3, -sp.Rational(1, 10))
