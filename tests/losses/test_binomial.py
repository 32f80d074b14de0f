"""Binomial deviance (Wang et al. 2019, Eq. 9-10), Binomial_m and BinLifted (supplement Eq. 10).

Implementation: :mod:`dmlbook.losses.binomial`; chapter: ``book/06_binomial_deviance.ipynb``.
The expected values here come from an independent reference, never from the code under test.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, masks, pk_batch, random_narrowing
from mpmath import mp, mpf

from dmlbook.losses import (
    binlifted_loss,
    binlifted_weights,
    binomial_deviance_loss,
    binomial_weights,
    lifted_star_loss,
)
from dmlbook.mining import ms_mining_masks
from dmlbook.reference.classic import binlifted_loss_reference as ref_binlifted
from dmlbook.reference.classic import binomial_deviance_loss_reference as ref_binomial
from dmlbook.reference.classic import lifted_star_loss_reference as ref_lifted_star

ALPHA, BETA, MARGIN = 2.0, 50.0, 0.5


def _softplus(x: float) -> mpf:
    """``log(1 + e^x)`` to 50 significant digits (mpmath)."""
    return mp.log1p(mp.exp(mpf(x)))


def _sigmoid(x: float) -> mpf:
    return 1 / (1 + mp.exp(-mpf(x)))


def _near_one_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two classes of three; every negative pair at S in [0.9, 1), so beta (S - lambda) > 20."""
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    g = torch.Generator().manual_seed(17)
    S = 0.9 + 0.0999 * torch.rand(6, 6, generator=g, dtype=torch.float64)
    S = (S + S.T) / 2
    S.fill_diagonal_(1.0)
    return S, labels


def _binomial_reference(S: torch.Tensor, labels: torch.Tensor, pos, neg, *, lifted: bool):
    """Eq. 9 (or BinLifted) with ``reduction="sum"`` and its dL/dS, per pair, in mpmath."""
    mp.dps = 50
    B = S.shape[0]
    s = [[mpf(float(S[i, j])) for j in range(B)] for i in range(B)]
    total = mpf(0)
    grad = [[mpf(0)] * B for _ in range(B)]
    for i in range(B):
        P = [j for j in range(B) if pos[i, j]]
        N = [j for j in range(B) if neg[i, j]]
        if lifted:
            if N:
                lse = mp.log(mp.fsum(mp.exp(BETA * s[i][k]) for k in N))
                total += (mp.fsum(_softplus(BETA * (s[i][k] - MARGIN)) for k in N) + lse) / (
                    2 * BETA
                )
                for k in N:
                    soft = mp.exp(BETA * s[i][k] - lse)
                    grad[i][k] += (_sigmoid(BETA * (s[i][k] - MARGIN)) + soft) / 2
            if P:
                lse = mp.log(mp.fsum(mp.exp(-ALPHA * s[i][k]) for k in P))
                total += (mp.fsum(_softplus(ALPHA * (MARGIN - s[i][k])) for k in P) + lse) / (
                    2 * ALPHA
                )
                for k in P:
                    soft = mp.exp(-ALPHA * s[i][k] - lse)
                    grad[i][k] -= (_sigmoid(ALPHA * (MARGIN - s[i][k])) + soft) / 2
            continue
        if N:
            total += mp.fsum(_softplus(BETA * (s[i][k] - MARGIN)) for k in N) / len(N)
            for k in N:
                grad[i][k] += BETA * _sigmoid(BETA * (s[i][k] - MARGIN)) / len(N)
        if P:
            total += mp.fsum(_softplus(ALPHA * (MARGIN - s[i][k])) for k in P) / len(P)
            for k in P:
                grad[i][k] -= ALPHA * _sigmoid(ALPHA * (MARGIN - s[i][k])) / len(P)
    as_tensor = torch.tensor([[float(g) for g in row] for row in grad], dtype=torch.float64)
    return float(total), as_tensor


@pytest.mark.parametrize("variant", ["binomial", "Binomial_m", "BinLifted"])
def test_float64_is_exact_where_softplus_would_turn_linear(variant):
    """Issue 17: at beta = 50 and S near 1, ``beta (S - lambda) > 20``; float64 must stay exact.

    ``torch.nn.functional.softplus`` returns its input above ``threshold = 20``, an error of
    ``log(1 + e^-x) ~ 2e-9`` at ``x = 20``: far above float64's rounding.
    """
    S, labels = _near_one_batch()
    same = labels[:, None] == labels[None, :]
    pos, neg = same & ~torch.eye(6, dtype=torch.bool), ~same
    masks = {}
    if variant == "Binomial_m":
        pos, neg = ms_mining_masks(S, labels, 0.1)
        masks = {"pos_mask": pos, "neg_mask": neg}
        assert bool(neg.any()), "the batch must keep some mined negatives"
    fn = binlifted_loss if variant == "BinLifted" else binomial_deviance_loss
    want, want_grad = _binomial_reference(S, labels, pos, neg, lifted=variant == "BinLifted")
    x = S.clone().requires_grad_(True)
    got = fn(x, labels, ALPHA, BETA, MARGIN, reduction="sum", **masks)
    got.backward()
    assert abs(float(got.detach()) - want) <= 1e-13 * abs(want)
    torch.testing.assert_close(x.grad, want_grad, rtol=1e-13, atol=1e-15)


def test_float32_path_is_unchanged_by_the_float64_fix():
    """float32 keeps torch's softplus (threshold 20): same bits as ``F.softplus``."""
    S, labels = _near_one_batch()
    S32 = S.float()
    same = labels[:, None] == labels[None, :]
    pos, neg = same & ~torch.eye(6, dtype=torch.bool), ~same
    soft = torch.nn.functional.softplus
    zero = torch.zeros_like(S32)
    per = torch.where(pos, soft(ALPHA * (MARGIN - S32)), zero).sum(1) / pos.sum(1) + torch.where(
        neg, soft(BETA * (S32 - MARGIN)), zero
    ).sum(1) / neg.sum(1)
    got = binomial_deviance_loss(S32, labels, ALPHA, BETA, MARGIN, reduction="none")
    assert torch.equal(got, per)


@FAST
@given(batches(), st.floats(0.5, 5.0), st.floats(1.0, 60.0), st.floats(-0.5, 1.0))
def test_binomial_lifted_star_binlifted_match_loops(batch, alpha, beta, lam):
    S, y = batch
    Sl, yl = S.tolist(), y.tolist()
    assert float(binomial_deviance_loss(S, y, alpha, beta, lam)) == pytest.approx(
        ref_binomial(Sl, yl, alpha, beta, lam), rel=1e-9, abs=1e-9
    )
    assert float(lifted_star_loss(S, y, alpha, beta)) == pytest.approx(
        ref_lifted_star(Sl, yl, alpha, beta), rel=1e-9, abs=1e-9
    )
    assert float(binlifted_loss(S, y, alpha, beta, lam)) == pytest.approx(
        ref_binlifted(Sl, yl, alpha, beta, lam), rel=1e-9, abs=1e-9
    )


def test_binomial_weights_are_eq10():
    S, y = pk_batch()
    a, b, lam = 2.0, 50.0, 0.5
    g = grad_of(lambda s: binomial_deviance_loss(s, y, a, b, lam, reduction="sum"), S)
    pos, neg = masks(y)
    P, N = pos.sum(1, keepdim=True), neg.sum(1, keepdim=True)
    w_pos = a * torch.sigmoid(a * (lam - S)) / P
    w_neg = b * torch.sigmoid(b * (S - lam)) / N
    torch.testing.assert_close(g[pos], -w_pos[pos], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[neg], w_neg[neg], rtol=1e-10, atol=1e-12)
    got_pos, got_neg = binomial_weights(S, y, a, b, lam)  # the package's printed weights
    torch.testing.assert_close(got_pos, torch.where(pos, w_pos, 0.0), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(got_neg, torch.where(neg, w_neg, 0.0), rtol=1e-12, atol=1e-15)
    # "mean" divides every weight by the number of anchors.
    gm = grad_of(lambda s: binomial_deviance_loss(s, y, a, b, lam), S)
    torch.testing.assert_close(gm, g / len(y), rtol=1e-10, atol=1e-14)


@FAST
@given(batches(), st.floats(0.5, 5.0), st.floats(1.0, 60.0), st.floats(-0.5, 1.0), st.booleans())
def test_autograd_is_the_printed_weights(batch, alpha, beta, lam, masked):
    """GPW: dL/dS = w^- - w^+ with Eq. 10 (binomial) and supplement Eq. 10 (BinLifted), on any
    batch (singletons, one class), with and without a miner's masks."""
    S, y = batch
    B = len(y)
    kw = random_narrowing(B) if masked else {}
    for loss, weights in ((binomial_deviance_loss, binomial_weights),
                          (binlifted_loss, binlifted_weights)):  # fmt: skip
        grad = grad_of(lambda s, f=loss: f(s, y, alpha, beta, lam, reduction="sum", **kw), S)
        w_pos, w_neg = weights(S, y, alpha, beta, lam, **kw)
        torch.testing.assert_close(grad, w_neg - w_pos, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn", [binomial_deviance_loss, binlifted_loss])
@pytest.mark.parametrize("hp", [{"alpha": 2e4}, {"margin": 5e3}, {"beta": 5e5}])
def test_float16_with_scales_times_ten_thousand_is_the_float64_value(fn, hp):
    """Issue 45: alpha or margin x 1e4 in float16 returned inf, although the float64 loss
    (below 14,000) fits in float16: alpha (lambda - S) passed 65,504 on the way. Half precision
    is now computed in float32, value and gradient."""
    x = torch.nn.functional.normalize(
        torch.randn(8, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=1
    )
    S64, y = x @ x.T, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    expected = float(fn(S64, y, **hp))
    assert expected < torch.finfo(torch.float16).max
    S16 = S64.half().requires_grad_(True)
    value = fn(S16, y, **hp)
    value.backward()
    assert torch.isfinite(S16.grad).all()
    assert float(value) == pytest.approx(expected, rel=2e-3)


def _mean_over_anchors_with_a_pair(S, pos, neg, *, lifted: bool) -> float:
    """Eq. 9 (or BinLifted) per anchor over the kept pairs, averaged over the anchors that keep
    at least one pair (Python floats, the loops of :mod:`dmlbook.reference.classic`)."""
    from dmlbook.reference.classic import lse, softplus

    a, b, m = 2.0, 50.0, 0.5
    terms = []
    for i in range(len(S)):
        P = [k for k in range(len(S)) if pos[i][k]]
        N = [k for k in range(len(S)) if neg[i][k]]
        if not (P or N):
            continue
        t = 0.0
        if lifted:
            if N:
                t += sum(softplus(b * (S[i][k] - m)) for k in N) / (2 * b)
                t += lse([b * S[i][k] for k in N]) / (2 * b)
            if P:
                t += sum(softplus(a * (m - S[i][k])) for k in P) / (2 * a)
                t += lse([-a * S[i][k] for k in P]) / (2 * a)
        else:
            t += sum(softplus(a * (m - S[i][k])) for k in P) / len(P) if P else 0.0
            t += sum(softplus(b * (S[i][k] - m)) for k in N) / len(N) if N else 0.0
        terms.append(t)
    return sum(terms) / len(terms)


@pytest.mark.parametrize("lifted", [False, True])
def test_mean_skips_an_anchor_the_masks_leave_without_pairs(lifted):
    """The mean is over the anchors that keep a pair: anchor 0 keeps none here, anchor 1 only
    negatives, anchor 2 only positives."""
    S, y = pk_batch(2)
    pos, neg = masks(y)
    pos_mask, neg_mask = pos.clone(), neg.clone()
    pos_mask[0], neg_mask[0] = False, False
    pos_mask[1] = False
    neg_mask[2] = False
    fn = binlifted_loss if lifted else binomial_deviance_loss
    got = fn(S, y, 2.0, 50.0, 0.5, pos_mask=pos_mask, neg_mask=neg_mask)
    want = _mean_over_anchors_with_a_pair(
        S.tolist(), (pos & pos_mask).tolist(), (neg & neg_mask).tolist(), lifted=lifted
    )
    assert float(got) == pytest.approx(want, rel=1e-12)
