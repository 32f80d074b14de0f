"""Properties every registered loss must have: finite in float32 at beta = 50, the GPW sign
convention (Wang et al. Eq. 3), the edges (no positives, no negatives, one class, one sample),
masks that only narrow, and clear errors for bad input.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from loss_cases import (
    ALL_LOSSES,
    VARIANTS,
    batches,
    grad_of,
    masks,
    pk_batch,
)

from dmlbook.losses import (
    BinLiftedLoss,
    BinomialDevianceLoss,
    ContrastiveDistanceLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    NPairLoss,
    TripletLoss,
    available_losses,
    binomial_deviance_loss,
    get_loss,
    lifted_loss,
    lifted_structure_loss,
    npair_loss,
    triplet_loss,
)
from dmlbook.similarity import cosine_similarity


def test_registry_covers_every_loss_here():
    assert set(ALL_LOSSES) <= set(available_losses())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fill", [1.0, -1.0, 0.0])
@pytest.mark.parametrize(("name", "hp"), VARIANTS)
def test_extreme_constant_similarities_stay_finite(name, hp, fill, dtype):
    fn = get_loss(name, **hp).loss_on_similarity
    for y in ([0, 0, 1, 1, 2], [0, 0, 0, 0], [0, 1, 2], [7]):
        S = torch.full((len(y), len(y)), fill, dtype=dtype, requires_grad=True)
        loss = fn(S, torch.tensor(y))
        loss.backward()
        assert torch.isfinite(loss) and bool(torch.isfinite(S.grad).all()), (name, hp, y)


@settings(max_examples=25, deadline=None)
@given(batches(max_b=8, symmetric=False), st.sampled_from(VARIANTS))
def test_float32_any_similarity_in_range_is_finite(batch, variant):
    """No inf/NaN in value or gradient, float32, beta = 50, any S in [-1, 1] (not even symmetric)."""
    S, y = batch
    name, hp = variant
    S = S.float().requires_grad_(True)
    loss = get_loss(name, **hp).loss_on_similarity(S, y)
    loss.backward()
    assert torch.isfinite(loss) and bool(torch.isfinite(S.grad).all())


@settings(max_examples=25, deadline=None)
@given(batches(max_b=8), st.sampled_from(VARIANTS))
def test_gpw_sign_convention_and_no_weight_off_pairs(batch, variant):
    """dL/dS <= 0 on positive pairs, >= 0 on negative pairs, 0 on the diagonal (Wang et al. Eq. 3)."""
    S, y = batch
    name, hp = variant
    g = grad_of(lambda s: get_loss(name, **hp).loss_on_similarity(s, y), S)
    pos, neg = masks(y)
    assert bool((g[pos] <= 1e-12).all()) and bool((g[neg] >= -1e-12).all())
    assert bool((g.diagonal() == 0).all())


NEED_BOTH = ["triplet", "lifted", "lifted_structure", "npair"]

HALVES = ["contrastive", "contrastive_distance", "binomial", "lifted_star", "binlifted"]


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_batch_of_one_is_zero_with_zero_gradient(name):
    x = torch.randn(1, 4, requires_grad=True)
    loss = get_loss(name, **ALL_LOSSES[name])(x, torch.tensor([3]))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.parametrize("name", NEED_BOTH)
def test_single_class_batch_is_zero_for_losses_that_need_negatives(name):
    S = cosine_similarity(torch.randn(5, 3, dtype=torch.float64)).requires_grad_(True)
    loss = get_loss(name).loss_on_similarity(S, torch.zeros(5, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(S.grad, torch.zeros_like(S))


@pytest.mark.parametrize("name", HALVES)
def test_single_class_batch_keeps_pulling_positives(name):
    S = cosine_similarity(torch.randn(5, 3, dtype=torch.float64)).requires_grad_(True)
    loss = get_loss(name).loss_on_similarity(S, torch.zeros(5, dtype=torch.long))
    loss.backward()
    off = ~torch.eye(5, dtype=torch.bool)
    assert torch.isfinite(loss)
    assert bool((S.grad[off] <= 0).all()) and float(S.grad.diagonal().abs().sum()) == 0.0


def test_anchor_without_positives_gets_no_weight_where_positives_are_needed():
    S, _ = pk_batch(6, classes=3, per=2)
    y = torch.tensor([0, 0, 1, 1, 2, 3])  # anchors 4 and 5 are singletons
    for name in NEED_BOTH:
        g = grad_of(lambda s, name=name: get_loss(name).loss_on_similarity(s, y), S)
        assert float(g[4:].abs().sum()) == 0.0, name
        assert float(g[:4].abs().sum()) > 0.0, name
    for name in ("binomial", "lifted_star", "binlifted", "contrastive"):
        hp = {"margin": -0.99} if name == "contrastive" else {}  # (-1, 1): every negative
        g = grad_of(lambda s, name=name, hp=hp: get_loss(name, **hp).loss_on_similarity(s, y), S)
        assert bool((g[4:, :4] > 0).all()), name  # singletons still push their negatives


def test_anchor_without_negatives_through_a_mask():
    S, y = pk_batch(7)
    neg_mask = torch.ones(9, 9, dtype=torch.bool)
    neg_mask[0] = False  # anchor 0 loses all its negatives
    for fn in (
        lambda s: lifted_loss(s, y, neg_mask=neg_mask),
        lambda s: triplet_loss(s, y, neg_mask=neg_mask),
    ):
        g = grad_of(fn, S)
        assert float(g[0].abs().sum()) == 0.0 and float(g[1:].abs().sum()) > 0
    g = grad_of(lambda s: binomial_deviance_loss(s, y, neg_mask=neg_mask), S)
    assert float(g[0, 3:].abs().sum()) == 0.0 and bool((g[0, 1:3] < 0).all())
    # Song's pairwise form: the pair (0, 1) still has anchor 1's negatives
    g = grad_of(lambda s: lifted_structure_loss(s, y, neg_mask=neg_mask), S)
    assert float(g[0, 3:].abs().sum()) == 0.0 and float(g[0, 1].abs()) > 0


def test_masks_only_narrow_and_are_checked():
    S, y = pk_batch(8)
    everything = torch.ones(9, 9, dtype=torch.bool)
    for fn in (
        triplet_loss,
        lifted_loss,
        lifted_structure_loss,
        npair_loss,
        binomial_deviance_loss,
    ):
        assert torch.equal(fn(S, y, pos_mask=everything, neg_mask=everything), fn(S, y))
        with pytest.raises(ValueError, match="bool tensor of shape"):
            fn(S, y, pos_mask=torch.ones(9, 9))


def test_bad_inputs_raise_clear_errors():
    S, y = pk_batch()
    with pytest.raises(ValueError, match="square"):
        triplet_loss(S[:, :4], y)
    with pytest.raises(ValueError, match="one label per row"):
        lifted_loss(S, y[:3])
    with pytest.raises(ValueError, match="NaN or infinite"):
        binomial_deviance_loss(S * float("nan"), y)
    with pytest.raises(TypeError, match="floating-point"):
        npair_loss(S.long(), y)
    with pytest.raises(ValueError, match="form must be one of"):
        triplet_loss(S, y, form="cosine")
    with pytest.raises(ValueError, match="reduction must be one of"):
        lifted_loss(S, y, reduction="avg")
    with pytest.raises(ValueError, match="alpha must be"):
        BinomialDevianceLoss(alpha=0)
    with pytest.raises(ValueError, match="beta must be"):
        LiftedStarLoss(beta=-1)
    with pytest.raises(ValueError, match="pos_margin < neg_margin"):
        ContrastiveDistanceLoss(pos_margin=1.0, neg_margin=0.5)
    with pytest.raises(ValueError, match="mining must be one of"):
        TripletLoss(mining="hardest")
    with pytest.raises(ValueError, match="sampling must be one of"):
        NPairLoss(sampling="random")
    with pytest.raises(ValueError, match="triplet_mask"):
        triplet_loss(S, y, triplet_mask=torch.ones(9, 9, dtype=torch.bool))
    assert "margin=1.0" in repr(LiftedStructureLoss()) and "beta=50.0" in repr(BinLiftedLoss())
