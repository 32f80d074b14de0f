"""Tests of dmlbook.reference.multi_similarity, the per-anchor loop of the MS loss: its mining
(Wang et al. 2019, Eq. 11-12), its value (Eq. 15) and, through autograd, the paper's weights
(Eq. 13-14), all on a hand-worked batch.

The batch: ``y = (0, 0, 1, 1)`` and the similarities of tests/reference/batches.py. With
``epsilon = 0.1``, anchors 0 and 1 (positive 0.8, negatives at most 0.6) mine nothing: no
negative is above ``0.8 - 0.1`` and the positive is not below ``max negative + 0.1``. Anchor 2
(positive 0.1; negatives 0.5, 0.6) keeps both negatives (above 0.0) and its positive (below
0.7); anchor 3 (positive 0.1; negatives 0.3, -0.2) keeps negative 0 only and its positive
(below 0.4).
"""

from __future__ import annotations

import math

import pytest
import torch

from dmlbook.reference import ms_mining_reference, multi_similarity_loss_reference

from .batches import FOUR, FOUR_LABELS

S = torch.tensor(FOUR, dtype=torch.float64)
Y = torch.tensor(FOUR_LABELS)
A, B_, LAM = 2.0, 10.0, 0.5
e, log = math.exp, math.log


def pos(*s):  # (1/alpha) log(1 + sum_P e^{-alpha (S - lambda)})
    return log(1 + sum(e(-A * (x - LAM)) for x in s)) / A


def neg(*s):  # (1/beta) log(1 + sum_N e^{beta (S - lambda)})
    return log(1 + sum(e(B_ * (x - LAM)) for x in s)) / B_


def test_mining_is_eq11_and_eq12():
    P, N = ms_mining_reference(S, Y, 0.1)
    assert P == [[], [], [3], [2]]
    assert N == [[], [], [0, 1], [0]]
    # a larger epsilon lets anchor 0 keep its positive (0.8 < 0.5 + 0.4) and negative 2 (> 0.4)
    P, N = ms_mining_reference(S, Y, 0.4)
    assert P[0] == [1] and N[0] == [2]


def test_value_is_eq15_over_the_mined_pairs():
    got = multi_similarity_loss_reference(S, Y, A, B_, LAM, 0.1)
    want = (pos(0.1) + neg(0.5, 0.6) + pos(0.1) + neg(0.3)) / 4
    assert float(got) == pytest.approx(want, rel=1e-14)
    got = multi_similarity_loss_reference(S, Y, A, B_, LAM, 0.1, mining=False)
    want = (
        pos(0.8) + neg(0.5, 0.3) + pos(0.8) + neg(0.6, -0.2)
        + pos(0.1) + neg(0.5, 0.6) + pos(0.1) + neg(0.3, -0.2)
    ) / 4  # fmt: skip
    assert float(got) == pytest.approx(want, rel=1e-14)


def test_autograd_gives_the_weights_of_eq13_and_eq14():
    x = S.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(multi_similarity_loss_reference(x, Y, A, B_, LAM, 0.1), x)
    # Eq. 14: w-_ik = e^{beta (S_ik - lambda)} / (1 + sum_N e^{beta (S_ik' - lambda)}), over B = 4
    z = 1 + e(0.0) + e(B_ * 0.1)
    assert float(grad[2, 0]) == pytest.approx(e(0.0) / z / 4, rel=1e-14)
    assert float(grad[2, 1]) == pytest.approx(e(B_ * 0.1) / z / 4, rel=1e-14)
    # Eq. 13: w+_ik = e^{-alpha (S_ik - lambda)} / (1 + sum_P ...), the gradient is -w+ / B
    w = e(-A * (0.1 - LAM))
    assert float(grad[2, 3]) == pytest.approx(-w / (1 + w) / 4, rel=1e-14)
    # unmined pairs, the diagonal and anchors 0 and 1 get no gradient
    assert grad[3, 1] == 0 and grad[0].abs().sum() == 0 and grad[1].abs().sum() == 0
    assert torch.diagonal(grad).abs().sum() == 0


def test_batches_without_pairs_give_zero_with_a_zero_gradient():
    one = torch.ones(1, 1, dtype=torch.float64, requires_grad=True)
    loss = multi_similarity_loss_reference(one, torch.tensor([0]))
    (grad,) = torch.autograd.grad(loss, one)
    assert float(loss.detach()) == 0.0 and float(grad) == 0.0
    # one class, mined: no negative gives no threshold, so no pair at all; unmined: Eq. 15's
    # positive half alone
    same = torch.tensor([0, 0, 0, 0])
    assert float(multi_similarity_loss_reference(S, same, A, B_, LAM)) == 0.0
    got = multi_similarity_loss_reference(S, same, A, B_, LAM, mining=False)
    rows = [(0.8, 0.5, 0.3), (0.8, 0.6, -0.2), (0.5, 0.6, 0.1), (0.3, -0.2, 0.1)]
    assert float(got) == pytest.approx(sum(pos(*r) for r in rows) / 4, rel=1e-14)


def test_bad_hyper_parameters_are_refused():
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        multi_similarity_loss_reference(S, Y, alpha=0.0)
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        multi_similarity_loss_reference(S, Y, beta=float("inf"))
