"""Every proof of dmlbook.symbolic.liu, run (Liu et al., Eq. 18, 21, 24-34, 38-39)."""

from __future__ import annotations

import sympy as sp
import torch

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses.liu_weighting import pair_weights
from dmlbook.symbolic import counterexample, liu


def test_eq18_detached_weights_are_the_gradient():
    r = liu.eq18_detached_gradient()
    assert r["detached"] and r["on_S"]
    assert r["not_detached_extra"] != 0  # without detach: + w'(D) (D - m1)
    # the intermediate results the chapter prints: the gradient as differentiated, and dD/dS
    wp, wn = sp.Function("w^+"), sp.Function("w^-")
    Dp1, Dn1 = sp.Symbol("D^+_1", positive=True), sp.Symbol("D^-_1", positive=True)
    assert r["gradient"][0] == wp(Dp1) and r["gradient"][2] == -wn(Dn1)
    s, c = sp.Symbol("s", real=True), sp.Symbol("c", real=True)
    at = {s: sp.Rational(1, 2), c: 3}  # D(1/2) = 1, so -c / D = -3 (worked by hand)
    assert r["dL_dS"].subs(at) == -3


def test_closed_forms_are_proved():
    rows = liu.closed_forms()
    assert len(rows) == 5 and all(r.proved for r in rows), [r.weighting for r in rows]
    # each row's dF/du_1, written by hand from the weight it should equal
    x1, x2, x3, p, a = sp.symbols("u1 u2 u3 p alpha", positive=True)
    by_hand = [
        x1**p,
        sp.exp(a * x1),
        sp.exp(a * x1) / (sp.exp(a * x1) + sp.exp(a * x2) + sp.exp(a * x3)),
        sp.Rational(1, 3),
    ]
    for row, expected in zip(rows[:4], by_hand, strict=True):
        diff = row.gradient - expected  # alpha may carry other assumptions in the module
        diff = diff.subs({v: 2 for v in diff.free_symbols if v.name == "alpha"})
        assert sp.simplify(diff) == 0, row.weighting


def test_normalised_power_weights_are_no_gradient():
    r = liu.normalised_power_is_not_a_gradient()
    assert r["exp_symmetric"]
    x1, x2, p = sp.symbols("u1 u2 p", positive=True)
    point = {x1: 1, x2: 2, p: 1}
    assert r["asymmetry"].subs(point) != 0
    assert r["circulation"] == sp.log(sp.Rational(15, 16))  # != 0: no potential
    # and an exact point where the two mixed partials differ, found independently
    w1 = x1**p / (x1**p + x2**p)
    w2 = x2**p / (x1**p + x2**p)
    assert counterexample(sp.diff(w1, x2), sp.diff(w2, x1)) is not None


def test_the_paper_limits():
    lim = liu.paper_limits()
    n = sp.Symbol("n", positive=True, integer=True)
    assert lim["average"] == sp.Rational(1, 2) and lim["average_at_threshold"] == 0
    assert lim["triplet_e_hardest"] == 1 and lim["triplet_e_v0"] == sp.oo
    assert sp.simplify(lim["ms_v1_alpha0"] - 1 / (n + 1)) == 0
    assert sp.simplify(lim["ms_v2_alpha0"] - 1 / n) == 0


def test_each_limit_is_shown_with_its_expression():
    steps = {s.name: s for s in liu.paper_limit_steps()}
    assert set(steps) == set(liu.paper_limits())
    u1, u2, p = sp.symbols("u1 u2 p", positive=True)
    avg = steps["average"]
    assert avg.variable == p and avg.point == 0 and avg.direction == "+"
    # the expression is the normalised weight of two pairs, whatever the exponent (by hand)
    at = {u1: 2, u2: 3, p: 2}
    assert avg.expression.subs(at) == sp.Rational(4, 13)
    assert str(steps["average_at_threshold"]).startswith("lim_{p -> 0+} 0**p/(0**p + u2**p)")
    assert str(steps["ms_v2_alpha0"]).endswith("= 1/n")  # shown before it simplifies to 1/n
    # the value is the limit of the expression shown: a numeric check at a small exponent
    near = {u1: sp.Rational(1, 3), u2: 5, p: sp.Rational(1, 10**6)}
    assert abs(float(avg.expression.subs(near)) - 0.5) < 1e-5


def test_ms_v2_is_lifted_star_on_distances():
    r = liu.ms_v2_is_lifted_star()
    assert r["v2_equals_lifted_star"] and r["v1_is_v2_plus_virtual_pair"]
    assert r["v2_weight_sum"] == 1 and r["v1_weight_sum"] != 1
    # the intermediate results, against forms written by hand
    m, a = sp.symbols("m alpha", positive=True)
    d1, d2 = sp.symbols("D^+_1 D^+_2", positive=True)
    assert r["v2_minus_lifted_star"] == 0
    by_hand = -m + sp.log(sp.exp(a * d1) + sp.exp(a * d2)) / a
    assert sp.simplify(r["v2_positive_factored"] - by_hand) == 0
    virtual = sp.exp(a * d1) / (sp.exp(a * d1) + sp.exp(a * d2) + sp.exp(a * m))
    at = {m: 1, a: 2, d1: sp.Rational(1, 2), d2: sp.Rational(3, 2)}
    assert sp.simplify((r["v1_weight_1"] - virtual).subs(at)) == 0


def test_ms_margin_derivatives():
    r = liu.ms_margin_derivatives()
    assert r["v2"] == 0 and r["v1_proved"]
    z_p, z_n = sp.symbols("Z_P Z_N", positive=True)
    assert r["v1"].subs({z_p: 1, z_n: 3}) == sp.Rational(1, 4)  # -1/2 + 3/4, by hand


def test_pair_e_margins_only_mine():
    """The closed form says per-anchor exponential weights do not depend on m1, m2 except
    through which pairs are mined: check on a batch where both settings mine the same pairs."""
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(9, 3, generator=g, dtype=torch.float64))
    y = torch.arange(3).repeat_interleave(3)
    kw = dict(weighting="exponential", pos_exponent=2.0, neg_exponent=5.0)
    a = pair_weights(S, y, 0.0, 4.0, **kw)
    b = pair_weights(S, y, 0.0, 3.0, **kw)  # D <= 2 < 3: the same negatives are mined
    for u, v in zip(a, b, strict=True):
        torch.testing.assert_close(u, v, rtol=1e-12, atol=0.0)
