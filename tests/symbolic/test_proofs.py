"""Tests of :mod:`dmlbook.symbolic.proofs`: ``prove_equal`` proves the papers' closed forms, never
a false statement, and needs the condition of a division by a factor that may vanish;
``residual`` and ``gpw_identity`` (``spot_check_equal``: ``test_spot_check.py``).

Every finite proof states its P (positives) and N (negatives) per anchor. ``prove_equal`` used to
prove ``(1 + Float(1e-30)) s == s`` (the Float is rounded when it is made) and
``prove_equal([], [])``; both are now errors (issue 17).
"""

from __future__ import annotations

import contextlib
import io

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy

from .anchor_cases import ALPHA, BETA, LAM, contrastive_anchor, ms_anchor, ms_closed_form


def test_prove_equal_ms_closed_forms_P2_N3():
    """Wang et al. 2019, Eq. 13 (both lines) and Eq. 14 from Eq. 15, P=2, N=3: the weights are
    derived from the loss as typed (issue 38: its conditions come with them)."""
    a = sy.anchor_similarities(2, 3)
    w = sy.derived(sy.pair_weights, lambda: ms_anchor(a), a)
    assert sy.prove_equal(w, lambda: dict(zip(a.all, _signed(*ms_closed_form(a)), strict=True)))
    w_neg = sy.derived(
        lambda L, a: [sy.pair_weights(L, a)[s] for s in a.neg],
        lambda: ms_anchor(a),
        a,
        differentiates=True,
    )
    second_line = lambda: [  # noqa: E731
        sp.exp(BETA * (s - LAM)) / (1 + sum(sp.exp(BETA * (t - LAM)) for t in a.neg)) for s in a.neg
    ]
    assert sy.prove_equal(w_neg, second_line) is True
    # the old form: values computed before the call, read by the side (unchecked, said so)
    w_old = sy.pair_weights(ms_anchor(a), a)
    assert sy.prove_equal(sy.prebuilt(lambda: [w_old[s] for s in a.neg]), second_line) is True


def _signed(w_pos, w_neg):
    return [-w for w in w_pos] + list(w_neg)


def test_prove_equal_lifted_and_binomial_P2_N2():
    """Lifted structure Eq. 7-8 (active hinge) and binomial Eq. 10, P=2, N=2."""
    a = sy.anchor_similarities(2, 2)
    lifted = sy.hinge(sy.log_sum_exp([LAM - s for s in a.pos]) + sy.log_sum_exp(a.neg))
    w = sy.pair_weights(lifted, a)
    active = {s: sy.hinge_branch(v, True) for s, v in w.items()}
    eq7 = [1 / sum(sp.exp(s - t) for t in a.pos) for s in a.pos]
    eq8 = [1 / sum(sp.exp(t - s) for t in a.neg) for s in a.neg]
    assert (
        sy.prove_equal(sy.prebuilt(lambda: [-active[s] for s in a.pos]), sy.prebuilt(lambda: eq7))
        is True
    )
    assert (
        sy.prove_equal(sy.prebuilt(lambda: [active[s] for s in a.neg]), sy.prebuilt(lambda: eq8))
        is True
    )
    assert all(sy.hinge_branch(v, False) == 0 for v in w.values())

    binomial = (
        sum(sp.log(1 + sp.exp(ALPHA * (LAM - s))) for s in a.pos) / a.P
        + sum(sp.log(1 + sp.exp(BETA * (s - LAM))) for s in a.neg) / a.N
    )
    wb = sy.pair_weights(binomial, a)
    eq10 = {
        **{
            s: -ALPHA * sp.exp(ALPHA * (LAM - s)) / (1 + sp.exp(ALPHA * (LAM - s))) / a.P
            for s in a.pos
        },
        **{
            s: BETA * sp.exp(BETA * (s - LAM)) / (1 + sp.exp(BETA * (s - LAM))) / a.N for s in a.neg
        },
    }
    assert sy.prove_equal(sy.prebuilt(lambda: wb), sy.prebuilt(lambda: eq10)) is True


def test_prove_equal_rejects_a_wrong_closed_form_and_reports_residual(capsys):
    """Eq. 14 with the pair's own term dropped from the sum: wrong, and must not be proved."""
    a = sy.anchor_similarities(2, 1)
    w = sy.pair_weights(ms_anchor(a), a)
    s = a.pos[0]
    wrong = 1 / (sp.exp(-ALPHA * (LAM - s)) + sp.exp(-ALPHA * (a.pos[1] - s)))
    assert sy.prove_equal(sy.prebuilt(lambda: -w[s]), sy.prebuilt(lambda: wrong)) is False
    assert "residual" in capsys.readouterr().out
    assert sy.residual(-w[s], wrong) != 0
    assert not sy.spot_check_equal(-w[s], wrong)


def test_prove_equal_rejects_a_sign_error_quietly(capsys):
    x = sp.Symbol("x", real=True)
    assert sy.prove_equal(lambda: sp.exp(x), lambda: -sp.exp(x), verbose=False) is False
    assert capsys.readouterr().out == ""


def test_prove_equal_handles_piecewise_hinge_and_containers():
    a = sy.anchor_similarities(1, 2)
    w = sy.pair_weights(contrastive_anchor(LAM)(a), a)
    as_piecewise = sp.Piecewise((1, a.neg[0] > LAM), (0, True))
    assert (
        sy.prove_equal(sy.prebuilt(lambda: w[a.neg[0]]), sy.prebuilt(lambda: as_piecewise)) is True
    )
    assert (
        sy.prove_equal(sy.prebuilt(lambda: sp.Matrix([[w[a.pos[0]]]])), lambda: sp.Matrix([[-1]]))
        is True
    )
    assert sy.residual(w[a.pos[0]], -1) == 0
    with pytest.raises(ValueError):
        sy.prove_equal(lambda: sp.Matrix([1, 2]), lambda: sp.Matrix([1, 2, 3]))
    with pytest.raises(ValueError):
        sy.prove_equal(lambda: {a.pos[0]: 1}, lambda: {a.neg[0]: 1})


def test_prove_equal_never_forces_invalid_log_rules():
    """log(x y) = log x + log y is false for negative reals; no rewrite may 'prove' it."""
    x, y = sp.symbols("x y", real=True)
    assert (
        sy.prove_equal(lambda: sp.log(x * y), lambda: sp.log(x) + sp.log(y), verbose=False) is False
    )
    p, q = sp.symbols("p q", positive=True)
    assert sy.prove_equal(lambda: sp.log(p * q), lambda: sp.log(p) + sp.log(q)) is True


def test_a_proof_that_divides_by_a_vanishing_factor_needs_its_condition():
    """Issue 27: SymPy cancels Hinge(s)/Hinge(s) and (e^s - 1)/(e^s - 1) while building the
    expression; as written (a callable, or inside as_written) the division is refused unless
    the condition is stated, and proved with it."""
    s, x = sp.symbols("s x", real=True)
    assert not sy.prove_equal(lambda: sy.Hinge(s) * x / sy.Hinge(s), lambda: x, verbose=False)
    assert not sy.prove_equal(lambda: (sp.exp(s) - 1) / (sp.exp(s) - 1), 1, verbose=False)
    with sy.as_written():
        ratio = (sp.exp(s) - 1) / (sp.exp(s) - 1)
    assert sy.divisors(ratio) == [sp.exp(s) - 1]
    assert not sy.prove_equal(sy.prebuilt(lambda: ratio), 1, verbose=False)
    assert sy.prove_equal(lambda: sy.Hinge(s) * x / sy.Hinge(s), lambda: x, where=[s > 0])
    assert sy.prove_equal(sy.prebuilt(lambda: ratio), 1, where=[sp.Ne(sp.exp(s) - 1, 0)])
    # a denominator the assumptions keep away from 0 needs nothing
    assert sy.prove_equal(lambda: (sp.exp(s) + 1) / (sp.exp(s) + 1), 1)
    # the refusal says what to state
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        sy.prove_equal(lambda: sy.Hinge(s) * x / sy.Hinge(s), lambda: x)
    assert (
        "divides by Hinge(s)" in shown.getvalue()
        and "where=[sp.Ne(Hinge(s), 0)]" in shown.getvalue()
    )

    # a distance: D = sqrt(2 - 2 s) vanishes at s = 1
    def D():
        return sy.unit_sphere_distance(s)

    assert not sy.prove_equal(lambda: D() / D() ** 2, lambda: 1 / D(), verbose=False)
    assert sy.prove_equal(lambda: D() / D() ** 2, lambda: 1 / D(), where=sy.distinct_points(s))


def test_gpw_identity_smooth_and_hinge_losses():
    """Eq. 1-2: dL/dtheta == dF/dtheta for MS (P=1, N=2) and contrastive (P=1, N=2)."""
    a = sy.anchor_similarities(1, 2)
    for loss, pairs in ((ms_anchor, a), (contrastive_anchor(LAM), a.all)):
        dL, dF = (
            sy.derived(lambda L, p, i=i: sy.gpw_identity(L, p)[i], lambda loss=loss: loss(a), pairs,
                       differentiates=True)
            for i in (0, 1)
        )  # fmt: skip
        assert sy.prove_equal(dL, dF) is True


@pytest.mark.parametrize(
    "make_a",
    [
        lambda s: (1 + sp.Float(1e-30)) * s,  # rounded to exactly 1.0 at construction
        lambda s: s * sp.Float("1.0000001", 3),  # 3 digits: 1.00
        lambda s: 0.5 * s + s / 2,  # a Python float becomes a Float too
        lambda s: sp.Matrix([[s, sp.Float(2) * s]]),
    ],
)
def test_prove_equal_refuses_floats(make_a):
    s = sp.Symbol("s", real=True)
    a = make_a(s)
    b = sp.Matrix([[s, 2 * s]]) if isinstance(a, sp.MatrixBase) else s
    with pytest.raises(ValueError, match=r"refuses floating-point.*sympy.Rational\('1.0000001'\)"):
        sy.prove_equal(sy.prebuilt(lambda: a), sy.prebuilt(lambda: b))
    with pytest.raises(ValueError, match="refuses floating-point"):
        sy.residual(b, a)


@settings(max_examples=25, deadline=None)
@given(digits=st.integers(1, 12), offset=st.integers(1, 10**6))
def test_rational_perturbations_are_never_proved_equal(digits, offset):
    """The exact spelling of the issue's examples: a tiny Rational change is never lost."""
    s = sp.Symbol("s", real=True)
    eps = sp.Rational(offset, 10 ** (digits + 6))
    assert (
        sy.prove_equal(
            lambda: (1 + sp.Rational(offset, 10 ** (digits + 6))) * s, lambda: s, verbose=False
        )
        is False
    )
    c = sy.counterexample((1 + eps) * s, s)
    assert c is not None and c.exact and c.difference == eps * c.point[s]


@pytest.mark.parametrize("empty", [[], (), {}, sp.Matrix(0, 0, [])])
def test_prove_equal_of_nothing_is_an_error(empty):
    with pytest.raises(ValueError, match="nothing to compare"):
        sy.prove_equal(lambda: empty, lambda: empty)


def test_prove_equal_docstring_says_false_is_not_a_disproof():
    doc = " ".join(sy.prove_equal.__doc__.split())
    assert "``False``: *no proof found*, not a disproof" in doc
    assert "``True``: a proof" in doc
