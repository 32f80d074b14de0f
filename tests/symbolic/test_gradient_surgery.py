"""Proofs of :mod:`dmlbook.symbolic.gradient_surgery` (Xuan & Pless, Eq. 5-6, Table 1, Eq. 20,
the normalisation layer, integrability). Each is exact (SymPy) unless it says numeric.
Chapter: ``book/13_gradient_surgery.ipynb`` (13.1, 13.3-13.5)."""

from __future__ import annotations

import math

import sympy as sp
import torch

from dmlbook.symbolic import counterexample, derived, prove_equal
from dmlbook.symbolic import gradient_surgery as gs


def test_eq5_is_the_gradient_of_eq3():
    assert gs.eq5_holds()


def test_eq6_is_the_gradient_of_eq4():
    assert gs.eq6_holds()


def test_table1_rows_that_hold_with_their_constants():
    for name in gs.TRIPLET_ROWS:
        assert gs.triplet_row_holds(name), name


def test_circle_row_as_sun_et_al_define_it():
    """Weights held constant: P_+ = 1 + m - s_ap, P_- = s_an + m, T^cir shifted; = the row at m=0."""
    w = gs._circle_derived(detached=True)  # derived from the loss as typed
    at_0 = [derived(lambda v: v.subs(gs.margin, 0), w[k], differentiates=False) for k in (0, 1)]
    assert prove_equal(at_0[0], lambda: gs.kappa * gs._T_cir(0) * (1 - gs.s_ap), verbose=False)
    assert prove_equal(at_0[1], lambda: gs.kappa * gs._T_cir(0) * gs.s_an, verbose=False)
    w_plus = w.value[0]
    # for m > 0 the pair weight is not P^lin: a point where they differ
    half = {gs.margin: sp.Rational(1, 2)}
    T_half = gs._T_cir(sp.Rational(1, 2))
    assert counterexample(w_plus.subs(half), gs.kappa * T_half * (1 - gs.s_ap)) is not None


def test_printed_eq17_needs_m_squared_one_half():
    """Eq. 17 as printed is T^cir(m) only where 1 - 2 m^2 = 0."""
    m = sp.Symbol("m", positive=True)
    printed = lambda: 1 / (1 + sp.exp(gs.kappa * (gs.s_ap * (2 - gs.s_ap) - gs.s_an**2)))
    assert prove_equal(lambda: gs._T_cir(1 / sp.sqrt(2)), printed, verbose=False)
    assert sp.solve(sp.Eq(1 - 2 * m**2, 0), m) == [sp.sqrt(2) / 2]


def test_circle_rows_hold_for_every_margin_in_their_own_form(capsys):
    """Differentiated weights: c = 2 kappa with P^lin; held constant: c = kappa with the shifted
    pair weights; both with T^cir(m). A wrong constant or pair weight is not proved."""
    assert gs.circle_row(detached=False) and gs.circle_row(detached=True)
    w_plus = gs._circle_derived(detached=True)[0]  # Sun et al.'s form is not P^lin for m > 0
    claim = lambda: gs.kappa * gs._T_cir(gs.margin) * (1 - gs.s_ap)
    assert not prove_equal(w_plus, claim, verbose=False)
    assert gs.circle_row(detached=False, verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Circle loss, weights differentiated: proved for every m"
    assert out[1] == "  exponent z / kappa = -2*m**2 + s_an**2 + s_ap**2 - 2*s_ap + 1"
    assert out[3].endswith("T = 1/(1 + exp(kappa*(2*m**2 - s_an**2 - s_ap**2 + 2*s_ap - 1)))")


def test_ms_row_prints_its_three_results(capsys):
    """The sum form proved, the printed mean refuted at a point, the other positive moved."""
    assert gs.ms_row(2, verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out[1].endswith("proved") and out[2].startswith("  = 1/(mean") and " at " in out[2]
    assert out[3].startswith("dL/ds_ap1: -exp(") and out[3].endswith("moves too)")


def test_table_rows_print_their_derivatives(capsys):
    assert gs.triplet_row_holds("Binomial deviance [24]", verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Binomial deviance [24]: proved, c = 2, T = 1/2"
    assert out[3] == "   dl/ds_an = 1/(exp(beta*(lambda - s_an)) + 1)"


def test_ms_weight_is_one_plus_a_sum_not_the_printed_mean():
    """Typed here from Wang et al. Eq. 15 and Eq. 13 (1 + sum), independently of the module."""
    R1, R2 = gs.others(2)
    a, lam, s = gs.alpha, gs.lam, gs.s_ap
    w = derived(
        lambda L: -sp.diff(L, s),
        lambda: (
            sp.log(1 + sp.exp(-a * (s - lam)) + sp.exp(-a * (R1 - lam)) + sp.exp(-a * (R2 - lam)))
            / a
        ),
        differentiates=True,
    )
    by_sum = lambda: 1 / (1 + sp.exp(a * (s - R1)) + sp.exp(a * (s - R2)) + sp.exp(a * (s - lam)))
    assert prove_equal(w, by_sum, verbose=False)
    module_w, module_by_sum, by_mean = gs.ms_positive_weight(2)
    assert sp.simplify(module_w - w.value) == 0 and sp.simplify(module_by_sum - by_sum()) == 0
    assert counterexample(w.value, by_mean) is not None


def test_ms_moves_the_other_positives():
    R1 = sp.Symbol("s_ap1", real=True)
    terms = [sp.exp(-gs.alpha * (s - gs.lam)) for s in (gs.s_ap, R1)]
    loss = sp.log(1 + sum(terms)) / gs.alpha
    assert sp.simplify(sp.diff(loss, R1)) != 0


def test_selective_contrastive_is_no_gradient_on_the_hard_side():
    """On S_an > S_ap the (T^cos & T^sc1) field is w_+ = 0, w_- = tau T^cos: its curl is not 0;
    a contrastive term on the negative (constant weight) has curl 0."""
    T = 1 / (1 + sp.exp(gs.tau * (gs.s_ap - gs.s_an)))
    assert gs.closed_form_test(sp.Integer(0), gs.tau * T) != 0
    assert gs.closed_form_test(sp.Integer(0), sp.Integer(1)) == 0


def test_which_cosine_fields_are_gradients():
    T_cos = 1 / (1 + sp.exp(gs.tau * (gs.s_ap - gs.s_an)))
    closed = {
        "lin x con": (1 - gs.s_ap, gs.s_an),
        "con x cos": (T_cos, T_cos),
    }
    open_ = {"lin x cos": ((1 - gs.s_ap) * T_cos, gs.s_an * T_cos)}
    for name, (wp, wn) in closed.items():
        assert gs.closed_form_test(wp, wn) == 0, name
    for name, (wp, wn) in open_.items():
        assert gs.closed_form_test(wp, wn) != 0, name


def test_numeric_integrability_matches_the_symbolic_verdicts():
    """Numeric (float64): symmetric Jacobian for the loss rows, not for T^cos x P^lin or any
    orthogonal direction."""
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for direction, pair, trip in [("cos", "con", "cos"), ("cos", "sig", "con"),
                                  ("euc", "euc", "con"), ("cos", "lin", "con")]:  # fmt: skip
        assert gs.field_asymmetry(direction, gs.table_weights(pair, trip), x) < 1e-12
    for direction, pair, trip in [("cos", "lin", "cos"), ("euc", "con", "cos"),
                                  ("cos_orth", "con", "con"), ("euc_orth", "con", "con")]:  # fmt: skip
        assert gs.field_asymmetry(direction, gs.table_weights(pair, trip), x) > 1e-3


def test_the_negative_relative_term_of_eq13_lowers_the_weight_when_above_one():
    """Appendix Sec. 2 reads m^sig_- > 1 as a weight *increase*; dP/dm = -P^2 says otherwise, and
    under hard negative mining m^sig_- <= 1 (appendix Fig. 1's Delta S = 0.1, beta = 10: e^-1)."""
    assert all(v is True for v in gs.sig_ms_negative_term().values())
    beta, lam, s = 10.0, 0.5, 0.5
    sig = 1 / (1 + math.exp(-beta * (s - lam)))
    with_term = 1 / (math.exp(-beta * 0.1) + math.exp(-beta * (s - lam)))
    above_one = 1 / (math.exp(beta * 0.1) + math.exp(-beta * (s - lam)))
    assert with_term > sig > above_one


def test_verbose_gradient_proofs_print_what_sympy_differentiated(capsys):
    """Chapter 13 prints the derivatives beside the verdicts of Eq. 5 and Eq. 6."""
    assert gs.eq5_holds(verbose=True) and gs.eq6_holds(verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Eq. 5 = gradient of Eq. 3: proved")
    assert out[1].endswith("-2*(a_1 - p_1)") and out[2].endswith("2*(a_1 - n_1)")
    assert out[4].startswith("Eq. 6 = gradient of Eq. 4: proved")
    assert out[5] == "  dL/ds_ap: -tau*exp(s_an*tau)/(exp(s_an*tau) + exp(s_ap*tau))"
    assert gs.eq5_holds() and capsys.readouterr().out == ""  # silent by default
