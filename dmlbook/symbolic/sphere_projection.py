"""Xuan & Pless's Eq. 20 and the normalisation layer, proved: what the L2 layer's tangent
projection does to the Euclidean and cosine directions of :mod:`.gradient_surgery`.

Results (proved in ``tests/symbolic/test_sphere_projection.py``; displayed in
``book/13_gradient_surgery.ipynb``, 13.4):

* Eq. 20 holds; the two curves cross at ``S = 1/2`` (and meet at ``S = -1``).
* After the L2 layer (tangent projection), ``e^euc = e^cos / D``: a designed gradient with
  ``e^euc`` and pair weight ``P`` trains exactly as ``e^cos`` with ``P / D``; so ``e^euc x P^euc``
  is ``e^cos x P^con`` (the two Table 3 cells 75.2 and 75.5 on Cars should agree, and do within
  noise).
"""

from __future__ import annotations

import sympy as sp

from .proofs import prove_equal

__all__ = [
    "PROJECTION_CONDITION",
    "euc_is_cos_over_distance_on_sphere",
    "projection_lengths",
    "projection_lengths_cross",
    "tangential_squares",
]

#: The condition of Eq. 20's derivation: ``f_p != f_a`` (``D > 0``), for ``prove_equal``'s ``where``.
PROJECTION_CONDITION = [sp.Ne(2 - 2 * sp.cos(sp.Symbol("t", positive=True)), 0)]


def tangential_squares(t: sp.Symbol) -> dict[str, sp.Expr]:
    """The squared tangential lengths of the unit directions on the positive, for ``f_a = (1,
    0)``, ``f_p = (cos t, sin t)``: derived from the vectors (``"euc"``, ``"cos"``) and as
    Eq. 20 prints them (``"euc_printed"``, ``"cos_printed"``, ``S = cos t``), not simplified.

    Typed in a proof (``lambda: tangential_squares(t)["euc"]``), ``e^euc``'s division by ``D``
    is kept: the proof holds where ``2 - 2 cos t != 0`` (:data:`PROJECTION_CONDITION`).
    """
    fa = sp.Matrix([1, 0])
    fp = sp.Matrix([sp.cos(t), sp.sin(t)])
    tangent = sp.Matrix([-sp.sin(t), sp.cos(t)])
    e_euc = (fp - fa) / sp.sqrt((fp - fa).dot(fp - fa))
    S = sp.cos(t)
    return {
        "euc": e_euc.dot(tangent) ** 2,
        "cos": (-fa).dot(tangent) ** 2,
        "euc_printed": (1 + S) / 2,
        "cos_printed": 1 - S**2,
    }


def projection_lengths() -> dict[str, sp.Expr]:
    """Squared tangential lengths of the unit directions on the positive, for ``f_a = (1, 0)``,
    ``f_p = (cos t, sin t)``, ``t`` in (0, pi): the derivation behind Eq. 20 (appendix).

    Returns the derived squares (``"euc"``, ``"cos"``, simplified) and the squares of Eq. 20 as
    printed (``"euc_printed"``, ``"cos_printed"``, with ``S = cos t``), all functions of ``t``.
    Both lengths are >= 0, so equal squares prove Eq. 20 (a proof takes the sides from
    :func:`tangential_squares`); ``e^euc`` divides by ``D``, so the proof holds where
    ``2 - 2 cos t != 0`` (:data:`PROJECTION_CONDITION`).
    """
    squares = tangential_squares(sp.Symbol("t", positive=True))
    return {k: sp.simplify(v) if k in ("euc", "cos") else v for k, v in squares.items()}


def projection_lengths_cross() -> set[sp.Expr]:
    """The similarities in [-1, 1] where the two lengths of Eq. 20 are equal."""
    S = sp.Symbol("S", real=True)
    sols = sp.solve(sp.Eq((1 + S) / 2, 1 - S**2), S)
    return {s for s in sols if -1 <= s <= 1}


def _unit(x: sp.Symbol, y: sp.Symbol) -> sp.Matrix:
    """``(x, y, sqrt(1 - x^2 - y^2))``: a unit vector of R^3 (where ``x^2 + y^2 <= 1``)."""
    return sp.Matrix([x, y, sp.sqrt(1 - x**2 - y**2)])


def _tangential(v: sp.Matrix, at: sp.Matrix) -> sp.Matrix:
    """The part of ``v`` tangent to the unit sphere at ``at``."""
    return v - at.dot(v) * at


def _tangential_gap(u1: sp.Symbol, u2: sp.Symbol, v1: sp.Symbol, v2: sp.Symbol) -> list[sp.Expr]:
    """``tangent(e^euc) - tangent(e^cos) / D`` at ``f_p`` and at ``f_a`` (6 components)."""
    fa, fp = _unit(u1, u2), _unit(v1, v2)
    D = sp.sqrt((fp - fa).dot(fp - fa))
    at_p = _tangential((fp - fa) / D, fp) - _tangential(-fa, fp) / D
    at_a = _tangential((fa - fp) / D, fa) - _tangential(-fp, fa) / D
    return [*at_p, *at_a]


def euc_is_cos_over_distance_on_sphere(verbose: bool = False) -> bool:
    """On the sphere, the tangential part of ``e^euc`` is that of ``e^cos`` divided by ``D``
    (at the positive: ``e_p``; at the anchor: ``e_ap``), for unit ``f_a, f_p`` in R^3.

    With ``verbose`` it prints, for the first component at the positive, the tangential part of
    ``e^cos`` with ``S = f_a . f_p`` written as ``S`` (``S*v1 - u1``: 13.4's ``-(z_a - S z_p)``)
    and what ``D`` times that of ``e^euc`` minus it simplifies to, beside the verdict."""
    u1, u2, v1, v2 = sp.symbols("u1 u2 v1 v2", real=True)
    fa, fp = _unit(u1, u2), _unit(v1, v2)
    apart = [sp.Ne((fp - fa).dot(fp - fa), 0)]  # f_a != f_p: D > 0
    ok = prove_equal(
        lambda: _tangential_gap(u1, u2, v1, v2), lambda: [0] * 6, where=apart, verbose=False
    )
    if verbose:
        S = sp.Symbol("S", real=True)
        cos_p = _tangential(-fa, fp)[0].subs(fa.dot(fp), S)
        rest = sp.simplify(sp.expand((fp - fa) - fp.dot(fp - fa) * fp)[0] - (fa.dot(fp) * v1 - u1))
        print(
            f"tangent(e_euc) = tangent(e_cos) / D at z_p and z_a: {'proved' if ok else 'NOT PROVED'}"
        )
        print(
            "  z_a = (u1, u2, .), z_p = (v1, v2, .) unit vectors in R^3 (one instance), S = z_a . z_p"
        )
        print(f"  tangent(e_cos) at z_p, first component: {sp.sstr(cos_p)}")
        print(f"  D * tangent(e_euc) minus that, simplified: {sp.sstr(rest)}")
    return ok
