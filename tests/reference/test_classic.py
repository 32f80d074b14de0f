"""Tests of dmlbook.reference.classic, the paper-literal loops the classic losses are tested
against: each loop on a hand-computed batch, its equation expanded here anchor by anchor.

The batch: tests/reference/batches.py's four embeddings of two classes (one positive and two
negatives per anchor).
"""

from __future__ import annotations

import math

import pytest

from dmlbook.reference.classic import (
    binlifted_loss_reference,
    binomial_deviance_loss_reference,
    contrastive_distance_loss_reference,
    dist,
    histogram_loss_reference,
    histogram_nodes,
    histogram_reference,
    lifted_loss_reference,
    lifted_star_loss_reference,
    lifted_structure_loss_reference,
    lse,
    npair_loss_reference,
    npair_pairs_reference,
    sets,
    softplus,
    triplet_loss_reference,
)

from .batches import FOUR, FOUR_LABELS

S, Y = FOUR, FOUR_LABELS
# anchor -> (positive similarity, negative similarities), read off S above
ROWS = [(0.8, (0.5, 0.3)), (0.8, (0.6, -0.2)), (0.1, (0.5, 0.6)), (0.1, (0.3, -0.2))]
e, log = math.exp, math.log


def sp(x: float) -> float:
    return log(1 + e(x))


def test_helpers():
    assert dist(0.5, "similarity") == -0.5
    assert dist(0.5, "squared_distance") == pytest.approx(1.0)
    assert dist(0.5, "distance") == pytest.approx(1.0)
    assert dist(-0.5, "distance") == pytest.approx(math.sqrt(3.0))
    assert dist(1.0 + 1e-12, "distance") == 0.0  # rounding above 1 is no NaN
    assert lse([0.0, log(3.0)]) == pytest.approx(log(4.0))
    assert lse([1000.0, 1000.0]) == pytest.approx(1000.0 + log(2.0))  # max-shifted: no overflow
    assert softplus(0.0) == pytest.approx(log(2.0))
    assert softplus(800.0) == 800.0 and softplus(-800.0) == 0.0
    assert sets([0, 0, 1, 0], 0) == ([1, 3], [2])
    assert sets([0, 1, 2], 1) == ([], [0, 2])


def test_triplet_is_wang_eq5_over_every_triplet():
    m = 0.25  # [S_an - S_ap + m]_+ on similarities (d = -S)
    terms = [max(sn - spos + m, 0.0) for spos, negs in ROWS for sn in negs]
    assert [round(t, 12) for t in terms] == [0, 0, 0.05, 0, 0.65, 0.75, 0.45, 0]
    assert triplet_loss_reference(S, Y, m, "similarity", "sum") == pytest.approx(1.9)
    assert triplet_loss_reference(S, Y, m, "similarity", "mean") == pytest.approx(1.9 / 8)
    assert triplet_loss_reference(S, Y, m, "similarity", "mean_nonzero") == pytest.approx(1.9 / 4)
    # Liu et al. Eq. 12 on distances D = sqrt(2 - 2S)
    d = lambda s: math.sqrt(2 - 2 * s)
    want = sum(max(d(spos) - d(sn) + 0.1, 0.0) for spos, negs in ROWS for sn in negs) / 8
    assert triplet_loss_reference(S, Y, 0.1, "distance", "mean") == pytest.approx(want)
    assert triplet_loss_reference(S, [0, 0, 0, 0], 0.1, "distance", "mean") == 0.0  # no negative


def test_lifted_is_wang_eq6_per_anchor():
    lam = -0.5  # the hinge cuts anchors 0 and 1
    per_anchor = [max(-spos + log(e(a) + e(b)) + lam, 0.0) for spos, (a, b) in ROWS]
    assert per_anchor[0] == per_anchor[1] == 0.0 and per_anchor[2] > 0.6
    want = sum(per_anchor) / 4
    assert lifted_loss_reference(S, Y, lam, "similarity") == pytest.approx(want)


def test_lifted_structure_is_liu_eq14_per_positive_pair():
    m = -1.0
    t = lambda s: e(m + s)  # e^{m - d} with d = -S
    # (0, 1) and (1, 0): N_0 = N_1 = {2, 3}; (2, 3) and (3, 2): N_2 = N_3 = {0, 1}
    joint_01 = -0.8 + log(t(0.5) + t(0.3) + t(0.6) + t(-0.2))
    joint_23 = -0.1 + log(t(0.5) + t(0.6) + t(0.3) + t(-0.2))
    assert joint_01 < 0 < joint_23
    want = (0 + 0 + 2 * joint_23) / 4
    assert lifted_structure_loss_reference(S, Y, m, "similarity", False, True) == pytest.approx(
        want
    )
    sep_01 = -0.8 + log(t(0.5) + t(0.3)) + log(t(0.6) + t(-0.2))
    sep_23 = -0.1 + log(t(0.5) + t(0.6)) + log(t(0.3) + t(-0.2))
    want = (2 * max(sep_01, 0) ** 2 / 2 + 2 * max(sep_23, 0) ** 2 / 2) / 4
    got = lifted_structure_loss_reference(S, Y, m, "similarity", True, False)
    assert got == pytest.approx(want)


def test_binomial_is_wang_eq9():
    a, b, lam = 2.0, 10.0, 0.5
    want = sum(sp(a * (lam - spos)) + (sp(b * (n1 - lam)) + sp(b * (n2 - lam))) / 2
               for spos, (n1, n2) in ROWS) / 4  # fmt: skip
    assert binomial_deviance_loss_reference(S, Y, a, b, lam) == pytest.approx(want)
    # two positives are averaged, and an anchor without positives keeps its negative half:
    y = [0, 0, 0, 1]
    pos = lambda *s: sum(sp(a * (lam - x)) for x in s) / len(s)
    neg = lambda *s: sum(sp(b * (x - lam)) for x in s) / len(s)
    want = (
        pos(0.8, 0.5) + neg(0.3) + pos(0.8, 0.6) + neg(-0.2) + pos(0.5, 0.6) + neg(0.1)
        + neg(0.3, -0.2, 0.1)
    ) / 4  # fmt: skip
    assert binomial_deviance_loss_reference(S, y, a, b, lam) == pytest.approx(want)


def test_lifted_star_is_wang_eq16():
    a, b = 2.0, 10.0
    # one positive: (1/a) log e^{-a S_ap} = -S_ap
    want = sum(-spos + log(e(b * n1) + e(b * n2)) / b for spos, (n1, n2) in ROWS) / 4
    assert lifted_star_loss_reference(S, Y, a, b) == pytest.approx(want)


def test_binlifted_is_the_sum_of_halves_of_binomial_and_lifted_star():
    a, b, lam = 2.0, 10.0, 0.5
    want = (
        sum(
            (sp(b * (n1 - lam)) + sp(b * (n2 - lam))) / (2 * b)
            + log(e(b * n1) + e(b * n2)) / (2 * b)
            + sp(a * (lam - spos)) / (2 * a)
            - spos / 2
            for spos, (n1, n2) in ROWS
        )
        / 4
    )
    assert binlifted_loss_reference(S, Y, a, b, lam) == pytest.approx(want)


def test_npair_is_liu_eq13_for_both_samplings():
    assert npair_pairs_reference([0, 1, 0, 1, 0, 2]) == [(0, 2), (1, 3)]
    # Sohn's N-pair: pairs (0, 1) and (2, 3); the negative of (0, 1) is 3, of (2, 3) it is 1
    want = (sp(-0.8 + 0.3) + sp(-0.1 + 0.6)) / 2  # log(1 + e^{d_ap - d_an}), d = -S
    assert npair_loss_reference(S, Y, "similarity", "npair") == pytest.approx(want)
    want = sum(log(1 + e(-spos + n1) + e(-spos + n2)) for spos, (n1, n2) in ROWS) / 4
    assert npair_loss_reference(S, Y, "similarity", "all") == pytest.approx(want)


def test_contrastive_distance_is_liu_eq11_35_36():
    # the six unordered pairs (each counted twice): positives 0.8, 0.1;
    # negatives 0.5, 0.3, 0.6, -0.2
    pos, neg = (0.8, 0.1), (0.5, 0.3, 0.6, -0.2)
    m1, m2 = 0.5, 1.2
    d2 = lambda s: 2 - 2 * s
    # Eq. 36 on D^2: positives [0.4 - 0.5]_+ = 0, [1.8 - 0.5]_+ = 1.3; negatives 0.2, 0, 0.4, 0
    assert contrastive_distance_loss_reference(S, Y, m1, m2, "squared_distance") == pytest.approx(
        1.9 / 6
    )
    d = lambda s: math.sqrt(d2(s))
    hinges = [max(d(s) - m1, 0.0) for s in pos] + [max(m2 - d(s), 0.0) for s in neg]
    assert contrastive_distance_loss_reference(S, Y, m1, m2, "hinge") == pytest.approx(
        sum(hinges) / 6
    )
    assert contrastive_distance_loss_reference(S, Y, m1, m2, "squared_hinge") == pytest.approx(
        sum(h * h for h in hinges) / 6
    )


def test_histogram_nodes_and_triangular_kernels():
    assert histogram_nodes(5) == pytest.approx([-1.0, -0.5, 0.0, 0.5, 1.0])
    assert histogram_nodes(5, printed=True) == pytest.approx([-0.5, 0.0, 0.5, 1.0, 1.5])
    # 0.2 lies 0.4 of the way from node 0 to node 0.5: weights 0.6 and 0.4
    assert histogram_reference([0.2], 5) == pytest.approx([0, 0, 0.6, 0.4, 0])
    assert histogram_reference([1.0], 5) == pytest.approx([0, 0, 0, 0, 1])
    assert histogram_reference([-1.0, 0.25], 5) == pytest.approx([0.5, 0, 0.25, 0.25, 0])


def test_histogram_loss_is_the_supplements_eq3():
    # R = 3, nodes -1, 0, 1. Positive pairs 0.8, 0.1 (each twice): h+ = (0, 0.55, 0.45).
    # Negative pairs 0.5, 0.3, 0.6, -0.2: h- = (0.05, 0.6, 0.35). Sum_r h-_r * cumsum(h+)_r:
    want = 0.05 * 0 + 0.6 * 0.55 + 0.35 * 1.0
    assert histogram_loss_reference(S, Y, 3) == pytest.approx(want)
    assert histogram_loss_reference(S, [0, 1, 2, 3], 3) == 0.0  # no positive pair
