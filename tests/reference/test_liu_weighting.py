"""Tests of dmlbook.reference.liu_weighting, Algorithm 1 of Liu et al. one anchor at a time: the
pair and triplet weightings (Eq. 16-34) and MS v1/v2 on distances (Eq. 22-23, 39) on hand-worked
batches, with the weights held constant in the backward pass (their footnote 6).

The batch: ``y = (0, 0, 1)``, ``S_01 = 0.45``, ``S_02 = 0.5``, ``S_12 = 0.6``, so on unit vectors
``D = sqrt(2 - 2S)``: ``D_01 = sqrt(1.1)``, ``D_02 = 1``, ``D_12 = sqrt(0.8)``. Anchors 0 and 1 have
one positive and one negative each, anchor 2 two negatives and no positive.
"""

from __future__ import annotations

import math

import pytest
import torch

from dmlbook.reference.liu_weighting import (
    ms_distance_loss_reference,
    pair_weighted_loss_reference,
    triplet_weighted_loss_reference,
)

from .batches import FOUR, FOUR_LABELS


def batch(s01=0.45, s02=0.5, s12=0.6):
    S = torch.tensor(
        [[1.0, s01, s02], [s01, 1.0, s12], [s02, s12, 1.0]], dtype=torch.float64
    ).requires_grad_(True)
    return S, torch.tensor([0, 0, 1])


D01, D02, D12 = math.sqrt(1.1), 1.0, math.sqrt(0.8)


def test_constant_weights_without_normalisation_sum_the_hinges_of_eq18():
    S, y = batch()
    got = pair_weighted_loss_reference(S, y, 0.0, 1.2, weighting="constant", normalization="none")
    # Eq. 16-17 keep every pair here (D >= 0 for positives, D <= 1.2 for negatives)
    want = (D01 + (1.2 - D02) + D01 + (1.2 - D12) + (1.2 - D02) + (1.2 - D12)) / 3
    assert got.item() == pytest.approx(want, rel=1e-14)


def test_power_weights_normalised_per_anchor_and_held_constant():
    S, y = batch()
    got = pair_weighted_loss_reference(S, y, 0.0, 1.2)  # Eq. 24: positives ^0, negatives ^1
    a, b = 1.2 - D02, 1.2 - D12  # anchor 2's negative hinges, also its raw weights
    want = (D01 + a + D01 + b + (a * a + b * b) / (a + b)) / 3
    assert got.item() == pytest.approx(want, rel=1e-14)
    (grad,) = torch.autograd.grad(got, S)
    # dL/dS = (w / B) dhinge/dD dD/dS with the weights constant and dD/dS = -1/D:
    # negative of anchor 0: w = 1; negative 0 of anchor 2: w = a / (a + b)
    assert float(grad[0, 2]) == pytest.approx(1 / 3 / D02, rel=1e-12)
    assert float(grad[2, 0]) == pytest.approx(a / (a + b) / 3 / D02, rel=1e-12)
    assert float(grad[0, 1]) == pytest.approx(-1 / 3 / D01, rel=1e-12)  # positive: w = 1


def test_batch_normalisation_divides_by_the_whole_batchs_weights():
    S, y = batch()
    got = pair_weighted_loss_reference(S, y, 0.0, 1.2, normalization="batch")
    a, b = 1.2 - D02, 1.2 - D12
    want = ((D01 + D01) / 2 + (2 * a * a + 2 * b * b) / (2 * a + 2 * b)) / 3
    assert got.item() == pytest.approx(want, rel=1e-14)
    # exponential weights (Eq. 29-30): e^{t x} on the same hinges, per anchor
    got = pair_weighted_loss_reference(
        S, y, 0.0, 1.2, weighting="exponential", pos_exponent=1.0, neg_exponent=2.0
    )
    wa, wb = math.exp(2 * a), math.exp(2 * b)
    want = (D01 + a + D01 + b + (wa * a + wb * b) / (wa + wb)) / 3
    assert got.item() == pytest.approx(want, rel=1e-14)


def test_eq22_23_drop_an_easy_positive_and_a_far_negative():
    S, y = batch(s01=0.9)  # D_01 = sqrt(0.2) well below D_02 = 1
    assert pair_weighted_loss_reference(S, y, 0.0, 1.2).item() > 0
    assert pair_weighted_loss_reference(S, y, 0.0, 1.2, epsilon=0.1).item() == 0.0


def test_triplet_weights_on_the_triplets_of_eq19():
    # tests/reference/batches.py's four samples, y = (0, 0, 1, 1): only anchors 2 and 3 have
    # triplets with D_ap + m >= D_an
    S = torch.tensor(FOUR, dtype=torch.float64)
    y = torch.tensor(FOUR_LABELS)
    d = lambda s: math.sqrt(2 - 2 * s)
    m = 0.1
    x1, x2 = d(0.1) - d(0.5) + m, d(0.1) - d(0.6) + m  # anchor 2, negatives 0 and 1
    x3 = d(0.1) - d(0.3) + m  # anchor 3, negative 0 (negative 1 is too far)
    assert min(x1, x2, x3) > 0 and d(0.8) + m < d(0.6)  # anchors 0 and 1: no triplet
    got = triplet_weighted_loss_reference(S, y, m, exponent=2.0)  # Eq. 25, 34: x^2 / sum
    want = ((x1**3 + x2**3) / (x1**2 + x2**2) + x3) / 4
    assert got.item() == pytest.approx(want, rel=1e-13)
    got = triplet_weighted_loss_reference(S, y, m, weighting="constant", normalization="none")
    assert got.item() == pytest.approx((x1 + x2 + x3) / 4, rel=1e-13)


@pytest.mark.parametrize("margin", [0.5, 1.0])
def test_ms_on_distances_v1_and_v2(margin):
    S, y = batch()
    a, b = 2.0, 10.0
    got = ms_distance_loss_reference(S, y, margin, a, b, version="v2", epsilon=None)
    # v2 (log sum): with one positive and one negative the threshold cancels: D_ap - D_an
    anchor2 = margin + math.log(math.exp(-b * D02) + math.exp(-b * D12)) / b
    want = ((D01 - D02) + (D01 - D12) + anchor2) / 3
    assert got.item() == pytest.approx(want, rel=1e-13)
    got = ms_distance_loss_reference(S, y, margin, a, b, version="v1", epsilon=None)
    p = lambda dp: math.log1p(math.exp(a * (dp - margin))) / a
    n = lambda *dn: math.log1p(sum(math.exp(b * (margin - v)) for v in dn)) / b
    want = (p(D01) + n(D02) + p(D01) + n(D12) + n(D02, D12)) / 3
    assert got.item() == pytest.approx(want, rel=1e-13)
