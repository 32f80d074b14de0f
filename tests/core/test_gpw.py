"""Tests of dmlbook.core.gpw: GPW weights, the surrogate F (Wang et al. 2019, Eq. 1-3), distance form, chain."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from dmlbook.core import gpw
from dmlbook.core.similarity import cosine_similarity, euclidean_distances, l2_normalize, pair_masks
from dmlbook.losses import contrastive_loss


def binomial_loss(S, labels, alpha=2.0, beta=10.0, lam=0.5):
    """Binomial deviance, Wang et al. 2019, Eq. 9 (sum over anchors of per-anchor means)."""
    pos, neg = pair_masks(labels)
    lp = torch.nn.functional.softplus(alpha * (lam - S))
    ln = torch.nn.functional.softplus(beta * (S - lam))
    per_pos = torch.where(pos, lp, torch.zeros_like(S)).sum(1) / pos.sum(1).clamp_min(1)
    per_neg = torch.where(neg, ln, torch.zeros_like(S)).sum(1) / neg.sum(1).clamp_min(1)
    return (per_pos + per_neg).sum()


def target_loss(S, labels):
    """Pulls positive similarities to 0.5, not to 1: breaks the GPW sign assumption above 0.5."""
    pos, _ = pair_masks(labels)
    return torch.where(pos, (S - 0.5) ** 2, torch.zeros_like(S)).sum()


def contrastive_on_distances(D, labels, m=1.0):
    """Liu et al., Eq. 11: sum_pos D + sum_neg [m - D]_+."""
    pos, neg = pair_masks(labels)
    return (
        torch.where(pos, D, torch.zeros_like(D)).sum()
        + torch.where(neg, torch.relu(m - D), torch.zeros_like(D)).sum()
    )


def embeddings(seed=0, B=8, d=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, d, generator=g, dtype=torch.float64), torch.arange(B) % 3


def test_gpw_weights_are_autograd_and_split_by_pair_type():
    x, y = embeddings()
    S = cosine_similarity(x)
    w = gpw.gpw_weights(binomial_loss, S, y)
    leaf = S.clone().requires_grad_(True)
    binomial_loss(leaf, y).backward()
    torch.testing.assert_close(w.grad, leaf.grad, rtol=0, atol=0)
    torch.testing.assert_close(w.weights, leaf.grad.abs())
    pos, neg = pair_masks(y)
    assert torch.equal(w.pos, pos) and torch.equal(w.neg, neg)
    assert w.positive.shape == (int(pos.sum()),) and w.negative.shape == (int(neg.sum()),)
    assert w.follows_sign_convention() and w.off_pair_mass() == 0.0
    assert not S.requires_grad


def test_sign_convention_can_be_violated():
    x, y = embeddings(1)
    S = cosine_similarity(x)
    w = gpw.gpw_weights(target_loss, S, y)
    pushed_positives, pulled_negatives = w.sign_violations()
    assert pushed_positives == int((S[w.pos] > 0.5).sum()) > 0
    assert pulled_negatives == 0 and not w.follows_sign_convention()


def test_surrogate_equals_pair_form_exactly_when_signs_hold():
    x, y = embeddings(2)
    S = cosine_similarity(x)
    for loss, holds in ((binomial_loss, True), (target_loss, False)):
        w = gpw.gpw_weights(loss, S, y)
        F = gpw.gpw_surrogate(loss, S, y)
        same = torch.isclose(F, gpw.gpw_pair_form(w, S), rtol=0, atol=1e-12)
        assert bool(same) is holds


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["binomial", "contrastive"]))
def test_surrogate_has_the_loss_parameter_gradient_on_a_tiny_network(seed, which):
    """Eq. 1-2 on a real model: grad_theta F == grad_theta L, float64."""
    loss = binomial_loss if which == "binomial" else (lambda S, y: contrastive_loss(S, y, 0.1))
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3)).double()
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randn(9, 5, generator=g, dtype=torch.float64)
    labels = torch.arange(9) % 3

    def grads(objective):
        net.zero_grad()
        objective(cosine_similarity(net(inputs)), labels).backward()
        return [p.grad.clone() for p in net.parameters()]

    for a, b in zip(grads(loss), grads(lambda S, y: gpw.gpw_surrogate(loss, S, y)), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_surrogate_detaches_weights():
    x, y = embeddings(3)
    x.requires_grad_(True)
    S = cosine_similarity(x)
    F = gpw.gpw_surrogate(binomial_loss, S, y)
    assert F.requires_grad and F.grad_fn is not None
    w = gpw.gpw_weights(binomial_loss, S, y)
    torch.testing.assert_close(F, (w.grad * S).sum())


def test_similarity_to_distance_weights_match_autograd_on_D():
    x, y = embeddings(4)
    S = cosine_similarity(x)
    grad_S = gpw.gpw_weights(binomial_loss, S, y).grad
    off = ~torch.eye(S.shape[0], dtype=torch.bool)
    for squared in (False, True):
        D = (2 - 2 * S) if squared else (2 - 2 * S).clamp_min(0).sqrt()
        D_leaf = D.clone().requires_grad_(True)
        S_of_D = (1 - D_leaf / 2) if squared else (1 - D_leaf**2 / 2)
        binomial_loss(S_of_D, y).backward()
        converted = gpw.similarity_to_distance_weights(grad_S, S, squared=squared)
        torch.testing.assert_close(converted[off], D_leaf.grad[off], rtol=1e-12, atol=1e-14)


def test_distance_form_sign_convention_and_round_trip():
    x, y = embeddings(5)
    z = l2_normalize(x)
    S, D = z @ z.T, euclidean_distances(z)
    wD = gpw.gpw_distance_weights(contrastive_on_distances, D, y)
    assert wD.form == "distance" and wD.follows_sign_convention()
    assert bool((wD.grad[wD.pos] == 1).all())
    loss_S = gpw.distance_loss_on_similarity(contrastive_on_distances)
    torch.testing.assert_close(loss_S(S, y), contrastive_on_distances(D, y), rtol=1e-12, atol=1e-12)
    wS = gpw.gpw_weights(loss_S, S, y)
    assert wS.follows_sign_convention() and torch.isfinite(wS.grad).all()
    assert wS.grad.diagonal().abs().max() == 0
    converted = gpw.similarity_to_distance_weights(wS.grad, S)
    off = ~torch.eye(S.shape[0], dtype=torch.bool)
    torch.testing.assert_close(converted[off], wD.grad[off], rtol=1e-10, atol=1e-12)
    # a constant distance weight is a 1 / D similarity weight
    torch.testing.assert_close(wS.weights[wS.pos], 1 / D[wS.pos], rtol=1e-10, atol=0)
    sq = gpw.distance_loss_on_similarity(lambda D2, y_: D2[pair_masks(y_)[0]].sum(), squared=True)
    assert bool((gpw.gpw_weights(sq, S, y).grad[wS.pos] == -2).all())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_embedding_chain_matches_autograd(seed):
    x, y = embeddings(seed, d=5)
    x = x * torch.linspace(0.5, 3.0, x.shape[0], dtype=torch.float64)[:, None]
    assert gpw.check_embedding_chain(binomial_loss, x, y).passed
    assert gpw.check_embedding_chain(lambda S, y_: contrastive_loss(S, y_, 0.1), x, y).passed


def test_embedding_gradient_is_tangent_and_validated():
    x, y = embeddings(6)
    grad = gpw.embedding_gradient(gpw.gpw_weights(binomial_loss, cosine_similarity(x), y).grad, x)
    assert (grad * x).sum(1).abs().max() < 1e-12
    with pytest.raises(ValueError, match="grad_S"):
        gpw.embedding_gradient(torch.zeros(3, 3), x)


def test_compare_gradients_and_gradient_check():
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    ok = gpw.compare_gradients(a + 1e-12, a)
    assert ok.passed and bool(ok) and ok.max_abs_err == pytest.approx(1e-12, rel=1e-3)
    big = gpw.compare_gradients(1e6 * a + 1e-6, 1e6 * a)
    assert big.passed and big.max_rel_err < 1e-10
    bad = gpw.compare_gradients(a + 1e-3, a)
    assert not bad.passed
    with pytest.raises(AssertionError):
        bad.assert_passed()
    assert not gpw.compare_gradients(torch.tensor([float("nan"), 0.0]), a).passed
    with pytest.raises(ValueError, match="shapes"):
        gpw.compare_gradients(a, a[:1])
    zero = gpw.compare_gradients(torch.zeros(2), torch.zeros(2))
    assert zero.passed and zero.max_rel_err == 0.0


def test_bad_inputs_are_rejected():
    x, y = embeddings()
    S = cosine_similarity(x)
    with pytest.raises(ValueError, match="square"):
        gpw.gpw_weights(binomial_loss, S[:, :3], y)
    with pytest.raises(ValueError, match="one label per row"):
        gpw.gpw_weights(binomial_loss, S, y[:3])
    with pytest.raises(ValueError, match="scalar"):
        gpw.gpw_weights(lambda S_, y_: S_.sum(0), S, y)


def test_loss_without_pairs_has_zero_weights():
    S = torch.ones(1, 1, dtype=torch.float64)
    w = gpw.gpw_weights(contrastive_loss, S, torch.tensor([0]))
    assert w.grad.abs().sum() == 0 and w.follows_sign_convention()
