"""Tests of :mod:`dmlbook.symbolic.autograd_check`: symbolic weights against autograd of dmlbook
losses and of an independent torch loss, and the finite-difference witness.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy
from dmlbook.core.similarity import pair_masks
from dmlbook.losses import contrastive_loss

from .anchor_cases import LAM, MS_VALUES, batch, contrastive_anchor, ms_closed_form


def ms_loss_torch(S: torch.Tensor, labels: torch.Tensor, alpha=2.0, beta=10.0, lam=0.5):
    """A reference MS loss on S (mean over anchors), written independently of the symbolic side."""
    pos, neg = pair_masks(labels)
    e_pos = torch.where(pos, torch.exp(-alpha * (S - lam)), torch.zeros_like(S)).sum(1)
    e_neg = torch.where(neg, torch.exp(beta * (S - lam)), torch.zeros_like(S)).sum(1)
    return (torch.log1p(e_pos) / alpha + torch.log1p(e_neg) / beta).mean()


def n_pairs(labels: torch.Tensor) -> int:
    pos, neg = pair_masks(labels)
    return int((pos | neg).sum())


def test_contrastive_matches_autograd_with_mean_reduction():
    S, labels = batch(1)
    margin = 0.1
    fn = sy.weights_from_loss(contrastive_anchor(LAM), {LAM: margin})
    loss = lambda S_, y: contrastive_loss(S_, y, margin)
    check = sy.check_against_autograd(loss, fn, S, labels, scale=1 / n_pairs(labels))
    assert check.passed and check.max_abs_err <= 1e-10 and check.max_rel_err <= 1e-10
    check.assert_passed()
    wrong_scale = sy.check_against_autograd(loss, fn, S, labels)
    assert not wrong_scale.passed


def test_check_catches_a_wrong_margin_and_a_wrong_sign():
    S, labels = batch(0)
    _, neg = pair_masks(labels)
    assert bool(((S[neg] > 0.1) & (S[neg] < 0.3)).any())  # the two margins disagree on some pair
    fn = sy.weights_from_loss(contrastive_anchor(LAM), {LAM: 0.1})
    scale = 1 / n_pairs(labels)
    wrong_margin = lambda S_, y: contrastive_loss(S_, y, 0.3)
    check = sy.check_against_autograd(wrong_margin, fn, S, labels, scale=scale)
    assert not check.passed
    with pytest.raises(AssertionError, match="gradients differ"):
        check.assert_passed()

    def wrong_sign(S_, y):  # pushes positives instead of pulling them
        pos, neg = pair_masks(y)
        per_pair = torch.where(pos, S_, torch.zeros_like(S_)) + torch.where(
            neg, torch.relu(S_ - 0.1), torch.zeros_like(S_)
        )
        return per_pair.sum() / (pos | neg).sum()

    assert not sy.check_against_autograd(wrong_sign, fn, S, labels, scale=scale).passed


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.integers(4, 9))
def test_ms_per_anchor_weights_match_autograd(seed, B):
    """MS (P, N vary with the batch) against an independent torch implementation, mean over anchors."""
    S, labels = batch(seed, B=B)
    fn = sy.weights_from_closed_form(ms_closed_form, MS_VALUES)
    check = sy.check_against_autograd(ms_loss_torch, fn, S, labels, scale=1 / B)
    assert check.passed, check


def test_whole_batch_symbolic_loss_as_a_matrix():
    """Contrastive written on a symbolic 4 x 4 batch, batch mean included; no scale needed."""
    labels = torch.tensor([0, 0, 1, 1])
    Ssym = sy.batch_similarities(4)
    pos, neg = pair_masks(labels)
    terms = [
        -Ssym[i, j] if pos[i, j] else sy.hinge(Ssym[i, j] - LAM)
        for i in range(4)
        for j in range(4)
        if pos[i, j] or neg[i, j]
    ]
    L = sp.Add(*terms) / len(terms)
    W = sy.to_torch(sy.pair_weights(L, Ssym), [Ssym], {LAM: 0.2})
    S, _ = batch(3, B=4)
    check = sy.check_against_autograd(lambda S_, y: contrastive_loss(S_, y, 0.2), W(S), S, labels)
    assert check.passed
    with pytest.raises(ValueError, match="shape"):
        sy.check_against_autograd(contrastive_loss, W(S)[:3], S, labels)


def test_gradcheck_witness_passes_and_can_fail():
    S, labels = batch(4)
    assert sy.gradcheck_witness(ms_loss_torch, S, labels)
    assert sy.gradcheck_witness(lambda S_, y: contrastive_loss(S_, y, 0.1), S, labels)

    class WrongBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            ctx.save_for_backward(s)
            return (s**2).sum()

        @staticmethod
        def backward(ctx, grad):
            (s,) = ctx.saved_tensors
            return grad * 3 * s  # should be 2 s

    assert not sy.gradcheck_witness(lambda S_, y: WrongBackward.apply(S_), S, labels)


def test_a_batch_that_is_not_square_or_does_not_match_its_labels_is_refused():
    S, labels = batch(0)
    fn = sy.weights_from_loss(contrastive_anchor(LAM), {LAM: 0.1})
    loss = lambda S_, y: contrastive_loss(S_, y, 0.1)
    with pytest.raises(ValueError, match=r"square \(B, B\)"):
        sy.check_against_autograd(loss, fn, S[:, :5], labels)
    with pytest.raises(ValueError, match="S has 8 rows but labels has 7 entries"):
        sy.check_against_autograd(loss, fn, S, labels[:7])
    with pytest.raises(ValueError, match=r"square \(B, B\)"):
        sy.gradcheck_witness(loss, S[0], labels)
