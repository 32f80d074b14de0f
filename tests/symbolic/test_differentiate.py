"""Tests of :mod:`dmlbook.symbolic.differentiate` (``pair_weights``): finite anchors, batch
matrices, indexed sums for every batch size, and one base summed on several ranges.

The last (issue 17): ``pair_weights`` on one ``IndexedBase`` summed on disjoint ranges (positives
``k = 1..P``, negatives ``k = P+1..P+N``) used to return the positive branch for a negative index;
it now refuses the ambiguous call and differentiates correctly given ``index_range``. Expected
derivatives come from differentiating the finite loss (``P``, ``N`` substituted, sums expanded) by
one concrete entry ``s[4]``, not from the code under test.
"""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy

from .anchor_cases import ALPHA, BETA, LAM, ms_anchor

S = sp.IndexedBase("s", real=True)
P, N = sp.symbols("P N", integer=True, positive=True)
K = sp.Symbol("k", integer=True, positive=True)
J = sp.Symbol("j", integer=True, positive=True)
#: the contrastive-like loss's margin (a positive "lambda", not the hyper-parameter LAM above)
MARGIN = sp.Symbol("lambda", positive=True)


def test_pair_weights_orders_positives_first_and_matches_diff():
    a = sy.anchor_similarities(2, 2)
    L = ms_anchor(a)
    w = sy.pair_weights(L, a)
    assert list(w) == list(a.all)
    assert all(w[s] == sp.diff(L, s) for s in a.all)
    single = sy.pair_weights(L, a.pos[0])
    assert list(single) == [a.pos[0]]


def test_pair_weights_on_a_batch_matrix():
    S = sy.batch_similarities(3)
    L = sum(S[i, j] ** 2 for i in range(3) for j in range(3))
    W = sy.pair_weights(L, S)
    assert W.shape == (3, 3) and W[0, 0] == 0 and W[0, 1] == 2 * S[0, 1]


def test_pair_weights_rejects_non_symbols():
    x = sp.Symbol("x")
    with pytest.raises(TypeError, match="pair symbols"):
        sy.pair_weights(x**2, [x + 1])


def test_general_n_ms_weights_are_proved_for_every_batch_size():
    """MS Eq. 13 and Eq. 14 for any P, N (indexed sums, guard 1 <= j <= P discharged)."""
    g = sy.indexed_anchor()
    L = (
        sp.log(1 + g.sum_pos(lambda s: sp.exp(-ALPHA * (s - LAM)))) / ALPHA
        + sp.log(1 + g.sum_neg(lambda s: sp.exp(BETA * (s - LAM)))) / BETA
    )
    w = sy.pair_weights(L, [g.pos[g.j], g.neg[g.j]])
    assert not w[g.pos[g.j]].has(sp.Piecewise)
    eq14 = 1 / (
        sp.exp(-ALPHA * (LAM - g.pos[g.j])) + g.sum_pos(lambda s: sp.exp(-ALPHA * (s - g.pos[g.j])))
    )
    eq13 = 1 / (
        sp.exp(BETA * (LAM - g.neg[g.j])) + g.sum_neg(lambda s: sp.exp(BETA * (s - g.neg[g.j])))
    )
    assert sy.prove_equal(sy.prebuilt(lambda: -w[g.pos[g.j]]), sy.prebuilt(lambda: eq14)) is True
    assert sy.prove_equal(sy.prebuilt(lambda: w[g.neg[g.j]]), sy.prebuilt(lambda: eq13)) is True
    # the same, sound (issue 38): the weight derived from the loss as typed, Eq. 13 as typed
    w_neg = sy.derived(
        lambda L, s: sy.pair_weights(L, [s])[s],
        lambda: (
            sp.log(1 + g.sum_pos(lambda s: sp.exp(-ALPHA * (s - LAM)))) / ALPHA
            + sp.log(1 + g.sum_neg(lambda s: sp.exp(BETA * (s - LAM)))) / BETA
        ),
        g.neg[g.j],
        differentiates=True,
    )
    typed_eq13 = lambda: (
        1
        / (  # noqa: E731
            sp.exp(BETA * (LAM - g.neg[g.j])) + g.sum_neg(lambda s: sp.exp(BETA * (s - g.neg[g.j])))
        )
    )
    assert sy.prove_equal(w_neg, typed_eq13) is True


def shared_base_loss() -> sp.Expr:
    """Contrastive-like loss with positives on ``s[1..P]`` and negatives on ``s[P+1..P+N]``."""
    return sp.Sum((1 - S[K]) ** 2, (K, 1, P)) + sp.Sum(
        sy.hinge(S[K] - MARGIN) ** 2, (K, P + 1, P + N)
    )


def test_shared_base_with_disjoint_ranges_is_refused_without_index_range():
    with pytest.raises(ValueError, match=r"2 different index ranges.*index_range=\(P \+ 1"):
        sy.pair_weights(shared_base_loss(), S[J])


def test_shared_base_negative_weight_is_the_negative_branch():
    """The old code returned ``2 s_j - 2`` (the positive branch) here, and proved it."""
    w = sy.pair_weights(shared_base_loss(), S[J], index_range=(P + 1, P + N))[S[J]]
    expected = 2 * sy.hinge(S[J] - MARGIN) * sy.HingeActive(S[J] - MARGIN)
    assert sy.prove_equal(sy.prebuilt(lambda: w), sy.prebuilt(lambda: expected)) is True
    x = sp.Symbol("x", real=True)
    old_answer = sy.counterexample(w.subs(S[J], x), 2 * x - 2)
    assert old_answer is not None and old_answer.exact


def test_shared_base_positive_weight_is_the_positive_branch():
    w = sy.derived(
        lambda L, s: sy.pair_weights(L, s, index_range=(1, P))[s],
        shared_base_loss,  # the loss as typed (issue 38: its conditions come with the weight)
        S[J],
        differentiates=True,
    )
    assert sy.prove_equal(w, lambda: 2 * S[J] - 2) is True


@settings(max_examples=15, deadline=None)
@given(p=st.integers(1, 3), n=st.integers(1, 3), data=st.data())
def test_shared_base_weights_match_the_expanded_finite_loss(p, n, data):
    """For concrete ``P, N`` and a concrete index, the weight equals the finite derivative."""
    j = data.draw(st.integers(1, p + n), label="j")
    finite = shared_base_loss().subs({P: p, N: n}).doit()
    expected = sp.diff(finite, S[j])
    span = (1, P) if j <= p else (P + 1, P + N)
    got = sy.pair_weights(shared_base_loss(), S[J], index_range=span)[S[J]]
    got = got.subs({J: j, P: p, N: n})
    assert sy.prove_equal(sy.prebuilt(lambda: got), sy.prebuilt(lambda: expected)) is True


def test_index_range_is_refused_for_a_plain_symbol():
    x = sp.Symbol("x", real=True)
    with pytest.raises(ValueError, match="indexed pair symbol"):
        sy.pair_weights(x**2, x, index_range=(1, P))


def test_one_range_per_base_still_needs_no_index_range():
    """The ``indexed_anchor`` layout (separate bases) is unchanged: guards are discharged."""
    g = sy.indexed_anchor()
    L = g.sum_pos(lambda s: (1 - s) ** 2) + g.sum_neg(lambda s: s**2)
    w = sy.pair_weights(L, [g.pos[g.j], g.neg[g.j]])
    assert w == {g.pos[g.j]: 2 * g.pos[g.j] - 2, g.neg[g.j]: 2 * g.neg[g.j]}
