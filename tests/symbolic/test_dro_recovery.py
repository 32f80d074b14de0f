"""The DRO paper's recovery claims (:mod:`dmlbook.symbolic.dro_recovery`): every step proved,
the verbose rows Chapter 12 prints, the printed pseudo-pair erratum by numbers, and the proofs'
own operations checked as a caller's would be."""

from __future__ import annotations

import math

import pytest

from dmlbook.symbolic import dro_recovery as rec


@pytest.mark.parametrize(
    "proof", [rec.grouped_kkt, rec.ls_recovery, rec.ms_recovery, rec.hap2s_recovery]
)
def test_every_step_is_proved(proof):
    """Each proof's operations are checked as a caller's (only SymPy's own and the
    differentiations are trusted), and every step holds."""
    results = proof()
    assert results and all(v is True for v in results.values()), results


def test_printed_pseudo_pairs_do_not_give_ms_with_one_lambda():
    """Erratum (supplement Eq. 25): with l_0 = 0 and m > 0 the weights differ from MS(lambda)."""
    a, lam, m, s1 = 2.0, 0.5, 0.2, 0.6  # one positive pair at S = 0.6, gamma^+ = 1/alpha
    l = m + lam - s1
    dro_pos = math.exp(a * l) / (math.exp(0.0) + math.exp(a * l))  # Eq. 25, l_0 = 0
    ms_pos = 1 / (math.exp(a * (s1 - lam)) + 1)  # Eq. 27
    corrected = math.exp(a * l) / (math.exp(a * m) + math.exp(a * l))  # l_0 = m
    assert abs(dro_pos - ms_pos) > 0.09
    assert corrected == pytest.approx(ms_pos, abs=1e-15)


def test_hap2s_prints_what_each_step_computed(proof_rows):
    """HAP2S_E prints its weight beside DRO-KL-G's (issue 39)."""
    assert all(rec.hap2s_recovery(P=2, N=1, verbose=True).values())
    _, rows = proof_rows()
    hap = rows["HAP2S_E weight, dL/ds^+_1"]
    assert hap == "-exp(-s^+_1/gamma)/(exp(-s^+_2/gamma) + exp(-s^+_1/gamma))"
    assert "lambda + m" in rows["DRO-KL-G weight, dF/ds^+_1"]  # the softmax of l / gamma
    assert rows["HAP2S_E weights = DRO-KL-G(gamma)"] == f"proved      dF/ds^+_1 = {hap}"
    assert rows["HAP2S_E(gamma=1) = LS (Eq. 22)"].endswith("= -1/(exp(s^+_1 - s^+_2) + 1)")


def test_the_grouped_proofs_print_the_multiplier_and_the_thresholds(proof_rows):
    assert all(rec.grouped_kkt(P=1, N=2, verbose=True).values())
    _, rows = proof_rows()
    assert rows["Eq. 18 (negative)"].startswith("proved      v* = gamma*log(")
    assert all(rec.ms_recovery(P=1, N=1, verbose=True).values())
    _, rows = proof_rows()
    assert rows["l0 = m: weights = MS(lambda)"] == "proved      c^+ = lambda, c^- = lambda"
    assert rows["printed l0 = 0, m = 0: weights = MS(lambda)"].endswith("equal iff m = 0")
