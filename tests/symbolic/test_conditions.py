"""Where a proof holds: denominators, the conditions that guard them, statements as written.

Implementation: :mod:`dmlbook.symbolic.conditions` (used by ``prove_equal``'s ``where``).
"""

from __future__ import annotations

import pytest
import sympy as sp

from dmlbook.symbolic import Hinge, distinct_points, nonzero_rows
from dmlbook.symbolic.conditions import (
    as_written,
    build_as_written,
    divisors,
    evaluated,
    unguarded,
)

s, t, x = sp.symbols("s t x", real=True)
a = sp.Symbol("a", positive=True)


def test_as_written_keeps_the_factor_that_evaluation_cancels():
    assert Hinge(s) * x / Hinge(s) == x  # what SymPy does while building
    with as_written():
        kept = Hinge(s) * x / Hinge(s)
    assert kept != x and divisors(kept) == [Hinge(s)]
    assert evaluated(kept) == x
    assert build_as_written(lambda: Hinge(s) * x / Hinge(s)) == kept
    assert build_as_written(x) is x


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (x / (s - 1), [s - 1]),
        (1 / sp.sqrt(2 - 2 * s), [2 - 2 * s]),
        (x**-3 + 1 / (t**2 + 1), [x, t**2 + 1]),
        (sp.exp(-s) + x**a, []),  # exp(-s) and a power of unknown sign divide by nothing
        (sp.Rational(1, 2) * x, []),
    ],
)
def test_divisors(expr, expected):
    assert divisors(expr) == sorted(expected, key=sp.default_sort_key)


@pytest.mark.parametrize(
    ("where", "left"),
    [
        ((), [Hinge(s), 1 - t]),
        ([s > 0], [1 - t]),
        ([s >= 0], [Hinge(s), 1 - t]),  # s = 0 is allowed, and there the hinge is 0
        ([s > 0, t < 1], []),
        ([sp.Ne(Hinge(s), 0), sp.Ne(t - 1, 0)], []),  # a fact covers -d as well
        ([s < 0, t > 1], [Hinge(s)]),  # s < 0 makes the hinge 0, not nonzero
    ],
)
def test_unguarded_applies_the_stated_conditions(where, left):
    expr = x / Hinge(s) + 1 / (1 - t)
    assert unguarded(expr, where) == sorted(left, key=sp.default_sort_key)


def test_assumptions_guard_on_their_own():
    assert unguarded(1 / a + 1 / (sp.exp(s) + 1) + 1 / (s**2 + 1)) == []
    assert unguarded(1 / (a * Hinge(s)), [s > 0]) == []  # a product of guarded factors
    assert unguarded(1 / Hinge(s) ** 2, [sp.Ne(Hinge(s), 0)]) == []  # a power of one


def test_the_conditions_of_the_book_s_geometry():
    X = sp.Matrix(2, 2, sp.symbols("x_11 x_12 x_21 x_22", real=True))
    norms = [sp.sqrt(sum(v**2 for v in X.row(i))) for i in range(2)]
    expr = X[0, 0] / norms[0] + X[1, 1] / norms[1]
    assert len(unguarded(expr)) == 2 and unguarded(expr, nonzero_rows(X)) == []
    assert unguarded(1 / sp.sqrt(2 - 2 * s), distinct_points(s)) == []
