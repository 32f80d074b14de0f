"""Tests of dmlbook.reference.dro, the DRO paper's losses as loops: the per-pair base losses, every
uncertainty set of Eq. 1 on a batch whose pair losses are read off by hand, the chi-square ball
against its closed form, grouped KL (Eq. 7) and HAP2S_E (supplement Eq. 30-32).

The batch: ``y = (0, 0, 1)``, ``S_01 = 0.45``, ``S_02 = 0.5``, ``S_12 = 0.6``. With the margin
base loss ``[m + y (lambda - S)]_+`` (``m = 0.2``, ``lambda = 0.5``; ``y = +1`` for a positive
pair) the ordered pairs' losses are, anchor by anchor, 0: 0.25 (positive), 0.2; 1: 0.25
(positive), 0.3; 2: 0.2, 0.3.
"""

from __future__ import annotations

import math

import pytest

from dmlbook.reference.dro import (
    chi2_value_reference,
    dro_grouped_loss_reference,
    dro_loss_reference,
    hap2s_e_loss_reference,
    pair_loss_reference,
)

S = [[1.0, 0.45, 0.5], [0.45, 1.0, 0.6], [0.5, 0.6, 1.0]]
Y = [0, 0, 1]
LOSSES = [0.25, 0.2, 0.25, 0.3, 0.2, 0.3]
e, log = math.exp, math.log


def test_pair_losses():
    margin = lambda s, positive: pair_loss_reference(s, positive, "margin", 0.2, 0.5, 2.0, 50.0)
    assert margin(0.8, True) == 0.0  # 0.2 + (0.5 - 0.8) < 0
    assert margin(0.8, False) == pytest.approx(0.5)  # 0.2 - (0.5 - 0.8)
    assert margin(0.45, True) == pytest.approx(0.25)
    binomial = lambda s, positive: pair_loss_reference(s, positive, "binomial", 0, 0.5, 2.0, 50.0)
    assert binomial(0.3, True) == pytest.approx(log(1 + e(2.0 * 0.2)))
    assert binomial(0.6, False) == pytest.approx(log(1 + e(50.0 * 0.1)))
    assert binomial(-100.0, True) == pytest.approx(2.0 * 100.5)  # softplus(201), no overflow
    assert binomial(-100.0, False) == pytest.approx(e(-50.0 * 100.5), abs=1e-300)


def test_every_uncertainty_set_of_eq1():
    dro = lambda u, **kw: dro_loss_reference(S, Y, u, **kw)
    assert dro("uniform") == pytest.approx(sum(LOSSES) / 6)
    assert dro("simplex") == pytest.approx(0.3)
    assert dro("topk", K=3) == pytest.approx((0.3 + 0.3 + 0.25) / 3)
    assert dro("topk", K=8) == pytest.approx(sum(LOSSES) / 8)  # fewer pairs than K: / K still
    # TopK-PN: K/2 positive and K/2 negative pairs
    assert dro("topk_pn", K=4) == pytest.approx((0.25 + 0.25 + 0.3 + 0.3) / 4)
    # KL ball: gamma log((1/n) sum e^{l/gamma})
    want = 0.1 * log(sum(e(v / 0.1) for v in LOSSES) / 6)
    assert dro("kl", gamma=0.1) == pytest.approx(want)
    assert dro("chi2", rho=0.7) == pytest.approx(chi2_value_reference(LOSSES, 0.7))
    # drop_zero=False keeps a pair whose hinge is 0 (S_01 = 0.9: positive loss 0)
    s = [[1.0, 0.9, 0.5], [0.9, 1.0, 0.6], [0.5, 0.6, 1.0]]
    assert dro_loss_reference(s, Y, "uniform") == pytest.approx((0.2 + 0.3 + 0.2 + 0.3) / 4)
    assert dro_loss_reference(s, Y, "uniform", drop_zero=False) == pytest.approx(1.0 / 6)
    close = [[1.0, 0.9, 0.9], [0.9, 1.0, 0.9], [0.9, 0.9, 1.0]]
    assert dro_loss_reference(close, [0, 0, 0], "kl") == 0.0  # every pair's loss is 0: none left


def test_chi2_ball_against_its_closed_form():
    # Two losses (1, 0): p = (q, 1 - q) with (2q - 1)^2 <= rho, so the value is (1 + sqrt(rho)) / 2
    assert chi2_value_reference([1.0, 0.0], 0.5) == pytest.approx((1 + math.sqrt(0.5)) / 2)
    assert chi2_value_reference([1.0, 0.0], 1.0) == 1.0  # the whole mass fits on the maximum
    # No weight clipped at 0: p = 1/n + t (l - mean), value = mean + sqrt(2 rho V) / n with
    # V = sum (l - mean)^2 (here p_3 = 1/3 - (4/3) t > 0)
    losses, rho = [3.0, 1.0, 0.0], 0.3
    mean = sum(losses) / 3
    V = sum((v - mean) ** 2 for v in losses)
    assert chi2_value_reference(losses, rho) == pytest.approx(mean + math.sqrt(2 * rho * V) / 3)
    assert chi2_value_reference([0.4, 0.4, 0.4], 0.1) == pytest.approx(0.4)


def test_grouped_kl_is_eq7_per_anchor():
    g = 0.2
    kl = lambda *ls: g * (log(sum(e(v / g) for v in ls)) - log(len(ls)))
    # one pair in a group: gamma (l / gamma - log 1) = l
    want = (0.25 + 0.2 + 0.25 + 0.3 + kl(0.2, 0.3)) / 3
    assert dro_grouped_loss_reference(S, Y, g, g) == pytest.approx(want)
    assert dro_grouped_loss_reference(S, Y, g, g, reduction="sum") == pytest.approx(want * 3)
    # supplement Eq. 23: a pseudo pair of loss l0 joins every group
    want = (kl(0.25, 0) + kl(0.2, 0) + kl(0.25, 0) + kl(0.3, 0) + kl(0.2, 0.3, 0)) / 3
    assert dro_grouped_loss_reference(S, Y, g, g, pseudo=True) == pytest.approx(want)


def test_hap2s_e_is_supplement_eq30_to_32():
    # anchors 0 and 1 have one positive and one negative: [S_an - S_ap + m]_+
    assert hap2s_e_loss_reference(S, Y, m=0.2) == pytest.approx((0.25 + 0.35) / 2)
    # two positives: weights e^{-S/gamma} favour the less similar one
    s = [[1.0, 0.9, 0.3, 0.5], [0.9, 1.0, 0.6, 0.2], [0.3, 0.6, 1.0, 0.1], [0.5, 0.2, 0.1, 1.0]]
    y, gamma = [0, 0, 0, 1], 0.1
    soft = lambda xs, sign: (
        sum(x * e(sign * x / gamma) for x in xs) / sum(e(sign * x / gamma) for x in xs)
    )
    anchors = [((0.9, 0.3), 0.5), ((0.9, 0.6), 0.2), ((0.3, 0.6), 0.1)]
    want = sum(max(0.0, neg - soft(pos, -1) + 0.2) for pos, neg in anchors) / 3
    assert hap2s_e_loss_reference(s, y, m=0.2, gamma=gamma) == pytest.approx(want)
