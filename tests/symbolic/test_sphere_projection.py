"""Eq. 20 and the normalisation layer (:mod:`dmlbook.symbolic.sphere_projection`): both sides
built from the vectors as typed, the proof stating ``D != 0``; a wrong length is not proved."""

from __future__ import annotations

import sympy as sp

from dmlbook.symbolic import prove_equal
from dmlbook.symbolic import sphere_projection as sph


def test_eq20_and_where_the_curves_cross():
    t = sp.Symbol("t", positive=True)
    where = sph.PROJECTION_CONDITION  # f_p != f_a
    for k in ("euc", "cos"):  # the squares as typed from the vectors (e^euc divides by D)
        derived_sq = lambda k=k: sph.tangential_squares(t)[k]
        printed_sq = lambda k=k: sph.tangential_squares(t)[f"{k}_printed"]
        assert prove_equal(derived_sq, printed_sq, where=where, verbose=False), k
    assert not prove_equal(
        lambda: sph.tangential_squares(t)["euc"],
        lambda: 1 - sp.cos(t) ** 2,
        where=where,
        verbose=False,
    )
    L = sph.projection_lengths()
    assert (
        sp.simplify(L["euc"] - (1 + sp.cos(t)) / 2) == 0 and L["cos_printed"] == 1 - sp.cos(t) ** 2
    )
    assert sph.projection_lengths_cross() == {sp.Rational(1, 2), sp.Integer(-1)}


def test_normalisation_layer_turns_euc_into_cos_over_distance(capsys):
    assert sph.euc_is_cos_over_distance_on_sphere()
    assert capsys.readouterr().out == ""
    assert sph.euc_is_cos_over_distance_on_sphere(verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": proved")
    assert out[2].endswith("first component: S*v1 - u1")  # -(z_a - S z_p), 13.4
    assert out[3].endswith("simplified: 0")
