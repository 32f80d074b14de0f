"""Lifted structure losses (Wang et al. 2019, Eq. 6-8, 16; Song et al. / Liu et al., Eq. 14).

Implementation: :mod:`dmlbook.losses.lifted`; chapter ``book/05_lifted_structure.ipynb``.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    FORMS,
    batches,
    grad_of,
    masks,
    pk_batch,
    random_narrowing,
)

from dmlbook.losses import (
    binlifted_loss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
    lifted_weights,
)
from dmlbook.reference.classic import dist
from dmlbook.reference.classic import lifted_loss_reference as ref_lifted
from dmlbook.reference.classic import lifted_structure_loss_reference as ref_lifted_structure


@FAST
@given(batches(), st.sampled_from(FORMS), st.floats(-0.5, 1.5))
def test_lifted_eq6_matches_loops(batch, form, margin):
    S, y = batch
    got = lifted_loss(S, y, margin, form=form)
    assert float(got) == pytest.approx(ref_lifted(S.tolist(), y.tolist(), margin, form), abs=1e-7)


@FAST
@given(batches(), st.sampled_from(FORMS), st.booleans(), st.booleans())
def test_lifted_structure_matches_loops(batch, form, squared, joint):
    S, y = batch
    got = lifted_structure_loss(S, y, 0.8, form=form, squared_hinge=squared, joint_negatives=joint)
    want = ref_lifted_structure(S.tolist(), y.tolist(), 0.8, form, squared, joint)
    assert float(got) == pytest.approx(want, abs=1e-7)


def test_lifted_weights_are_eq7_and_eq8():
    S, y = pk_batch(1)
    g = grad_of(lambda s: lifted_loss(s, y, 1.0, reduction="sum"), S)
    pos, neg = masks(y)
    assert bool((lifted_loss(S, y, 1.0, reduction="none") > 0).all())  # every hinge is on
    e_neg = torch.where(neg, S.exp(), torch.zeros_like(S))
    e_pos = torch.where(pos, (-S).exp(), torch.zeros_like(S))
    w8 = e_neg / e_neg.sum(1, keepdim=True)  # Eq. 8
    w7 = e_pos / e_pos.sum(1, keepdim=True)  # Eq. 7
    torch.testing.assert_close(g[neg], w8[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -w7[pos], rtol=1e-10, atol=1e-12)
    w_pos, w_neg = lifted_weights(S, y, 1.0)  # the package's printed weights
    torch.testing.assert_close(w_pos, torch.where(pos, w7, 0.0), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(w_neg, torch.where(neg, w8, 0.0), rtol=1e-12, atol=1e-15)


@FAST
@given(batches(), st.floats(-0.5, 1.5), st.booleans())
def test_autograd_of_eq6_is_the_weights_of_eq7_8(batch, margin, masked):
    """GPW: dL/dS = w^- - w^+ with Eq. 7-8 on the anchors whose hinge is on (0 elsewhere), on
    any batch (singletons, one class, anchors whose hinge is off), with and without masks."""
    S, y = batch
    B = len(y)
    kw = random_narrowing(B) if masked else {}
    grad = grad_of(lambda s: lifted_loss(s, y, margin, reduction="sum", **kw), S)
    w_pos, w_neg = lifted_weights(S, y, margin, **kw)
    torch.testing.assert_close(grad, w_neg - w_pos, rtol=1e-10, atol=1e-12)


def test_lifted_hinge_can_switch_off_only_for_tiny_anchors():
    """On cosines, lambda = 1 keeps the hinge of Eq. 6 on whenever |P_i| |N_i| >= 3."""
    y = torch.tensor([0, 0, 1])
    S = torch.tensor([[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]], dtype=torch.float64)
    assert float(lifted_loss(S, y, 1.0)) == 0.0  # 1 - 1 + (-1) < 0: one pos, one neg, off
    y3 = torch.tensor([0, 0, 1, 2, 2])
    S3 = torch.full((5, 5), -1.0, dtype=torch.float64)
    S3[0, 1] = S3[1, 0] = 1.0
    S3[3, 4] = S3[4, 3] = 1.0
    S3.fill_diagonal_(1.0)
    per = lifted_loss(S3, y3, 1.0, reduction="none")
    assert bool((per[[0, 1, 3, 4]] > 0).all())  # |P| |N| = 3: still on at the most separated S


def test_lifted_star_and_binlifted_weights():
    S, y = pk_batch(2)
    a, b, lam = 2.0, 50.0, 0.5
    pos, neg = masks(y)
    zero = torch.zeros_like(S)
    soft_neg = torch.where(neg, torch.softmax(torch.where(neg, b * S, -math.inf), 1), zero)
    soft_pos = torch.where(pos, torch.softmax(torch.where(pos, -a * S, -math.inf), 1), zero)
    g = grad_of(lambda s: lifted_star_loss(s, y, a, b, reduction="sum"), S)
    torch.testing.assert_close(g[neg], soft_neg[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -soft_pos[pos], rtol=1e-10, atol=1e-12)
    g = grad_of(lambda s: binlifted_loss(s, y, a, b, lam, reduction="sum"), S)
    supp_eq10 = 0.5 * (torch.sigmoid(b * (S - lam)) + soft_neg)
    torch.testing.assert_close(g[neg], supp_eq10[neg], rtol=1e-10, atol=1e-12)
    analogue = 0.5 * (torch.sigmoid(a * (lam - S)) + soft_pos)
    torch.testing.assert_close(g[pos], -analogue[pos], rtol=1e-10, atol=1e-12)


def test_lifted_weights_use_their_margin_for_the_active_anchors():
    """Eq. 7-8 only on the anchors whose hinge of Eq. 6 is on, for a margin (not the default
    1) that leaves some anchors off: ``log sum_P e^{m - S} + log sum_N e^{S} > 0`` (loops)."""
    S, y = pk_batch(1)
    pos, neg = masks(y)
    s, B, m = S.tolist(), len(y), -2.9
    active = []
    for i in range(B):
        P = [k for k in range(B) if pos[i, k]]
        N = [k for k in range(B) if neg[i, k]]
        lse_p = math.log(sum(math.exp(m - s[i][k]) for k in P))
        lse_n = math.log(sum(math.exp(s[i][k]) for k in N))
        active.append(lse_p + lse_n > 0)
    assert any(active) and not all(active)
    w_pos, w_neg = lifted_weights(S, y, m)
    for i in range(B):
        P = [k for k in range(B) if pos[i, k]]
        N = [k for k in range(B) if neg[i, k]]
        zp, zn = sum(math.exp(-s[i][k]) for k in P), sum(math.exp(s[i][k]) for k in N)
        for k in range(B):
            want_p = math.exp(-s[i][k]) / zp if active[i] and k in P else 0.0
            want_n = math.exp(s[i][k]) / zn if active[i] and k in N else 0.0
            assert float(w_pos[i, k]) == pytest.approx(want_p, rel=1e-12, abs=1e-15)
            assert float(w_neg[i, k]) == pytest.approx(want_n, rel=1e-12, abs=1e-15)


def _narrowed(y, pos_mask, neg_mask):
    pos, neg = masks(y)
    return (pos & pos_mask).tolist(), (neg & neg_mask).tolist()


def test_lifted_structure_reductions_and_ends_without_negatives():
    """Liu et al. Eq. 14 per positive pair (a loop over the kept pairs): "sum" and "none" as
    asked, and, without joint negatives, only the pairs whose two ends both keep a negative
    (sample 0 keeps none here)."""
    S, y = pk_batch(2)
    B = len(y)
    pos_mask = torch.ones(B, B, dtype=torch.bool)
    neg_mask = torch.ones(B, B, dtype=torch.bool)
    neg_mask[0] = False
    P, N = _narrowed(y, pos_mask, neg_mask)
    s = S.tolist()
    for joint in (True, False):
        terms = {}
        for i in range(B):
            for j in range(B):
                if not P[i][j]:
                    continue
                ti = [1.0 - dist(s[i][k], "distance") for k in range(B) if N[i][k]]
                tj = [1.0 - dist(s[j][k], "distance") for k in range(B) if N[j][k]]
                if joint and (ti or tj):
                    J = dist(s[i][j], "distance") + math.log(sum(math.exp(t) for t in ti + tj))
                elif not joint and ti and tj:
                    J = dist(s[i][j], "distance") + sum(
                        math.log(sum(math.exp(t) for t in side)) for side in (ti, tj)
                    )
                else:
                    continue
                terms[i, j] = max(J, 0.0) ** 2 / 2
        kw = dict(joint_negatives=joint, pos_mask=pos_mask, neg_mask=neg_mask)
        assert float(lifted_structure_loss(S, y, **kw)) == pytest.approx(
            sum(terms.values()) / len(terms), rel=1e-12
        )
        assert float(lifted_structure_loss(S, y, reduction="sum", **kw)) == pytest.approx(
            sum(terms.values()), rel=1e-12
        )
        none = lifted_structure_loss(S, y, reduction="none", **kw)
        want = torch.zeros(B, B, dtype=S.dtype)
        for (i, j), v in terms.items():
            want[i, j] = v
        torch.testing.assert_close(none, want, rtol=1e-12, atol=1e-12)


def test_lifted_star_within_masks_is_the_mean_over_anchors_with_a_pair():
    """Wang et al. Eq. 16 per anchor on the pairs the masks keep, averaged over the anchors
    that keep a pair (anchor 0 keeps none, anchor 1 only negatives, anchor 2 only positives)."""
    S, y = pk_batch(3)
    B = len(y)
    pos_mask = torch.rand(B, B, generator=torch.Generator().manual_seed(1)) < 0.8
    neg_mask = torch.rand(B, B, generator=torch.Generator().manual_seed(2)) < 0.8
    pos_mask[0], neg_mask[0], pos_mask[1], neg_mask[2] = False, False, False, False
    P, N = _narrowed(y, pos_mask, neg_mask)
    s, a, b = S.tolist(), 2.0, 10.0
    terms = []
    for i in range(B):
        Pi = [k for k in range(B) if P[i][k]]
        Ni = [k for k in range(B) if N[i][k]]
        if not (Pi or Ni):
            continue
        t = math.log(sum(math.exp(-a * s[i][k]) for k in Pi)) / a if Pi else 0.0
        t += math.log(sum(math.exp(b * s[i][k]) for k in Ni)) / b if Ni else 0.0
        terms.append(t)
    got = lifted_star_loss(S, y, a, b, pos_mask=pos_mask, neg_mask=neg_mask)
    assert float(got) == pytest.approx(sum(terms) / len(terms), rel=1e-12)
