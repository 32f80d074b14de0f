"""The symbolic toolkit never proves a false statement (issue 17).

* ``pair_weights`` on one ``IndexedBase`` summed on disjoint ranges (positives ``k = 1..P``,
  negatives ``k = P+1..P+N``) used to return the positive branch for a negative index; it now
  refuses the ambiguous call and differentiates correctly given ``index_range``.
* ``prove_equal`` used to prove ``(1 + Float(1e-30)) s == s`` (the Float is rounded when it is
  made) and ``prove_equal([], [])``; both are now errors.

Expected derivatives come from differentiating the finite loss (``P``, ``N`` substituted, sums
expanded) by one concrete entry ``s[4]``, not from the code under test.
"""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy

S = sp.IndexedBase("s", real=True)
P, N = sp.symbols("P N", integer=True, positive=True)
K = sp.Symbol("k", integer=True, positive=True)
J = sp.Symbol("j", integer=True, positive=True)
LAM = sp.Symbol("lambda", positive=True)


def shared_base_loss() -> sp.Expr:
    """Contrastive-like loss with positives on ``s[1..P]`` and negatives on ``s[P+1..P+N]``."""
    return sp.Sum((1 - S[K]) ** 2, (K, 1, P)) + sp.Sum(sy.hinge(S[K] - LAM) ** 2, (K, P + 1, P + N))


def test_shared_base_with_disjoint_ranges_is_refused_without_index_range():
    with pytest.raises(ValueError, match=r"2 different index ranges.*index_range=\(P \+ 1"):
        sy.pair_weights(shared_base_loss(), S[J])


def test_shared_base_negative_weight_is_the_negative_branch():
    """The old code returned ``2 s_j - 2`` (the positive branch) here, and proved it."""
    w = sy.pair_weights(shared_base_loss(), S[J], index_range=(P + 1, P + N))[S[J]]
    expected = 2 * sy.hinge(S[J] - LAM) * sy.HingeActive(S[J] - LAM)
    assert sy.prove_equal(w, expected) is True
    x = sp.Symbol("x", real=True)
    old_answer = sy.counterexample(w.subs(S[J], x), 2 * x - 2)
    assert old_answer is not None and old_answer.exact


def test_shared_base_positive_weight_is_the_positive_branch():
    w = sy.pair_weights(shared_base_loss(), S[J], index_range=(1, P))[S[J]]
    assert sy.prove_equal(w, 2 * S[J] - 2) is True


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
    assert sy.prove_equal(got, expected) is True


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


# ---------------------------------------------------------------------------- prove_equal


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
        sy.prove_equal(a, b)
    with pytest.raises(ValueError, match="refuses floating-point"):
        sy.residual(b, a)


@settings(max_examples=25, deadline=None)
@given(digits=st.integers(1, 12), offset=st.integers(1, 10**6))
def test_rational_perturbations_are_never_proved_equal(digits, offset):
    """The exact spelling of the issue's examples: a tiny Rational change is never lost."""
    s = sp.Symbol("s", real=True)
    eps = sp.Rational(offset, 10 ** (digits + 6))
    assert sy.prove_equal((1 + eps) * s, s, verbose=False) is False
    c = sy.counterexample((1 + eps) * s, s)
    assert c is not None and c.exact and c.difference == eps * c.point[s]


@pytest.mark.parametrize("empty", [[], (), {}, sp.Matrix(0, 0, [])])
def test_prove_equal_of_nothing_is_an_error(empty):
    with pytest.raises(ValueError, match="nothing to compare"):
        sy.prove_equal(empty, empty)


def test_prove_equal_docstring_says_false_is_not_a_disproof():
    doc = " ".join(sy.prove_equal.__doc__.split())
    assert "``False``: *no proof found*, not a disproof" in doc
    assert "``True``: a proof" in doc
