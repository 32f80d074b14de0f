"""Tests of :mod:`dmlbook.studies.similarity_symbolic`: which similarities a negative pair's
weight depends on, read from its SymPy form, against Wang et al. 2019, Table 1's columns.
"""

from __future__ import annotations

import pytest
import sympy as sp

import dmlbook.symbolic as sy
from dmlbook.studies.similarity_symbolic import symbolic_dependence
from dmlbook.studies.three_similarities import PAPER_TABLE_1


def _symbolic_anchor(P: int = 2, N: int = 3):
    return sy.anchor_similarities(P, N), sy.hyperparameters("lambda alpha beta m")


def test_symbolic_dependence_reproduces_the_paper_columns_it_can():
    a, (lam, alpha, beta, _) = _symbolic_anchor()
    j = a.neg[0]
    cases = {
        "Contrastive": sum(sy.hinge(s - lam) for s in a.neg) - sum(a.pos),
        "Binomial": sum(sp.log(1 + sp.exp(beta * (s - lam))) for s in a.neg) / a.N
        + sum(sp.log(1 + sp.exp(alpha * (lam - s))) for s in a.pos) / a.P,
        "Triplet": sum(sy.hinge(n - p + lam) for p in a.pos for n in a.neg),
        "NCA": sy.log_sum_exp(list(a.all)) - sy.log_sum_exp(list(a.pos)),
    }
    for column, loss in cases.items():
        dep = symbolic_dependence(sy.pair_weights(loss, a)[j], a, j)
        assert tuple(bool(dep[s]) for s in "SPN") == PAPER_TABLE_1[column], column
    contrastive = symbolic_dependence(sy.pair_weights(cases["Contrastive"], a)[j], a, j)
    assert contrastive == {"S": "gate", "P": "", "N": ""}
    binomial = symbolic_dependence(sy.pair_weights(cases["Binomial"], a)[j], a, j)
    assert binomial == {"S": "weight", "P": "", "N": ""}
    # the weight as derived from the loss as typed (issue 38) reads the same
    typed = sy.derived(
        sy.pair_weights, lambda: sum(sy.hinge(s - lam) for s in a.neg) - sum(a.pos), a
    )
    assert symbolic_dependence(typed[j], a, j) == contrastive


def test_symbolic_dependence_of_softmax_weights():
    a, (_, alpha, beta, _) = _symbolic_anchor()
    j = a.neg[0]
    star = (
        sy.log_sum_exp([-alpha * s for s in a.pos]) / alpha
        + sy.log_sum_exp([beta * s for s in a.neg]) / beta
    )
    assert symbolic_dependence(sy.pair_weights(star, a)[j], a, j) == {
        "S": "",
        "P": "",
        "N": "weight",
    }
    a1 = sy.anchor_similarities(1, 3)
    npair = sy.log1p_sum_exp([n - a1.pos[0] for n in a1.neg])
    got = symbolic_dependence(sy.pair_weights(npair, a1)[a1.neg[0]], a1, a1.neg[0])
    assert got == {"S": "", "P": "weight", "N": "weight"}  # the positive is in the soft-max


def test_symbolic_dependence_distance_triplet_and_errors():
    a, (_, _, _, m) = _symbolic_anchor()
    D = sy.unit_sphere_distance
    j = a.neg[0]
    trip = sum(sy.hinge(D(p) - D(n) + m) for p in a.pos for n in a.neg)
    got = symbolic_dependence(sy.pair_weights(trip, a)[j], a, j)
    assert got == {"S": "weight, gate", "P": "gate", "N": ""}
    with pytest.raises(ValueError, match="negative"):
        symbolic_dependence(a.pos[0], a, a.pos[0])
