"""Tests of dmlbook.surgery.weights: the pair weights (Xuan & Pless, Eq. 8-14), the triplet weights
(Eq. 15-17) and the selections (Eq. 18-19), against the equations evaluated by hand."""

from __future__ import annotations

import math

import pytest
import torch

from dmlbook.surgery.weights import (
    pair_weights,
    relative_means,
    select,
    sig_ms_weights,
    triplet_weight,
)


def test_pair_weights_are_eq8_to_14():
    sp, sn = torch.tensor([0.7], dtype=torch.float64), torch.tensor([0.4], dtype=torch.float64)
    hp = {"alpha": 2.0, "beta": 10.0, "lam": 0.5}
    assert [float(w) for w in pair_weights("con", sp, sn, **hp)] == [1.0, 1.0]
    euc = pair_weights("euc", sp, sn, **hp)
    assert float(euc[0]) == pytest.approx(math.sqrt(0.6)) and float(euc[1]) == pytest.approx(
        math.sqrt(1.2)
    )
    assert [float(w) for w in pair_weights("lin", sp, sn, **hp)] == pytest.approx([0.3, 0.4])
    sig = pair_weights("sig", sp, sn, **hp)
    assert float(sig[0]) == pytest.approx(1 / (1 + math.exp(0.4)))
    assert float(sig[1]) == pytest.approx(1 / (1 + math.exp(1.0)))
    m = torch.tensor([1.5], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64)
    ms = pair_weights("sig_ms", sp, sn, **hp, m_plus=m[0], m_minus=m[1])
    assert float(ms[0]) == pytest.approx(1 / (1.5 + math.exp(0.4)))
    lin_ms = pair_weights("lin_ms", sp, sn, **hp, m_plus=m[0], m_minus=m[1])
    assert [float(w) for w in lin_ms] == pytest.approx([(1 - 1.5) * 0.3, 1.5 * 0.4])
    with pytest.raises(ValueError, match="needs m_plus"):
        pair_weights("lin_ms", sp, sn, **hp)


def test_triplet_weights_and_selections():
    sp = torch.tensor([0.9, 0.3], dtype=torch.float64)
    sn = torch.tensor([0.1, 0.6], dtype=torch.float64)
    assert triplet_weight("con", sp, sn, tau=2.0).tolist() == [0.5, 0.5]
    cos = triplet_weight("cos", sp, sn, tau=2.0)
    assert float(cos[0]) == pytest.approx(1 / (1 + math.exp(2.0 * 0.8)))
    cir = triplet_weight("cir", sp, sn, tau=2.0)  # Eq. 17 as printed
    assert float(cir[1]) == pytest.approx(1 / (1 + math.exp(2.0 * (0.3 * 1.7 - 0.36))))
    one = torch.ones(2, dtype=torch.float64)
    assert select("sc1", one, sp, sn).tolist() == [1.0, 0.0]  # the hard triplet loses its pull
    assert select("sc2", one, sp, sn).tolist() == [1.0, 0.0]  # inside the circle: kept
    assert select("none", one, sp, sn).tolist() == [1.0, 1.0]


def test_relative_means_of_an_empty_set_are_eq_13_14_neutral_values():
    """Eq. 13's means are 1 over an empty relative set (so sig_ms falls back to Eq. 11), Eq. 14's
    0 (lin_ms falls back to lin); a planted 1 -> 0 (issue 38) made sig_ms's weight 1/e^x."""
    rows = torch.tensor([[0.9, 0.2, 0.5]], dtype=torch.float64)
    sp, sn = torch.tensor([0.6], dtype=torch.float64), torch.tensor([0.4], dtype=torch.float64)
    none = torch.zeros(1, 3, dtype=torch.bool)
    hp = {"alpha": 2.0, "beta": 10.0}
    assert [float(m) for m in relative_means(rows, sp, sn, none, none, "sig", **hp)] == [1.0, 1.0]
    assert [float(m) for m in relative_means(rows, sp, sn, none, none, "lin", **hp)] == [0.0, 0.0]
    some = torch.tensor([[True, False, True]])
    m_plus, m_minus = relative_means(rows, sp, sn, some, some, "sig", **hp)
    assert float(m_plus) == pytest.approx((math.exp(2 * (0.6 - 0.9)) + math.exp(2 * 0.1)) / 2)
    assert float(m_minus) == pytest.approx((math.exp(-10 * (0.4 - 0.9)) + math.exp(1.0)) / 2)
    p_plus, p_minus = sig_ms_weights(rows, sp, sn, none, none, **hp, lam=0.5)
    assert float(p_plus) == pytest.approx(1 / (1 + math.exp(2 * (0.6 - 0.5))))  # Eq. 11
    assert float(p_minus) == pytest.approx(1 / (1 + math.exp(-10 * (0.4 - 0.5))))


def test_sig_ms_weight_is_infinite_exactly_where_eq_13_leaves_float32():
    """Both terms of 1 / (m_- + e^(-beta (S_an - lam))) underflow in float32 at beta = 1000; Eq. 13
    in float64 (math, by hand) then gives weights beyond float32's largest number, so inf is
    the only float32 answer. Where one term survives, the float32 weight is Eq. 13's value."""
    rows = torch.tensor([[0.875, 0.25, 0.5, 0.3125]])  # binary fractions: exact in float32
    in_P = torch.zeros(1, 4, dtype=torch.bool)
    in_N = torch.tensor([[False, True, False, True]])
    hp = {"alpha": 2.0, "beta": 1000.0}
    for s_an, lam in ((0.625, 0.5), (0.578125, 0.484375), (0.375, 0.3125)):
        m = (math.exp(-1000 * (s_an - 0.25)) + math.exp(-1000 * (s_an - 0.3125))) / 2
        want = 1 / (m + math.exp(-1000 * (s_an - lam)))
        got = sig_ms_weights(rows, torch.tensor([0.6]), torch.tensor([s_an]), in_P, in_N, **hp,
                             lam=lam)[1]  # fmt: skip
        if want > torch.finfo(torch.float32).max:
            assert math.isinf(float(got)) and float(got) > 0
        else:
            assert float(got) == pytest.approx(want, rel=1e-5)
    assert want < 1e30  # the last case is the finite one


def test_selections_at_their_boundaries():
    """Eq. 18 drops the pull only when S_an > S_ap (a tie keeps it); Eq. 19 only inside the
    circle, S_ap (2 - S_ap) - S_an^2 < 1/2 (on it: kept). Exact binary values, no rounding."""
    one = torch.ones(1, dtype=torch.float64)
    tie = torch.tensor([0.5], dtype=torch.float64)
    assert select("sc1", one, tie, tie).tolist() == [1.0]
    assert select("sc1", one, tie, tie + 2**-20).tolist() == [0.0]
    s_ap, s_an = torch.tensor([0.5], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64)
    assert float(s_ap * (2 - s_ap) - s_an**2) == 0.5  # exactly on the circle
    assert select("sc2", one, s_ap, s_an).tolist() == [1.0]
    assert select("sc2", one, s_ap, s_an + 2**-20).tolist() == [0.0]


def test_unknown_kinds_are_named_with_the_valid_ones():
    one = torch.ones(1, dtype=torch.float64)
    with pytest.raises(ValueError) as refused:
        triplet_weight("circle", one, one, tau=1.0)
    assert str(refused.value) == "triplet_weight must be one of con, cos, cir; got 'circle'."
    with pytest.raises(ValueError) as refused:
        select("sc3", one, one, one)
    assert str(refused.value) == "selection must be one of none, sc1, sc2; got 'sc3'."


def test_ms_pair_weights_need_both_means():
    one = torch.ones(1, dtype=torch.float64)
    hp = {"alpha": 2.0, "beta": 10.0, "lam": 0.5}
    with pytest.raises(ValueError) as refused:
        pair_weights("ms", one, one, **hp)
    assert str(refused.value) == (
        "pair_weight must be one of con, euc, lin, sig, sig_ms, lin_ms; got 'ms'."
    )
    for kind in ("sig_ms", "lin_ms"):
        for means in ({}, {"m_plus": one}, {"m_minus": one}):
            with pytest.raises(ValueError, match=f"pair weight '{kind}' needs m_plus and m_minus"):
                pair_weights(kind, one, one, **hp, **means)
