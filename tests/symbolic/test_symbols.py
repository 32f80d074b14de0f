"""Tests of :mod:`dmlbook.symbolic.symbols`: anchor and batch similarities, hyper-parameters and
their domains, log-sum-exp forms, the unit sphere's
similarity-distance conversions.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from dmlbook import symbolic as sy


def test_anchor_similarities_counts_names_and_assumptions():
    a = sy.anchor_similarities(2, 3)
    assert (a.P, a.N) == (2, 3)
    assert a.all == a.pos + a.neg
    assert [str(s) for s in a.pos] == ["s^+_1", "s^+_2"]
    assert all(s.is_real for s in a.all)
    empty = sy.anchor_similarities(0, 1)
    assert empty.pos == () and empty.N == 1


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_anchor_similarities_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        sy.anchor_similarities(bad, 2)


def test_hyperparameters_assumptions():
    (a,) = sy.hyperparameters("a", positive=True)
    assert a.is_positive and a.is_real
    m, n = sy.hyperparameters(["m", "n"], positive=False)
    assert m.is_real and m.is_positive is None
    with pytest.raises(ValueError, match="empty"):
        sy.hyperparameters("")
    with pytest.raises(ValueError, match="no declared domain for the hyper-parameter 'a'"):
        sy.hyperparameters("a")


def test_hyperparameter_domains_hold_every_value_the_book_uses():
    """lambda is used at -2.5 (Chapter 5), margins at 0 (Liu et al.'s m_1): neither is positive,
    so sqrt(lambda^2) == lambda must not be provable, while sqrt(alpha^2) == alpha is."""
    alpha, beta, lam, m, m1, eps = sy.hyperparameters("alpha beta lambda m m_1 epsilon")
    assert alpha.is_positive and beta.is_positive
    assert lam.is_real and lam.is_positive is None and lam.is_nonnegative is None
    assert m.is_nonnegative and m.is_positive is None and m1.is_positive is None
    assert eps.is_nonnegative and eps.is_positive is None
    assert not sy.prove_equal(lambda: sp.sqrt(lam**2), lambda: lam, verbose=False)
    assert sy.counterexample(sp.sqrt(lam**2), lam) is not None
    assert sy.prove_equal(lambda: sp.sqrt(alpha**2), lambda: alpha)
    used = {"lambda": [-2.5, 0.5, 1.0], "m": [0.0, 0.1, 3.0], "m_1": [0.0], "epsilon": [0.0, 0.1]}
    for name, values in used.items():
        (x,) = sy.hyperparameters(name)
        for v in values:
            assert v > 0 if x.is_positive else (v >= 0 if x.is_nonnegative else True), (name, v)


def test_batch_similarities_has_unit_diagonal_and_distinct_entries():
    S = sy.batch_similarities(3)
    assert S[0, 0] == 1 and S[0, 1] != S[1, 0]
    assert len(S.free_symbols) == 6
    with pytest.raises(ValueError):
        sy.batch_similarities(0)


def test_batch_similarities_names_are_unique_beyond_nine():
    from dmlbook.symbolic import batch_similarities

    for B in (3, 9, 12):
        S = batch_similarities(B)
        names = [S[i, j].name for i in range(B) for j in range(B) if i != j]
        assert len(set(names)) == B * (B - 1)


def test_log_sum_exp_forms():
    a = sy.anchor_similarities(2, 0)
    assert sy.log1p_sum_exp([]) == 0
    assert sy.log_sum_exp(a.pos) == sp.log(sp.exp(a.pos[0]) + sp.exp(a.pos[1]))
    with pytest.raises(ValueError):
        sy.log_sum_exp([])


def test_unit_sphere_conversions_are_inverse():
    s = sp.Symbol("s", real=True)
    D = sp.Symbol("D", positive=True)
    assert sy.prove_equal(
        lambda: sy.unit_sphere_similarity(sy.unit_sphere_distance(s)),
        lambda: s,
    )
    assert sy.prove_equal(
        lambda: sy.unit_sphere_distance(sy.unit_sphere_similarity(D)), lambda: sp.Abs(D)
    )
    d = sy.distance_symbols(sy.anchor_similarities(2, 1))
    assert (d.P, d.N) == (2, 1) and all(v.is_positive for v in d.all)


@pytest.mark.parametrize("kind", [np.int64, np.int32])
def test_numpy_integers_are_counts(kind):
    """Issue 38: counts from NumPy are ints (anchor_similarities, batch_similarities)."""
    assert sy.anchor_similarities(kind(2), kind(3)) == sy.anchor_similarities(2, 3)
    assert sy.batch_similarities(kind(3)) == sy.batch_similarities(3)
    with pytest.raises(ValueError, match="positive int"):
        sy.batch_similarities(True)
