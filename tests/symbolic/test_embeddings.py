"""Tests of :mod:`dmlbook.symbolic.embeddings`: the normalisation layer's Jacobian and the chain
from pair weights to embedding gradients, exact (SymPy) and against autograd.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch

from dmlbook import symbolic as sy
from dmlbook.core.similarity import l2_normalize


def test_normalization_jacobian_closed_form_d3():
    x = sy.embedding_symbols(1, 3).row(0)
    J, closed = sy.normalization_jacobian(x), sy.normalization_jacobian_closed_form(x)
    assert not sy.prove_equal(
        sy.prebuilt(lambda: J), sy.prebuilt(lambda: closed), verbose=False
    )  # x = 0 has no direction
    assert sy.prove_equal(
        sy.prebuilt(lambda: J), sy.prebuilt(lambda: closed), where=sy.nonzero_rows(x)
    )


@pytest.mark.slow
def test_embedding_gradient_chain_B3_d2():
    """d/dx of sum_ij g_ij S_ij(x) == (I - z z^T)/|x| sum_j (g_ij + g_ji) z_j, B=3, d=2."""
    X, G = sy.embedding_symbols(3, 2), sy.weight_symbols(3)
    S = sy.similarity_from_embeddings(X)
    F = sum(G[i, j] * S[i, j] for i in range(3) for j in range(3))
    direct = sp.Matrix(3, 2, lambda i, k: F.diff(X[i, k]))
    closed = sy.embedding_gradient_closed_form(G, X)
    assert (
        sy.prove_equal(
            sy.prebuilt(lambda: direct), sy.prebuilt(lambda: closed), where=sy.nonzero_rows(X)
        )
        is True
    )


def test_symbolic_jacobian_matches_autograd_of_l2_normalize():
    x = sy.embedding_symbols(1, 3).row(0)
    J = sy.to_torch(sy.normalization_jacobian(x), [list(x)])
    v = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    auto = torch.autograd.functional.jacobian(lambda t: l2_normalize(t[None])[0], v)
    torch.testing.assert_close(J(v), auto, rtol=1e-13, atol=1e-15)


def test_similarity_of_a_hand_computed_pair_of_embeddings():
    """x_1 = (3, 4), x_2 = (1, 0): z_1 = (3/5, 4/5), z_2 = (1, 0), S_12 = 3/5, S_ii = 1."""
    X = sy.embedding_symbols(2, 2)
    point = {X[0, 0]: 3, X[0, 1]: 4, X[1, 0]: 1, X[1, 1]: 0}
    Z = sy.unit_rows(X).subs(point)
    assert Z == sp.Matrix([[sp.Rational(3, 5), sp.Rational(4, 5)], [1, 0]])
    S = sy.similarity_from_embeddings(X).subs(point)
    assert S == sp.Matrix([[1, sp.Rational(3, 5)], [sp.Rational(3, 5), 1]])
    # the tangent-plane projection at x_2 = (1, 0) keeps only the second axis, scaled by 1/|x_2|
    J = sy.normalization_jacobian_closed_form(X.row(1)).subs(point)
    assert J == sp.Matrix([[0, 0], [0, 1]])
    assert sy.nonzero_rows(X)[1].subs(point) == sp.true


def test_symbols_are_named_by_position_and_bad_sizes_are_refused():
    X, G = sy.embedding_symbols(2, 3), sy.weight_symbols(2)
    assert X.shape == (2, 3) and str(X[1, 2]) == "x_23" and X[1, 2].is_real
    assert G.shape == (2, 2) and str(G[0, 1]) == "g_12"
    with pytest.raises(ValueError, match="B and d must be positive, got B=0, d=3"):
        sy.embedding_symbols(0, 3)
