"""Tests of :mod:`dmlbook.symbolic.hinge`: the hinge ``[x]_+`` evaluates where its sign is known,
differentiates to the indicator of its active region, prints, and restricts to a branch."""

from __future__ import annotations

import sympy as sp

from dmlbook import symbolic as sy

from .anchor_cases import LAM


def test_hinge_evaluates_derivative_and_rewrites():
    x = sp.Symbol("x", real=True)
    p = sp.Symbol("p", positive=True)
    assert sy.hinge(p) == p and sy.hinge(-p) == 0
    h = sy.hinge(x - LAM)
    assert h.diff(x) == sy.HingeActive(x - LAM)
    assert sy.HingeActive(p) == 1 and sy.HingeActive(-p) == 0
    assert h.rewrite(sp.Piecewise) == sp.Piecewise((x - LAM, x - LAM > 0), (0, True))
    assert sp.latex(h) == r"\left[- \lambda + x\right]_{+}"
    assert r"\mathbb{1}" in sp.latex(h.diff(x))


def test_hinge_branch_and_conditions():
    x, y = sp.symbols("x y", real=True)
    e = 2 * sy.hinge(x) + sy.hinge(y - 1)
    assert sy.hinge_branch(e, True) == 2 * x + y - 1
    assert sy.hinge_branch(e, False) == 0
    assert sy.hinge_branch(e, {x: True, sy.hinge(y - 1): False}) == 2 * x
    assert sy.hinge_branch(e, {x: False}) == sy.hinge(y - 1)
    assert sy.hinge_branch(e.diff(x), True) == 2
    assert set(sy.hinge_conditions(e)) == {x > 0, y - 1 > 0}
