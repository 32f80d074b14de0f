"""The chain from ``S`` to the raw embeddings, symbolically: L2 normalisation and its Jacobian.

A pair-based loss sees ``S_ij = <z_i, z_j>`` with ``z_i = x_i / |x_i|`` (Wang et al. 2019,
Sec. 3.1: embeddings on the unit sphere). The derivative of the normalisation is

    dz/dx = (I - z z^T) / |x|,

a projection onto the sphere's tangent plane scaled by ``1/|x|``. These helpers build the pieces
for a small batch size ``B`` and dimension ``d`` so that SymPy can differentiate end to end.
Tests: ``tests/symbolic/test_embeddings.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

__all__ = [
    "embedding_gradient_closed_form",
    "embedding_symbols",
    "normalization_jacobian",
    "normalization_jacobian_closed_form",
    "similarity_from_embeddings",
    "unit_rows",
    "nonzero_rows",
    "weight_symbols",
]


def embedding_symbols(B: int, d: int, name: str = "x") -> sp.Matrix:
    """A ``B x d`` matrix of real symbols ``x_{i,k}``: raw embeddings of a tiny batch."""
    if B < 1 or d < 1:
        raise ValueError(f"B and d must be positive, got B={B}, d={d}.")
    return sp.Matrix(B, d, lambda i, k: sp.Symbol(f"{name}_{i + 1}{k + 1}", real=True))


def weight_symbols(B: int, name: str = "g") -> sp.Matrix:
    """A ``B x B`` matrix of real symbols ``g_ij`` standing for the numbers ``dL/dS_ij``."""
    return sp.Matrix(B, B, lambda i, j: sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True))


def _row(x: sp.MatrixBase | Sequence[sp.Expr]) -> sp.Matrix:
    m = sp.Matrix(x)
    return m.T if m.cols == 1 else m


def nonzero_rows(X: sp.MatrixBase | Sequence[sp.Expr]) -> list[sp.Ne]:
    """The condition under which ``z_i = x_i / |x_i|`` is defined: no raw embedding is 0.

    One ``|x_i|^2 != 0`` per row, for :func:`~dmlbook.symbolic.proofs.prove_equal`'s ``where``
    (a proof through the normalisation divides by ``|x_i|``).
    """
    X = sp.Matrix(X)
    X = X.T if X.cols == 1 else X
    return [sp.Ne(sum(v**2 for v in X.row(i)), 0) for i in range(X.rows)]


def unit_rows(X: sp.MatrixBase) -> sp.Matrix:
    """Divide every row by its Euclidean norm: ``z_i = x_i / |x_i|``."""
    X = sp.Matrix(X)
    rows = [X.row(i) / sp.sqrt(sum(v**2 for v in X.row(i))) for i in range(X.rows)]
    return sp.Matrix.vstack(*rows)


def similarity_from_embeddings(X: sp.MatrixBase) -> sp.Matrix:
    """``S = Z Z^T`` for ``Z`` = the L2-normalised rows of ``X``."""
    Z = unit_rows(X)
    return Z * Z.T


def normalization_jacobian(x: sp.MatrixBase | Sequence[sp.Expr]) -> sp.Matrix:
    """``dz/dx`` of ``z = x / |x|``, by SymPy differentiation (``d x d``)."""
    r = _row(x)
    return unit_rows(r).jacobian(r)


def normalization_jacobian_closed_form(x: sp.MatrixBase | Sequence[sp.Expr]) -> sp.Matrix:
    """The textbook form ``(I - z z^T) / |x|`` of the normalisation Jacobian."""
    r = _row(x)
    norm = sp.sqrt(sum(v**2 for v in r))
    z = (r / norm).T
    return (sp.eye(r.cols) - z * z.T) / norm


def embedding_gradient_closed_form(G: sp.MatrixBase, X: sp.MatrixBase) -> sp.Matrix:
    """``dL/dx_i = (I - z_i z_i^T)/|x_i| * sum_j (G_ij + G_ji) z_j`` for ``G = dL/dS``.

    Row ``i`` of the result is the gradient on the raw embedding ``x_i``.
    """
    X, G = sp.Matrix(X), sp.Matrix(G)
    Z = unit_rows(X)
    rows = []
    for i in range(X.rows):
        pulled = sum(((G[i, j] + G[j, i]) * Z.row(j) for j in range(X.rows)), sp.zeros(1, X.cols))
        J = normalization_jacobian_closed_form(X.row(i))
        rows.append((J.T * pulled.T).T)
    return sp.Matrix.vstack(*rows)
